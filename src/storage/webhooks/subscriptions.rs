//! Webhook subscriptions as their tenants and operators manage them: created (at most so many per tenant), listed
//! with their backlog, given a new secret, removed, and counted; the listing's backlog count also feeds `/metrics`.

use std::time::Duration;

use chrono::{DateTime, Utc};
use sqlx::PgExecutor;
use uuid::Uuid;

use super::super::sealed::{self, Column, Row};
use super::super::{Database, StorageError, sql};

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
