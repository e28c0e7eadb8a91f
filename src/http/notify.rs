//! A turn's `notify` (docs/design.md §20): the people to mail when the turn waits, checked before the registration's
//! transaction and queued in it (`storage::mail_outbox`), so that a mail goes out after the commit or not at all.

use sqlx::PgConnection;

use super::error::ApiError;
use crate::domain::notify::{self, MAX_NOTIFIED, NotifyOutcome};
use crate::storage::runs::RunRow;
use crate::storage::{mail_outbox, users};

/// The uids of a body's `notify`, refused 422 when there are more than [`MAX_NOTIFIED`] or one is not a uid.
pub fn checked(notify: Option<&[i64]>) -> Result<&[i64], ApiError> {
    let uids = notify.unwrap_or_default();
    if uids.len() > MAX_NOTIFIED {
        return Err(ApiError::unprocessable(
            "too_many_notified",
            format!("notify names at most {MAX_NOTIFIED} people"),
        ));
    }
    if uids.iter().any(|uid| *uid < 1) {
        return Err(ApiError::unprocessable(
            "invalid_uid",
            "notify must list uids of at least 1",
        ));
    }
    Ok(uids)
}

/// Queues a mail to each person of `uids` who may be told of `run`'s waiting turn, in the caller's transaction;
/// `None` when the turn named nobody.
pub async fn queue(
    conn: &mut PgConnection,
    run: &RunRow,
    uids: &[i64],
) -> Result<Option<NotifyOutcome>, ApiError> {
    if uids.is_empty() {
        return Ok(None);
    }
    let named = users::named(&mut *conn, &run.tenant, uids).await?;
    let outcome = notify::sort(&named, run.owner_uid);
    mail_outbox::enqueue(conn, &run.tenant, run.id, run.turn_index, &outcome.queued).await?;
    Ok(Some(outcome))
}
