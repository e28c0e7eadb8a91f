//! The mail outbox (docs/design.md §20, migrations/0020): a row per person to tell of a waiting turn, written in the
//! transaction that made the turn wait, taken by the sender after the commit, and ended once.

use chrono::{DateTime, Utc};
use sqlx::{PgConnection, PgExecutor};
use uuid::Uuid;

use super::{StorageError, sql};

/// Which row: a person, for one turn of one run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MailKey {
    pub run_id: Uuid,
    pub turn_index: i32,
    pub uid: i64,
}

/// A due row with everything its mail and its checks need, read as the sender takes it. The person's columns are
/// `None` when they have no row in the tenant; `tools` is in the turn's order.
#[derive(sqlx::FromRow)]
pub struct DueMail {
    pub run_id: Uuid,
    pub turn_index: i32,
    pub uid: i64,
    pub tenant: String,
    /// Attempts so far, this one included.
    pub attempts: i32,
    pub owner_uid: i64,
    pub run_status: String,
    pub run_turn_index: i32,
    pub turn_digest: String,
    pub expires_at: Option<DateTime<Utc>>,
    pub email: Option<String>,
    pub username: Option<String>,
    pub is_admin: Option<bool>,
    pub can_approve_others: Option<bool>,
    pub disabled: Option<bool>,
    pub owner_username: Option<String>,
    /// The run's `source` (docs/design.md §2), which the mail names.
    pub source: Option<String>,
    pub tools: Vec<String>,
}

impl DueMail {
    pub fn key(&self) -> MailKey {
        MailKey {
            run_id: self.run_id,
            turn_index: self.turn_index,
            uid: self.uid,
        }
    }
}

/// How a row ended (the `outcome` column).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MailOutcome {
    Sent,
    Capped,
    Moot,
    Failed,
}

impl MailOutcome {
    pub fn as_str(self) -> &'static str {
        match self {
            MailOutcome::Sent => "sent",
            MailOutcome::Capped => "capped",
            MailOutcome::Moot => "moot",
            MailOutcome::Failed => "failed",
        }
    }
}

/// Queues a mail to each of `uids` for `run_id`'s turn `turn_index`, in the caller's transaction (the one that made
/// the turn wait). A row already queued for the same person and turn stays as it is: one mail per person per turn.
pub async fn enqueue(
    conn: &mut PgConnection,
    tenant: &str,
    run_id: Uuid,
    turn_index: i32,
    uids: &[i64],
) -> Result<(), StorageError> {
    if uids.is_empty() {
        return Ok(());
    }
    sql::query(
        "insert into mail_outbox (run_id, turn_index, uid, tenant)
         select $1, $2, uid, $3 from unnest($4::bigint[]) as uid
         on conflict do nothing",
    )
    .bind(run_id)
    .bind(turn_index)
    .bind(tenant)
    .bind(uids)
    .execute(conn)
    .await?;
    Ok(())
}

/// Takes up to `limit` due rows, oldest first, skipping rows another sender holds, and puts each `lease_secs` ahead
/// so that no other sender takes it while this one sends; the sender then ends it or sets its next attempt.
pub async fn take_due(
    db: impl PgExecutor<'_>,
    limit: i64,
    lease_secs: f64,
) -> Result<Vec<DueMail>, StorageError> {
    let rows = sql::query_as::<DueMail>(
        "with taken as (
             select run_id, turn_index, uid from mail_outbox
             where outcome is null and next_attempt_at <= now()
             order by next_attempt_at limit $1
             for update skip locked
         ), bumped as (
             update mail_outbox m
             set attempts = m.attempts + 1, next_attempt_at = now() + make_interval(secs => $2)
             from taken t
             where m.run_id = t.run_id and m.turn_index = t.turn_index and m.uid = t.uid
             returning m.run_id, m.turn_index, m.uid, m.tenant, m.attempts
         )
         select b.run_id, b.turn_index, b.uid, b.tenant, b.attempts,
                r.owner_uid::bigint as owner_uid, r.status::text as run_status,
                r.turn_index::integer as run_turn_index, r.turn_digest::text as turn_digest, r.expires_at,
                u.email, u.username, u.is_admin, u.can_approve_others, u.disabled,
                o.username as owner_username, r.source,
                array(select c.tool::text from turn_calls c
                      where c.run_id = b.run_id and c.turn_index = b.turn_index
                      order by c.position) as tools
         from bumped b
         join runs r on r.id = b.run_id
         left join backend_users u on u.tenant = b.tenant and u.uid = b.uid
         left join backend_users o on o.tenant = b.tenant and o.uid = r.owner_uid",
    )
    .bind(limit)
    .bind(lease_secs)
    .fetch_all(db)
    .await?;
    Ok(rows)
}

/// Ends a row with `outcome`.
pub async fn end(
    db: impl PgExecutor<'_>,
    key: MailKey,
    outcome: MailOutcome,
) -> Result<(), StorageError> {
    sql::query(
        "update mail_outbox set outcome = $4, ended_at = now()
         where run_id = $1 and turn_index = $2 and uid = $3 and outcome is null",
    )
    .bind(key.run_id)
    .bind(key.turn_index)
    .bind(key.uid)
    .bind(outcome.as_str())
    .execute(db)
    .await?;
    Ok(())
}

/// Sets a row's next attempt `delay_secs` from now, after an attempt that may succeed later.
pub async fn retry_in(
    db: impl PgExecutor<'_>,
    key: MailKey,
    delay_secs: f64,
) -> Result<(), StorageError> {
    sql::query(
        "update mail_outbox set next_attempt_at = now() + make_interval(secs => $4)
         where run_id = $1 and turn_index = $2 and uid = $3 and outcome is null",
    )
    .bind(key.run_id)
    .bind(key.turn_index)
    .bind(key.uid)
    .bind(delay_secs)
    .execute(db)
    .await?;
    Ok(())
}

/// The mails sent in the last hour for `tenant`, and to `uid` of it: what the per-hour caps are held to.
pub async fn sent_last_hour(
    db: impl PgExecutor<'_>,
    tenant: &str,
    uid: i64,
) -> Result<(i64, i64), StorageError> {
    let counts = sql::query_as::<(i64, i64)>(
        "select count(*), count(*) filter (where uid = $2) from mail_outbox
         where tenant = $1 and outcome = 'sent' and ended_at > now() - interval '1 hour'",
    )
    .bind(tenant)
    .bind(uid)
    .fetch_one(db)
    .await?;
    Ok(counts)
}
