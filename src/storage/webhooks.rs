//! Webhook subscriptions: managing them, and the claims, cursors and retry state of their delivery.
//!
//! A subscription follows its tenant's events with a cursor, by the same `(xid, id)` rule as the feed
//! (`super::events`), so each event of its types reaches it, in order. One instance at a time holds a subscription
//! (a lease, claimed with `for update skip locked`): one attempt at a time, and when the holder dies, its lease runs
//! out and another instance sends the same event again.

use std::time::Duration;

use chrono::{DateTime, Utc};
use sqlx::PgExecutor;
use uuid::Uuid;

use super::events::{EVENT_COLUMNS, EventRow, Position, StoredEvent, readable_past};
use super::{StorageError, sql};

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
    /// Events of its types not delivered yet (bounded by the events' retention).
    pub backlog: i64,
    pub created_at: DateTime<Utc>,
}

const LIST_COLUMNS: &str = "s.id, s.tenant, s.url, s.event_types, s.state, s.attempts, s.failing_since,
    s.last_error, s.next_attempt_at, s.delivered_total, s.created_at,
    (select count(*) from events e
     where e.tenant = s.tenant and (e.xid, e.id) > (s.cursor_xid, s.cursor_id) and e.type = any(s.event_types))
        as backlog";

/// What creating a subscription stores.
pub struct NewSubscription<'a> {
    pub id: Uuid,
    pub tenant: &'a str,
    pub url: &'a str,
    pub event_types: &'a [String],
    pub secret: &'a str,
}

/// Creates a subscription. It receives the events committed from now on: its cursor starts below every transaction
/// still running, so an event being written right now is not missed (one committed a moment ago may come too).
pub async fn insert(
    db: impl PgExecutor<'_>,
    new: &NewSubscription<'_>,
) -> Result<SubscriptionRow, StorageError> {
    let row = sql::query_as::<SubscriptionRow>(sqlx::AssertSqlSafe(format!(
        "with s as (
             insert into webhook_subscriptions (id, tenant, url, event_types, secret, cursor_xid)
             values ($1, $2, $3, $4, $5, events_readable_below())
             returning *)
         select {LIST_COLUMNS} from s"
    )))
    .bind(new.id)
    .bind(new.tenant)
    .bind(new.url)
    .bind(new.event_types)
    .bind(new.secret)
    .fetch_one(db)
    .await?;
    Ok(row)
}

/// The subscriptions of a tenant, or of every tenant, oldest first.
pub async fn list(
    db: impl PgExecutor<'_>,
    tenant: Option<&str>,
) -> Result<Vec<SubscriptionRow>, StorageError> {
    let rows = sql::query_as::<SubscriptionRow>(sqlx::AssertSqlSafe(format!(
        "select {LIST_COLUMNS} from webhook_subscriptions s
         where $1::text is null or s.tenant = $1 order by s.created_at, s.id"
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
    pub secret: String,
    pub cursor: Position,
    pub attempts: i32,
}

#[derive(sqlx::FromRow)]
struct ClaimedRow {
    id: Uuid,
    tenant: String,
    url: String,
    event_types: Vec<String>,
    secret: String,
    cursor_xid: String,
    cursor_id: i64,
    attempts: i32,
}

/// Takes up to `limit` subscriptions that are due and have readable events past their cursor, and nobody holds.
/// Events count as readable below `floor` at least (`super::events::page` says why).
pub async fn claim(
    db: impl PgExecutor<'_>,
    owner: Uuid,
    lease: Duration,
    floor: u64,
    limit: i64,
) -> Result<Vec<Claimed>, StorageError> {
    let rows = sql::query_as::<ClaimedRow>(sqlx::AssertSqlSafe(format!(
        "update webhook_subscriptions s set lease_owner = $1, lease_until = now() + make_interval(secs => $2)
         where s.id in (
             select w.id from webhook_subscriptions w
             where (w.lease_until is null or w.lease_until < now()) and w.next_attempt_at <= now()
               and exists (select 1 from events e
                           where e.tenant = w.tenant and {}
                             and e.type = any(w.event_types))
             order by w.next_attempt_at
             limit $3
             for update skip locked)
         returning s.id, s.tenant, s.url, s.event_types, s.secret, s.cursor_xid::text as cursor_xid, s.cursor_id,
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
                secret: row.secret,
                attempts: row.attempts,
            })
        })
        .collect()
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
    super::events::rows_to_events(rows)
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

/// Gives a subscription up with nothing left to send (or on shutdown), so another instance may take it at once.
pub async fn release(db: impl PgExecutor<'_>, id: Uuid, owner: Uuid) -> Result<(), StorageError> {
    sql::query(
        "update webhook_subscriptions set lease_owner = null, lease_until = null
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
         from (select {LIST_COLUMNS} from webhook_subscriptions s) listed group by state order by state"
    )))
    .fetch_all(db)
    .await?;
    Ok(rows)
}
