//! Webhook subscriptions: managing them, and the claims, cursors and retry state of their delivery.
//!
//! A subscription follows its tenant's events with a cursor, by the same `(xid, id)` rule as the feed
//! (`super::outbox`), so each event of its types reaches it, in order. One instance at a time holds a subscription
//! (a lease, claimed with `for update skip locked`): one attempt at a time, and when the holder dies, its lease runs
//! out and another instance sends the same event again.

use std::time::Duration;

use chrono::{DateTime, Utc};
use sqlx::PgExecutor;
use uuid::Uuid;

use super::outbox::{EVENT_COLUMNS, EventRow, Position, StoredEvent, readable_past};
use super::sealed::{self, Column, Row};
use super::{Database, StorageError, sql};
use crate::sealing::Sealer;

/// A subscription as listed: never its secret.
#[derive(Debug, Clone, sqlx::FromRow, serde::Serialize)]
pub struct SubscriptionRow {
    pub id: Uuid,
    pub tenant: String,
    pub url: String,
    pub event_types: Vec<String>,
    pub state: String,
    pub attempts: i32,
    pub failing_since: Option<DateTime<Utc>>,
    pub last_error: Option<String>,
    pub next_attempt_at: DateTime<Utc>,
    pub delivered_total: i64,
    /// Events of its types not delivered yet, among the next [`BACKLOG_SCAN`] events of its tenant past its cursor.
    pub backlog: i64,
    /// Whether the count stopped at [`BACKLOG_SCAN`] events past the cursor: the backlog is at least `backlog`.
    pub backlog_capped: bool,
    /// Until when the secret before the last rotation still signs beside the current one; `None` when none does.
    pub previous_secret_expires_at: Option<DateTime<Utc>>,
    pub created_at: DateTime<Utc>,
}

/// Most events past a subscription's cursor that its backlog count reads (docs/design.md §17): the listing and
/// `/metrics` cost at most this many index entries per subscription, however far behind a subscription is (before, the
/// count read every event past the cursor: subscriptions x events).
pub const BACKLOG_SCAN: i64 = 1_000;

/// The listing of the subscriptions `source` names (a table or a CTE, aliased `s`): the backlog is counted over the
/// next `BACKLOG_SCAN` events of the tenant past the cursor, in the order of the index `events_tenant_order`.
///
/// The cursor is compared with the tenant in the row, `(tenant, xid, id) > (…)`, so that only that index can serve
/// the condition: written `(xid, id) > (…)`, the planner scans the primary key `(xid, id)` and filters by tenant,
/// which reads every other tenant's events past the cursor before the limit is reached (a subscription of a small
/// tenant among 500,000 events: 25,760 buffers and 700 ms, against 20 buffers and 0.3 ms through the tenant's
/// index).
fn listing(source: &str) -> String {
    format!(
        "select s.id, s.tenant, s.url, s.event_types, s.state, s.attempts, s.failing_since,
                s.last_error, s.next_attempt_at, s.delivered_total, s.created_at,
                b.backlog, b.backlog_capped,
                case when s.previous_secret_until > now() then s.previous_secret_until end
                    as previous_secret_expires_at
         from {source} s
         cross join lateral (
             select count(*) filter (where e.type = any(s.event_types)) as backlog,
                    count(*) >= {BACKLOG_SCAN} as backlog_capped
             from (select e.type from events e
                   where e.tenant = s.tenant
                     and (e.tenant, e.xid, e.id) > (s.tenant, s.cursor_xid, s.cursor_id)
                   order by e.tenant, e.xid, e.id limit {BACKLOG_SCAN}) e) b"
    )
}

/// What creating a subscription stores.
pub struct NewSubscription<'a> {
    pub id: Uuid,
    pub tenant: &'a str,
    pub url: &'a str,
    pub event_types: &'a [String],
    pub secret: &'a str,
}

/// What [`insert`] did.
#[derive(Debug)]
pub enum Inserted {
    Created(Box<SubscriptionRow>),
    /// The tenant already has `max_per_tenant` subscriptions.
    Full,
}

/// Creates a subscription unless its tenant already has `max_per_tenant`, with its secret sealed when keys are
/// configured. It receives the events committed from now on: its cursor starts below every transaction still
/// running, so an event being written right now is not missed (one committed a moment ago may come too).
///
/// Creations of one tenant take a transaction-scoped advisory lock on the tenant's name first, so two at once cannot
/// both pass the count (it is released at commit, so it holds behind a transaction-mode pooler too).
pub async fn insert(
    db: &Database,
    new: &NewSubscription<'_>,
    max_per_tenant: i64,
) -> Result<Inserted, StorageError> {
    let secret = sealed::seal(
        db.sealer(),
        Column::WebhookSecret,
        Row::subscription(new.id),
        new.secret,
    );
    let mut tx = db.begin().await?;
    // Two statements: the count's snapshot must be taken after the lock is held, to see a creation it waited for.
    sql::query("select pg_advisory_xact_lock(hashtextextended('webhook_subscriptions ' || $1, 0))")
        .bind(new.tenant)
        .execute(&mut *tx)
        .await?;
    let existing: i64 =
        sql::query_scalar("select count(*) from webhook_subscriptions where tenant = $1")
            .bind(new.tenant)
            .fetch_one(&mut *tx)
            .await?;
    if existing >= max_per_tenant {
        tx.rollback().await?;
        return Ok(Inserted::Full);
    }
    let source = "(insert into webhook_subscriptions (id, tenant, url, event_types, secret, secret_sealed, cursor_xid)
                   values ($1, $2, $3, $4, $5, $6, events_readable_below())
                   returning *)";
    let row = sql::query_as::<SubscriptionRow>(sqlx::AssertSqlSafe(format!(
        "with inserted as {source} {}",
        listing("inserted")
    )))
    .bind(new.id)
    .bind(new.tenant)
    .bind(new.url)
    .bind(new.event_types)
    .bind(secret.clear)
    .bind(secret.sealed)
    .fetch_one(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(Inserted::Created(Box::new(row)))
}

/// Gives a subscription of the tenant (of any tenant when `None`) a new secret, sealed when keys are configured; the
/// current one signs beside it for `overlap` (none when zero), replacing any previous one. `None`: no such
/// subscription.
pub async fn rotate_secret(
    db: &Database,
    tenant: Option<&str>,
    id: Uuid,
    new_secret: &str,
    overlap: Duration,
) -> Result<Option<SubscriptionRow>, StorageError> {
    let sealer = db.sealer();
    let row = Row::subscription(id);
    let mut tx = db.begin().await?;
    let current = sql::query_as::<(Option<String>, Option<Vec<u8>>)>(
        "select secret, secret_sealed from webhook_subscriptions
         where id = $1 and ($2::text is null or tenant = $2) for update",
    )
    .bind(id)
    .bind(tenant)
    .fetch_optional(&mut *tx)
    .await?;
    let Some((clear, sealed_secret)) = current else {
        tx.rollback().await?;
        return Ok(None);
    };
    let previous = if overlap.is_zero() {
        sealed::Stored::default()
    } else {
        // Sealed again: the associated data names the column, so the current secret's ciphertext would not open as
        // the previous one.
        let current = sealed::open_required(
            sealer,
            Column::WebhookSecret,
            row,
            clear,
            sealed_secret.as_deref(),
        )?;
        sealed::seal(sealer, Column::WebhookPreviousSecret, row, &current)
    };
    let secret = sealed::seal(sealer, Column::WebhookSecret, row, new_secret);
    let until = (!overlap.is_zero()).then_some(overlap.as_secs_f64());
    let source = "(update webhook_subscriptions
                   set secret = $2, secret_sealed = $3, previous_secret = $4, previous_secret_sealed = $5,
                       previous_secret_until = now() + make_interval(secs => $6::float8)
                   where id = $1
                   returning *)";
    let listed = sql::query_as::<SubscriptionRow>(sqlx::AssertSqlSafe(format!(
        "with rotated as {source} {}",
        listing("rotated")
    )))
    .bind(id)
    .bind(secret.clear)
    .bind(secret.sealed)
    .bind(previous.clear)
    .bind(previous.sealed)
    .bind(until)
    .fetch_one(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(Some(listed))
}

/// The subscriptions of a tenant, or of every tenant, oldest first.
pub async fn list(
    db: impl PgExecutor<'_>,
    tenant: Option<&str>,
) -> Result<Vec<SubscriptionRow>, StorageError> {
    let rows = sql::query_as::<SubscriptionRow>(sqlx::AssertSqlSafe(format!(
        "{} where $1::text is null or s.tenant = $1 order by s.created_at, s.id",
        listing("webhook_subscriptions")
    )))
    .bind(tenant)
    .fetch_all(db)
    .await?;
    Ok(rows)
}

/// Deletes a subscription of the tenant (of any tenant when `None`); `false` when there is none.
pub async fn remove(
    db: impl PgExecutor<'_>,
    tenant: Option<&str>,
    id: Uuid,
) -> Result<bool, StorageError> {
    let deleted = sql::query(
        "delete from webhook_subscriptions where id = $1 and ($2::text is null or tenant = $2)",
    )
    .bind(id)
    .bind(tenant)
    .execute(db)
    .await?;
    Ok(deleted.rows_affected() == 1)
}

/// How many subscriptions exist: an instance with none does not poll for events, and one that already holds them
/// all need not try to claim more at every new event.
pub async fn count(db: impl PgExecutor<'_>) -> Result<i64, StorageError> {
    let count = sql::query_scalar("select count(*) from webhook_subscriptions")
        .fetch_one(db)
        .await?;
    Ok(count)
}

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

/// Takes up to `limit` subscriptions that are due and have readable events past their cursor, and nobody holds.
/// Events count as readable below `floor` at least (`super::outbox::page` says why).
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
    // The ranking is materialized first and joined to the table by its key: written as a join of two subqueries,
    // the planner compared every candidate with every other (1,000 subscriptions: 450 ms against 35-80 ms).
    let rows = sql::query_as::<ClaimedRow>(sqlx::AssertSqlSafe(format!(
        "with ranked as materialized (
             select w.id,
                    row_number() over (partition by w.tenant order by w.next_attempt_at, w.id)
                        + coalesce(h.held, 0) as turn,
                    max(w.next_attempt_at) over (partition by w.tenant) as tenant_served
             from webhook_subscriptions w
             left join (select tenant, count(*) as held from webhook_subscriptions
                        where lease_until >= now() group by tenant) h on h.tenant = w.tenant
             where {free}
               and exists (select 1 from events e
                           where e.tenant = w.tenant and {}
                             and e.type = any(w.event_types)))
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
        readable_past("e.", "w.cursor_xid", "w.cursor_id", "$4")
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
         where tenant = $1 and {} and type = any($5)
         order by xid, id limit $6",
        readable_past("", "$2::text::xid8", "$3", "$4")
    )))
    .bind(&subscription.tenant)
    .bind(after.xid.to_string())
    .bind(after.id)
    .bind(floor.to_string())
    .bind(&subscription.event_types)
    .bind(limit)
    .fetch_all(db)
    .await?;
    super::outbox::rows_to_events(rows)
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

/// Subscriptions by state and their undelivered events, for `/metrics`.
pub async fn backlog(db: impl PgExecutor<'_>) -> Result<Vec<(String, i64, i64)>, StorageError> {
    let rows = sql::query_as::<(String, i64, i64)>(sqlx::AssertSqlSafe(format!(
        "select state, count(*), coalesce(sum(backlog), 0)::bigint
         from ({}) listed group by state order by state",
        listing("webhook_subscriptions")
    )))
    .fetch_all(db)
    .await?;
    Ok(rows)
}
