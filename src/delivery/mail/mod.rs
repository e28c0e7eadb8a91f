//! Mail to the people who may decide a waiting turn (docs/design.md §20), sent after the commit from the mail
//! outbox (`storage::mail_outbox`), through SMTP (`smtp`).
//!
//! Nothing here touches a decision: the registration only queued rows in its transaction; this task takes them on
//! its own connection, makes each person's link, and sends. A row is taken under a lease, so that two instances
//! never send it at once; it ends `sent`, or `moot` (the turn no longer waits, or the person may no longer decide it
//! or has no address), or `capped` (past a per-hour cap), or `failed` (refused for good, or out of attempts); a
//! failure that may pass is tried again with a growing delay. A crash between the server taking a mail and the row
//! ending sends it again: one mail twice, never none. Logs name the run and the uid, never an address.

mod smtp;

use std::panic::AssertUnwindSafe;
use std::time::Duration;

use futures_util::FutureExt;
use lettre::message::{Mailbox, header::ContentType};
use lettre::{AsyncTransport, Message};
use tokio::sync::watch;
use tokio::task::JoinHandle;

pub use smtp::{SmtpError, smtp_uses_tls, transport};

use crate::approval_links::{self, LinkFor, LinkSettings};
use crate::domain::authorize::token_user_may_decide;
use crate::domain::mail_text::{self, MailFacts};
use crate::domain::vocabulary::RunStatus;
use crate::metrics;
use crate::storage::mail_outbox::{self, DueMail, MailOutcome};
use crate::storage::{Database, links, users};

/// How many due rows one round takes.
const BATCH: i64 = 16;
/// How long a taken row is kept from other senders: well past one SMTP exchange with its timeouts.
const LEASE_SECS: f64 = 300.0;
/// Attempts before a row fails for good (about an hour of growing delays).
const MAX_ATTEMPTS: i32 = 12;
/// The first retry's delay; each later one doubles, up to [`MAX_RETRY_DELAY`].
const FIRST_RETRY_DELAY: Duration = Duration::from_secs(2);
const MAX_RETRY_DELAY: Duration = Duration::from_secs(600);
/// How long the sender sleeps when nothing is due.
const IDLE_POLL: Duration = Duration::from_millis(500);

/// What the sender needs: where to send, as whom, the links it makes, and the caps.
pub struct MailSettings {
    pub transport: lettre::AsyncSmtpTransport<lettre::Tokio1Executor>,
    pub from: Mailbox,
    pub links: LinkSettings,
    pub per_tenant_per_hour: u32,
    pub per_person_per_hour: u32,
}

/// Starts the sender; it stops when `stop` turns true.
pub fn spawn(
    pool: Database,
    settings: MailSettings,
    mut stop: watch::Receiver<bool>,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            let sent_some = match round(&pool, &settings).await {
                Ok(taken) => taken > 0,
                Err(error) => {
                    tracing::warn!(error = %error, "the mail outbox could not be read; trying again");
                    false
                }
            };
            if *stop.borrow() {
                return;
            }
            if !sent_some {
                tokio::select! {
                    _ = tokio::time::sleep(IDLE_POLL) => {}
                    _ = stop.changed() => return,
                }
            }
        }
    })
}

/// One round: takes the due rows and handles each; answers how many it took.
async fn round(
    pool: &Database,
    settings: &MailSettings,
) -> Result<usize, crate::storage::StorageError> {
    let due = mail_outbox::take_due(pool, BATCH, LEASE_SECS).await?;
    let taken = due.len();
    for mail in due {
        let key = mail.key();
        // A panic while one mail is handled (a library's, on input nobody foresaw) ends that row, never the sender.
        let handled = AssertUnwindSafe(handle(pool, settings, &mail))
            .catch_unwind()
            .await;
        let outcome = match handled {
            Ok(Ok(outcome)) => outcome,
            Err(_) => {
                tracing::error!(run_id = %key.run_id, uid = key.uid, "handling a mail panicked; it ends failed");
                Handled::Ended(MailOutcome::Failed)
            }
            Ok(Err(error)) => {
                tracing::warn!(run_id = %key.run_id, uid = key.uid, error = %error, "a mail was not handled");
                // The lease keeps it from others until it runs out; then it is tried again.
                continue;
            }
        };
        match outcome {
            Handled::Ended(outcome) => {
                metrics::mail(outcome.as_str());
                mail_outbox::end(pool, key, outcome).await?;
            }
            Handled::Retry(delay) => {
                metrics::mail("retried");
                mail_outbox::retry_in(pool, key, delay.as_secs_f64()).await?;
            }
        }
    }
    Ok(taken)
}

/// What became of one row.
enum Handled {
    Ended(MailOutcome),
    Retry(Duration),
}

async fn handle(
    pool: &Database,
    settings: &MailSettings,
    mail: &DueMail,
) -> Result<Handled, crate::storage::StorageError> {
    let waits = mail.run_status == RunStatus::WaitingForApproval.as_str()
        && mail.run_turn_index == mail.turn_index;
    let facts = users::facts_of_joined(mail.is_admin, mail.can_approve_others, mail.disabled);
    let may_decide = token_user_may_decide(mail.uid, mail.owner_uid, facts.as_ref());
    let (Some(address), true, true) = (mail.email.as_deref(), waits, may_decide) else {
        return Ok(Handled::Ended(MailOutcome::Moot));
    };
    let (for_tenant, for_person) =
        mail_outbox::sent_last_hour(pool, &mail.tenant, mail.uid).await?;
    if for_tenant >= i64::from(settings.per_tenant_per_hour)
        || for_person >= i64::from(settings.per_person_per_hour)
    {
        tracing::warn!(run_id = %mail.run_id, uid = mail.uid, "a mail was not sent: over MAIL_PER_*_PER_HOUR");
        return Ok(Handled::Ended(MailOutcome::Capped));
    }
    let Ok(to) = address.parse::<lettre::Address>() else {
        // Checked when it was set; a row written otherwise is not a mail address.
        return Ok(Handled::Ended(MailOutcome::Failed));
    };
    let link = match approval_links::make(
        pool,
        &settings.links,
        &LinkFor {
            tenant: &mail.tenant,
            run_id: mail.run_id,
            turn_index: mail.turn_index,
            turn_digest: &mail.turn_digest,
            uid: mail.uid,
            made_by: "mail",
        },
    )
    .await
    {
        Ok(link) => link,
        Err(approval_links::MakeError::Storage(error)) => return Err(error),
        // Start-up refuses SMTP_URL without PUBLIC_URL; without it, no mail can carry a link.
        Err(approval_links::MakeError::PublicUrlUnset) => {
            return Ok(Handled::Ended(MailOutcome::Failed));
        }
    };
    let run_id = mail.run_id.to_string();
    let (subject, body) = mail_text::compose(&MailFacts {
        owner: mail.owner_username.as_deref(),
        owner_uid: mail.owner_uid,
        source: mail.source.as_deref(),
        tools: &mail.tools,
        run_id: &run_id,
        turn_expires_at: mail.expires_at,
        link: &link.url,
        link_expires_at: link.expires_at,
    });
    let message = Message::builder()
        .from(settings.from.clone())
        // The username is the host application's, and may hold anything but NUL: as a display name it is one line.
        .to(Mailbox::new(
            mail.username.as_deref().map(mail_text::one_line),
            to,
        ))
        .subject(subject)
        .header(ContentType::TEXT_PLAIN)
        .body(body);
    let message = match message {
        Ok(message) => message,
        Err(error) => {
            tracing::warn!(run_id = %mail.run_id, uid = mail.uid, error = %error, "a mail could not be built");
            links::revoke(pool, &mail.tenant, mail.run_id, link.id).await?;
            return Ok(Handled::Ended(MailOutcome::Failed));
        }
    };
    match settings.transport.send(message).await {
        Ok(_) => {
            tracing::info!(run_id = %mail.run_id, uid = mail.uid, "mail sent");
            Ok(Handled::Ended(MailOutcome::Sent))
        }
        Err(error) => {
            // The link it carried was never delivered: it decides nothing.
            links::revoke(pool, &mail.tenant, mail.run_id, link.id).await?;
            // lettre's error never holds the recipient's address, only the server's answer.
            let for_good = error.is_permanent() || mail.attempts >= MAX_ATTEMPTS;
            tracing::warn!(
                run_id = %mail.run_id,
                uid = mail.uid,
                attempts = mail.attempts,
                for_good,
                error = %error,
                "a mail was not sent"
            );
            if for_good {
                Ok(Handled::Ended(MailOutcome::Failed))
            } else {
                Ok(Handled::Retry(retry_delay(mail.attempts)))
            }
        }
    }
}

/// The delay before the attempt after `attempts`: doubling from [`FIRST_RETRY_DELAY`], at most [`MAX_RETRY_DELAY`].
fn retry_delay(attempts: i32) -> Duration {
    let doublings = u32::try_from(attempts.saturating_sub(1))
        .unwrap_or(0)
        .min(16);
    FIRST_RETRY_DELAY
        .saturating_mul(1 << doublings)
        .min(MAX_RETRY_DELAY)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retries_wait_twice_as_long_each_time_up_to_ten_minutes() {
        assert_eq!(retry_delay(1), Duration::from_secs(2));
        assert_eq!(retry_delay(2), Duration::from_secs(4));
        assert_eq!(retry_delay(5), Duration::from_secs(32));
        assert_eq!(retry_delay(MAX_ATTEMPTS), MAX_RETRY_DELAY);
        assert_eq!(retry_delay(i32::MAX), MAX_RETRY_DELAY);
    }
}
