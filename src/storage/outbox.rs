//! The events outbox: writing an event in the transaction of its change, and reading a tenant's events in order.
//!
//! # Why (xid, id), and why only below `events_readable_below()`
//!
//! Ids from a sequence are taken in one order and committed in another: a transaction may take id 5, then commit
//! after the one that took id 6 was read. A reader that had moved its cursor past 6 would never see 5. So each event
//! also stores the id of its writing transaction (`xid8`), readers order by `(xid, id)`, and a read returns only the
//! events of transactions below `events_readable_below()` (migrations/0005_events.sql): the oldest transaction
//! that the read's snapshot sees running and that may write to this database, or the snapshot's `xmax` if none is.
//!
//! - Every transaction below that bound that could have written here has ended, so the read sees all of its rows
//!   (those that committed); every transaction that has not ended, or has no xid yet, has an xid at or above it.
//!   So no event can ever appear below a position a reader was given: following the cursor skips none.
//! - The events of one run keep their order: every transaction that writes a run's event locks the run's row first
//!   (registration inserts it), and Postgres assigns a transaction's xid at its first write or row lock, once the
//!   lock is granted (checked: a transaction waiting for a row lock has no xid until it gets the lock). So the xid
//!   of a later change of a run is above the xid of every earlier one.
//!
//! # Why a read takes a floor
//!
//! `events_readable_below()` is exact for its own statement but not monotonic across statements: it reads
//! `pg_stat_activity`, which is not part of the snapshot, so a transaction of another database that ends between
//! the snapshot and that read cannot be placed and counts as running (safe, but lower). Two reads a moment apart
//! may then disagree, the later one seeing less. A bound once found stays true, though: every transaction below it
//! had ended, and every later xid is above it. So the hub (`crate::delivery::hub`) keeps the highest bound it found,
//! and a reader woken by the hub reads below the greater of that bound and its own (`floor` in [`page`]): it sees at
//! least what woke it. Without the floor, a reader woken because an event became readable could read nothing, then
//! wait for the next change of the newest readable event, which may not come for the whole long poll.
//!
//! The price: an event is readable only once every older write transaction of this database has ended. The
//! service's own transactions are short and bounded by `statement_timeout` and `idle_in_transaction_session_timeout`;
//! a long one delays the feed, never breaks it. Transactions of other databases on the cluster are left out by
//! looking them up in `pg_stat_activity`; a role that cannot see other roles' backends there (without
//! `pg_read_all_stats`) waits for them too, which is slower, never wrong.

use chrono::{DateTime, Utc};
use serde_json::Value;
use sqlx::types::Json;
use sqlx::{PgConnection, PgExecutor};
use uuid::Uuid;

use super::runs::RunRow;
use super::{StorageError, sql};
use crate::domain::event_payloads::{self, EventData, EventType, RuleEventData};

/// A place in a tenant's events: after the event of transaction `xid` with id `id`. `Position::START` is before all.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Position {
    pub xid: u64,
    pub id: i64,
}

impl Position {
    pub const START: Position = Position { xid: 0, id: 0 };
}

/// An event as stored.
#[derive(Debug, Clone)]
pub struct StoredEvent {
    pub position: Position,
    pub public_id: Uuid,
    pub tenant: String,
    /// `None` for an event of no run (an owner-scope rule's, docs/design.md §18).
    pub run_id: Option<Uuid>,
    pub kind: String,
    pub data: Value,
    pub created_at: DateTime<Utc>,
}

/// An event row as read by [`EVENT_COLUMNS`].
#[derive(sqlx::FromRow)]
pub(crate) struct EventRow {
    xid: String,
    id: i64,
    public_id: Uuid,
    tenant: String,
    run_id: Option<Uuid>,
    kind: String,
    data: Json<Value>,
    created_at: DateTime<Utc>,
}

impl TryFrom<EventRow> for StoredEvent {
    type Error = StorageError;
    fn try_from(row: EventRow) -> Result<Self, Self::Error> {
        Ok(StoredEvent {
            position: Position {
                xid: parse_xid(&row.xid)?,
                id: row.id,
            },
            public_id: row.public_id,
            tenant: row.tenant,
            run_id: row.run_id,
            kind: row.kind,
            data: row.data.0,
            created_at: row.created_at,
        })
    }
}

fn parse_xid(text: &str) -> Result<u64, StorageError> {
    text.parse()
        .map_err(|_| StorageError::Corrupt(format!("transaction id {text:?}")))
}

/// The columns of [`EventRow`]; `xid8` is read as text, which sqlx has no type for.
pub(crate) const EVENT_COLUMNS: &str =
    "xid::text as xid, id, public_id, tenant, run_id, type as kind, data, created_at";

/// Writes an event in the caller's transaction, which must hold the run's row lock (see the module's notes).
pub async fn insert(
    conn: &mut PgConnection,
    tenant: &str,
    run_id: Uuid,
    kind: EventType,
    data: &EventData,
) -> Result<(), StorageError> {
    sql::query("insert into events (tenant, run_id, type, data) values ($1, $2, $3, $4)")
        .bind(tenant)
        .bind(run_id)
        .bind(kind.as_str())
        .bind(Json(data))
        .execute(conn)
        .await?;
    Ok(())
}

/// Writes a rule's event (`rule.created`, `rule.revoked`) in the caller's transaction, which holds the rule's run's
/// row lock when it has a run (see the module's notes); an owner-scope rule's event has no run.
pub async fn insert_rule_event(
    conn: &mut PgConnection,
    kind: EventType,
    data: &RuleEventData,
) -> Result<(), StorageError> {
    sql::query("insert into events (tenant, run_id, type, data) values ($1, $2, $3, $4)")
        .bind(&data.tenant)
        .bind(data.run_id)
        .bind(kind.as_str())
        .bind(Json(data))
        .execute(conn)
        .await?;
    Ok(())
}

/// Writes the event that `run`'s status, as just set, announces (`run.waiting`, `run.cancelled`, `run.completed`),
/// in the caller's transaction. A status nobody waits for (`resuming`) writes nothing.
pub async fn record_status(conn: &mut PgConnection, run: &RunRow) -> Result<(), StorageError> {
    let Some(kind) = EventType::of_status(run.status()) else {
        return Ok(());
    };
    let data = event_payloads::data(
        &event_payloads::RunFacts {
            run_id: run.id,
            tenant: &run.tenant,
            status: run.status(),
            format: run.format(),
            turn_index: run.turn_index,
            turn_digest: &run.turn_digest,
            source: run.source.as_deref(),
        },
        None,
    );
    insert(conn, &run.tenant, run.id, kind, &data).await
}

/// Up to `limit` of the tenant's events after `after`, in order, of transactions that have all ended: below the
/// greater of `floor` (a bound found earlier on this server, 0 for none) and the read's own bound.
pub async fn page(
    db: impl PgExecutor<'_>,
    tenant: &str,
    after: Position,
    floor: u64,
    limit: i64,
) -> Result<Vec<StoredEvent>, StorageError> {
    let rows = sql::query_as::<EventRow>(sqlx::AssertSqlSafe(format!(
        "select {EVENT_COLUMNS} from events
         where tenant = $1 and {}
         order by xid, id limit $5",
        readable_past("", "$2::text::xid8", "$3", "$4")
    )))
    .bind(tenant)
    .bind(after.xid.to_string())
    .bind(after.id)
    .bind(floor.to_string())
    .bind(limit)
    .fetch_all(db)
    .await?;
    rows_to_events(rows)
}

/// The predicate shared by every reader of events (the feed, a subscription's claim and its deliveries): the event
/// (columns prefixed by `event`, e.g. `"e."`) is past the cursor (`cursor_xid`, `cursor_id`: SQL expressions of
/// types xid8 and bigint) and its transaction is below the readable bound, taken no lower than `floor` (an SQL
/// expression of a decimal xid as text; see the module's notes).
pub(crate) fn readable_past(event: &str, cursor_xid: &str, cursor_id: &str, floor: &str) -> String {
    format!(
        "({event}xid, {event}id) > ({cursor_xid}, {cursor_id}) \
         and {event}xid < greatest({floor}::text::xid8, events_readable_below())"
    )
}

/// [`readable_past`] for one tenant's events (`tenant`: an SQL expression of type text), written so that it can only
/// be read as one range of `events_tenant_order` starting at the cursor: the row comparison begins with the tenant
/// (an index condition on (tenant, xid, id) that positions the scan at the cursor), and the tenant's equality is
/// stated as an upper bound. Written as `tenant = … and (xid, id) > …`, a generic plan may read `events_pkey`
/// (xid, id) from the cursor through every tenant's events instead; and with the equality beside the row comparison,
/// the scan starts at the tenant's first event rather than at the cursor (bench/webhook_claim_explain.sh). Callers
/// order by `tenant, xid, id`.
pub(crate) fn readable_range(
    event: &str,
    tenant: &str,
    cursor_xid: &str,
    cursor_id: &str,
    floor: &str,
) -> String {
    format!(
        "{event}tenant <= {tenant} and ({event}tenant, {event}xid, {event}id) > ({tenant}, {cursor_xid}, {cursor_id}) \
         and {event}xid < greatest({floor}::text::xid8, events_readable_below())"
    )
}

pub(crate) fn rows_to_events(rows: Vec<EventRow>) -> Result<Vec<StoredEvent>, StorageError> {
    rows.into_iter().map(StoredEvent::try_from).collect()
}

/// What a poll of the hub finds: the readable bound (a transaction id below which every transaction has ended) and
/// the newest event of any tenant below it. When `newest` moves, readers have something new.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Readable {
    pub below: u64,
    pub newest: Position,
}

/// The readable bound, no lower than `floor`, and the newest event below it.
pub async fn readable(db: impl PgExecutor<'_>, floor: u64) -> Result<Readable, StorageError> {
    let (below, xid, id) = sql::query_as::<(String, Option<String>, Option<i64>)>(
        "select b.below::text, e.xid::text, e.id
         from (select greatest($1::text::xid8, events_readable_below()) as below) b
         left join lateral (select xid, id from events where xid < b.below
                            order by xid desc, id desc limit 1) e on true",
    )
    .bind(floor.to_string())
    .fetch_one(db)
    .await?;
    let newest = match (xid, id) {
        (Some(xid), Some(id)) => Position {
            xid: parse_xid(&xid)?,
            id,
        },
        _ => Position::START,
    };
    Ok(Readable {
        below: parse_xid(&below)?,
        newest,
    })
}

/// What a poll of the hub finds when it also asks whose events became readable (docs/design.md §17: a feed reader wakes
/// only for its own tenant's events): the readable bound, and the tenants with an event of a transaction from
/// `since` (the previous poll's bound, at and above which nothing was readable then) to below the bound.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NewlyReadable {
    pub below: u64,
    pub tenants: Vec<String>,
}

/// The readable bound, no lower than `floor`, and the tenants with events in `since` ..< that bound: one statement,
/// a range scan of the primary key over the events committed since the previous poll.
pub async fn newly_readable(
    db: impl PgExecutor<'_>,
    floor: u64,
    since: u64,
) -> Result<NewlyReadable, StorageError> {
    let (below, tenants) = sql::query_as::<(String, Vec<String>)>(
        "select b.below::text,
                array(select distinct tenant from events
                      where xid >= $2::text::xid8 and xid < b.below)
         from (select greatest($1::text::xid8, events_readable_below()) as below) b",
    )
    .bind(floor.to_string())
    .bind(since.to_string())
    .fetch_one(db)
    .await?;
    Ok(NewlyReadable {
        below: parse_xid(&below)?,
        tenants,
    })
}

/// Deletes events older than `max_age`, in batches; returns how many. Events are a delivery buffer, not the audit
/// record (that is `approval_events` and `tool_events`), and this bounds what an undelivered backlog can hold.
pub async fn purge_older_than(
    db: &super::Database,
    max_age: std::time::Duration,
) -> Result<u64, StorageError> {
    const BATCH: i64 = 1_000;
    let mut deleted = 0;
    loop {
        let batch = sql::query(
            // The oldest events first, through the primary key (xid, id): transaction ids grow with time, so this
            // stops at the first batch that is not all old instead of scanning the table for stragglers.
            "delete from events where (xid, id) in (
                 select xid, id from (select xid, id, created_at from events order by xid, id limit $2) oldest
                 where created_at < now() - make_interval(secs => $1))",
        )
        .bind(max_age.as_secs_f64())
        .bind(BATCH)
        .execute(db)
        .await?
        .rows_affected();
        deleted += batch;
        if batch < BATCH as u64 {
            return Ok(deleted);
        }
    }
}
