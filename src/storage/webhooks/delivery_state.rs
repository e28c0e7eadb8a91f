//! What delivering a subscription writes in its row: the claim (a lease held by one instance at a time), the cursor
//! moved past what was delivered, the retry state of a failure, and the signing secrets read again before a send.

use std::time::Duration;

use chrono::{DateTime, Utc};
use sqlx::PgExecutor;
use uuid::Uuid;

use super::super::outbox::{self, EVENT_COLUMNS, EventRow, Position, StoredEvent, readable_range};
use super::super::sealed::{self, Column, Row};
use super::super::{StorageError, sql};
use crate::sealing::Sealer;

/// A subscription held by this instance for delivery, with what signing and retrying need.
#[derive(Debug, Clone)]
pub struct Claimed {
    pub id: Uuid,
    pub tenant: String,
    pub url: String,
    pub event_types: Vec<String>,
    /// The signing secret; `None` when it does not open (a key missing from ENCRYPTION_KEYS): every attempt then
    /// fails, saying so, and nothing is sent unsigned.
    pub secret: Option<String>,
    /// The secret before the last rotation and until when it signs too.
    pub previous: Option<(String, DateTime<Utc>)>,
    pub cursor: Position,
    pub attempts: i32,
}

impl Claimed {
    /// The secrets that sign a request sent at `now`: the current one, and the previous one until it retires.
    pub fn signing_secrets(&self, now: DateTime<Utc>) -> Vec<&str> {
        let previous = self
            .previous
            .as_ref()
            .filter(|(_, until)| now < *until)
            .map(|(secret, _)| secret.as_str());
        self.secret.as_deref().into_iter().chain(previous).collect()
    }
}

#[derive(sqlx::FromRow)]
struct ClaimedRow {
    id: Uuid,
    tenant: String,
    url: String,
    event_types: Vec<String>,
    secret: Option<String>,
    secret_sealed: Option<Vec<u8>>,
    previous_secret: Option<String>,
    previous_secret_sealed: Option<Vec<u8>>,
    previous_secret_until: Option<DateTime<Utc>>,
    cursor_xid: String,
    cursor_id: i64,
    attempts: i32,
}

/// How many events past its cursor the claim reads of each subscription, of any type: it is claimed when one of them
/// is of its types, and its cursor passes them when none is. Bounds what a claim reads however many events there are
/// (docs/design.md §17).
pub const CLAIM_PAGE: i64 = 1000;

/// Takes up to `limit` subscriptions that are due and have readable events of their types past their cursor, and
/// nobody holds. Events count as readable below `floor` at least (`storage::outbox::page` says why).
///
/// Each free subscription's next readable events are read as one index range from its cursor, at most
/// [`CLAIM_PAGE`] of them, whatever their type: the claim reads no more however many events there are. A free
/// subscription none of whose events read are of its types has its cursor passed over them by the same statement,
/// so that they are not read again at the next claim: each is readable (its set can no longer grow below the
/// cursor) and not subscribed to, so nothing that matches is skipped. A subscription whose cursor moved meanwhile
/// (written by a holder whose lease ran out) is left as it is.
///
/// Slots are shared between tenants (docs/design.md §17): candidates are taken in turns, a tenant's n-th waiting
/// subscription counting as its n-th plus as many as the tenant holds already (on any instance), so a tenant with
/// many subscriptions waiting, or holding many, goes after one holding few. Within a turn, the tenant served least
/// recently goes first: a release or a delivery sets a subscription's `next_attempt_at` to now, so the latest of a
/// tenant's tells when it was last served (one whose subscription just gave its slot up goes after one that has
/// been waiting). Then the longest due first.
/// A previous secret past its overlap is dropped by the same statement.
pub async fn claim(
    db: impl PgExecutor<'_>,
    sealer: &Sealer,
    owner: Uuid,
    lease: Duration,
    floor: u64,
    limit: i64,
) -> Result<Vec<Claimed>, StorageError> {
    let free = "(w.lease_until is null or w.lease_until < now()) and w.next_attempt_at <= now()";
    // `page`: each free subscription's last event read and whether any read is of its types. Materialized, so that
    // the pass and the ranking share one read. The ranking is materialized too and joined to the table by its key:
    // written as a join of two subqueries, the planner compared every candidate with every other (1,000
    // subscriptions: 450 ms against 35-80 ms). The pass and the claim touch different subscriptions (with and
    // without events of their types), so no row is updated twice.
    let rows = sql::query_as::<ClaimedRow>(sqlx::AssertSqlSafe(format!(
        "with page as materialized (
             select w.id, w.cursor_xid, w.cursor_id, p.xid, p.id as event_id, p.matching
             from webhook_subscriptions w
             cross join lateral (
                 select e.xid, e.id, bool_or(e.type = any(w.event_types)) over () as matching,
                        row_number() over (order by e.xid desc, e.id desc) as from_last
                 from (select e.xid, e.id, e.type from events e
                       where {}
                       order by e.tenant, e.xid, e.id limit {CLAIM_PAGE}) e) p
             where {free} and p.from_last = 1),
         passed as (
             update webhook_subscriptions s set cursor_xid = page.xid, cursor_id = page.event_id
             from page
             where s.id = page.id and not page.matching
               and (s.lease_until is null or s.lease_until < now())
               and s.cursor_xid = page.cursor_xid and s.cursor_id = page.cursor_id),
         ranked as materialized (
             select w.id,
                    row_number() over (partition by w.tenant order by w.next_attempt_at, w.id)
                        + coalesce(h.held, 0) as turn,
                    max(w.next_attempt_at) over (partition by w.tenant) as tenant_served
             from webhook_subscriptions w
             join page on page.id = w.id and page.matching
             left join (select tenant, count(*) as held from webhook_subscriptions
                        where lease_until >= now() group by tenant) h on h.tenant = w.tenant)
         update webhook_subscriptions s set lease_owner = $1, lease_until = now() + make_interval(secs => $2),
             previous_secret = case when s.previous_secret_until > now() then s.previous_secret end,
             previous_secret_sealed = case when s.previous_secret_until > now() then s.previous_secret_sealed end,
             previous_secret_until = case when s.previous_secret_until > now() then s.previous_secret_until end
         where s.id in (
             select w.id from ranked join webhook_subscriptions w on w.id = ranked.id
             where {free}
             order by ranked.turn, ranked.tenant_served, w.next_attempt_at
             limit $3
             for update of w skip locked)
         returning s.id, s.tenant, s.url, s.event_types, s.secret, s.secret_sealed, s.previous_secret,
                   s.previous_secret_sealed, s.previous_secret_until, s.cursor_xid::text as cursor_xid, s.cursor_id,
                   s.attempts",
        readable_range("e.", "w.tenant", "w.cursor_xid", "w.cursor_id", "$4")
    )))
    .bind(owner)
    .bind(lease.as_secs_f64())
    .bind(limit)
    .bind(floor.to_string())
    .fetch_all(db)
    .await?;
    rows.into_iter()
        .map(|row| {
            let SigningSecrets { secret, previous } = SecretsRow {
                secret: row.secret,
                secret_sealed: row.secret_sealed,
                previous_secret: row.previous_secret,
                previous_secret_sealed: row.previous_secret_sealed,
                previous_secret_until: row.previous_secret_until,
            }
            .open(sealer, row.id);
            Ok(Claimed {
                cursor: Position {
                    xid: row.cursor_xid.parse().map_err(|_| {
                        StorageError::Corrupt(format!("cursor xid {:?}", row.cursor_xid))
                    })?,
                    id: row.cursor_id,
                },
                id: row.id,
                tenant: row.tenant,
                url: row.url,
                event_types: row.event_types,
                secret,
                previous,
                attempts: row.attempts,
            })
        })
        .collect()
}

/// The secrets a subscription signs with, as they stand now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SigningSecrets {
    /// `None` when it does not open (a key missing from ENCRYPTION_KEYS).
    pub secret: Option<String>,
    /// The secret before the last rotation and until when it signs too.
    pub previous: Option<(String, DateTime<Utc>)>,
}

#[derive(sqlx::FromRow)]
struct SecretsRow {
    secret: Option<String>,
    secret_sealed: Option<Vec<u8>>,
    previous_secret: Option<String>,
    previous_secret_sealed: Option<Vec<u8>>,
    previous_secret_until: Option<DateTime<Utc>>,
}

impl SecretsRow {
    fn open(self, sealer: &Sealer, id: Uuid) -> SigningSecrets {
        let at = Row::subscription(id);
        // `open` logs a secret that does not open (with the subscription's id and the key id); the delivery then
        // fails for want of a secret, and the other subscriptions go on.
        let secret = sealed::open(
            sealer,
            Column::WebhookSecret,
            at,
            self.secret,
            self.secret_sealed.as_deref(),
        )
        .ok()
        .flatten();
        let previous = match self.previous_secret_until {
            Some(until) => sealed::open(
                sealer,
                Column::WebhookPreviousSecret,
                at,
                self.previous_secret,
                self.previous_secret_sealed.as_deref(),
            )
            .ok()
            .flatten()
            .map(|secret| (secret, until)),
            None => None,
        };
        SigningSecrets { secret, previous }
    }
}

/// The subscription's signing secrets as committed now, read again by its holder before it sends, so that a
/// rotation made on any instance signs the holder's next requests (docs/design.md §17). `None`: the subscription is
/// gone.
pub async fn signing_secrets(
    db: impl PgExecutor<'_>,
    sealer: &Sealer,
    id: Uuid,
) -> Result<Option<SigningSecrets>, StorageError> {
    let row = sql::query_as::<SecretsRow>(
        "select secret, secret_sealed, previous_secret, previous_secret_sealed, previous_secret_until
           from webhook_subscriptions where id = $1",
    )
    .bind(id)
    .fetch_optional(db)
    .await?;
    Ok(row.map(|row| row.open(sealer, id)))
}

/// The next readable events (below `floor` at least) of the subscription's types past `after`, in order.
pub async fn pending_events(
    db: impl PgExecutor<'_>,
    subscription: &Claimed,
    after: Position,
    floor: u64,
    limit: i64,
) -> Result<Vec<StoredEvent>, StorageError> {
    let rows = sql::query_as::<EventRow>(sqlx::AssertSqlSafe(format!(
        "select {EVENT_COLUMNS} from events
         where {} and type = any($5)
         order by tenant, xid, id limit $6",
        readable_range("", "$1", "$2::text::xid8", "$3", "$4")
    )))
    .bind(&subscription.tenant)
    .bind(after.xid.to_string())
    .bind(after.id)
    .bind(floor.to_string())
    .bind(&subscription.event_types)
    .bind(limit)
    .fetch_all(db)
    .await?;
    outbox::rows_to_events(rows)
}

/// Moves the cursor past `count` (at least 1) delivered events, the last at `position`, while `owner` still holds
/// the subscription, and in the same statement renews the lease for `hold`, or gives the subscription up when `hold`
/// is `None`. `false`: another instance took the subscription over (this one was slower than its lease), so this
/// one stops.
pub async fn delivered(
    db: impl PgExecutor<'_>,
    id: Uuid,
    owner: Uuid,
    position: Position,
    count: i64,
    hold: Option<Duration>,
) -> Result<bool, StorageError> {
    let done = sql::query(
        "update webhook_subscriptions
         set cursor_xid = $3::text::xid8, cursor_id = $4, state = 'active', attempts = 0, failing_since = null,
             last_error = null, next_attempt_at = now(), delivered_total = delivered_total + $6,
             lease_owner = case when $5::float8 is null then null else lease_owner end,
             lease_until = now() + make_interval(secs => $5::float8)
         where id = $1 and lease_owner = $2",
    )
    .bind(id)
    .bind(owner)
    .bind(position.xid.to_string())
    .bind(position.id)
    .bind(hold.map(|hold| hold.as_secs_f64()))
    .bind(count)
    .execute(db)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// Renews the lease for `hold` while `owner` still holds the subscription, when there is no cursor to write with it.
/// `false`: another instance took the subscription over.
pub async fn renew(
    db: impl PgExecutor<'_>,
    id: Uuid,
    owner: Uuid,
    hold: Duration,
) -> Result<bool, StorageError> {
    let done = sql::query(
        "update webhook_subscriptions set lease_until = now() + make_interval(secs => $3)
         where id = $1 and lease_owner = $2",
    )
    .bind(id)
    .bind(owner)
    .bind(hold.as_secs_f64())
    .execute(db)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// Records a failed attempt, schedules the next one after `retry_in`, and gives the subscription up; it becomes
/// `failing` once its attempts have failed for longer than `window`. `error` must hold no payload.
pub async fn failed(
    db: impl PgExecutor<'_>,
    id: Uuid,
    owner: Uuid,
    error: &str,
    retry_in: Duration,
    window: Duration,
) -> Result<(), StorageError> {
    sql::query(
        "update webhook_subscriptions
         set attempts = attempts + 1, failing_since = coalesce(failing_since, now()), last_error = $3,
             next_attempt_at = now() + make_interval(secs => $4),
             state = case when now() - coalesce(failing_since, now()) >= make_interval(secs => $5)
                          then 'failing' else state end,
             lease_owner = null, lease_until = null
         where id = $1 and lease_owner = $2",
    )
    .bind(id)
    .bind(owner)
    .bind(error)
    .bind(retry_in.as_secs_f64())
    .bind(window.as_secs_f64())
    .execute(db)
    .await?;
    Ok(())
}

/// Gives a subscription up with nothing left to send, on shutdown, or to let others have its slot, so another
/// instance may take it at once; it goes behind the subscriptions due before now (`claim` takes the longest due
/// first).
pub async fn release(db: impl PgExecutor<'_>, id: Uuid, owner: Uuid) -> Result<(), StorageError> {
    sql::query(
        "update webhook_subscriptions
         set lease_owner = null, lease_until = null, next_attempt_at = greatest(next_attempt_at, now())
         where id = $1 and lease_owner = $2",
    )
    .bind(id)
    .bind(owner)
    .execute(db)
    .await?;
    Ok(())
}
