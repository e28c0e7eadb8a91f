//! Claims on a run's released turn (`worker_claims`, migrations 0016 and 0019; docs/design.md §15). A claim is named
//! by its run and its id, the table's unique key (every key of a run-scoped table begins with `run_id`). The caller
//! holds the run's row lock (`runs::lock`) for every function here but [`lock_lapsed`], which takes it itself: every
//! writer of a run locks its row first, so a claim row changes only under its run's lock. Whether a claim has lapsed
//! is judged once per transaction, by the database's clock when the claim is read under the lock
//! (`clock_timestamp()`, not the transaction's start: a claim renewed while this transaction waited for the lock is
//! seen renewed), and every write that follows acts on that one judgment.

use chrono::{DateTime, Utc};
use sqlx::{PgConnection, PgExecutor};
use uuid::Uuid;

use super::runs::RunRow;
use super::{StorageError, sql};

/// A turn's claim as stored, with whether its lease has run out now.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct ClaimRow {
    pub claim_id: Uuid,
    pub turn_index: i32,
    pub until: DateTime<Utc>,
    /// Set once the lapse was written (the claim's unposted calls ended `interrupted`).
    pub lapsed_at: Option<DateTime<Utc>>,
    /// Set once the claim stopped being live: the turn's last result, the lapse, or a cancel.
    pub ended_at: Option<DateTime<Utc>>,
    /// `until` has passed, on the database's clock as this statement ran.
    pub due: bool,
}

impl ClaimRow {
    /// Live: neither ended nor past its `until`.
    pub fn is_live(&self) -> bool {
        self.ended_at.is_none() && !self.due
    }

    /// Past its `until` while still open: its lapse is due and nobody wrote it yet.
    pub fn lapse_due(&self) -> bool {
        self.ended_at.is_none() && self.due
    }
}

const CLAIM_COLUMNS: &str =
    "claim_id, turn_index, until, lapsed_at, ended_at, until <= clock_timestamp() as due";

/// The claim of `run_id`'s turn `turn_index`, if it was ever claimed.
pub async fn of_turn(
    db: impl PgExecutor<'_>,
    run_id: Uuid,
    turn_index: i32,
) -> Result<Option<ClaimRow>, StorageError> {
    let row = sql::query_as::<ClaimRow>(sqlx::AssertSqlSafe(format!(
        "select {CLAIM_COLUMNS} from worker_claims where run_id = $1 and turn_index = $2"
    )))
    .bind(run_id)
    .bind(turn_index)
    .fetch_optional(db)
    .await?;
    Ok(row)
}

/// The claim `claim_id` of `run_id`, whichever of its turns it was made on.
pub async fn by_id(
    db: impl PgExecutor<'_>,
    run_id: Uuid,
    claim_id: Uuid,
) -> Result<Option<ClaimRow>, StorageError> {
    let row = sql::query_as::<ClaimRow>(sqlx::AssertSqlSafe(format!(
        "select {CLAIM_COLUMNS} from worker_claims where run_id = $1 and claim_id = $2"
    )))
    .bind(run_id)
    .bind(claim_id)
    .fetch_optional(db)
    .await?;
    Ok(row)
}

/// Claims `run`'s current turn for `ttl` from now, under a new claim id. A turn claimed before is refused by the
/// primary key: the caller, holding the run's lock, has found it unclaimed.
pub async fn insert(
    conn: &mut PgConnection,
    run: &RunRow,
    ttl: std::time::Duration,
) -> Result<ClaimRow, StorageError> {
    let row = sql::query_as::<ClaimRow>(sqlx::AssertSqlSafe(format!(
        "insert into worker_claims (run_id, turn_index, claim_id, until)
         values ($1, $2, $3, clock_timestamp() + make_interval(secs => $4))
         returning {CLAIM_COLUMNS}"
    )))
    .bind(run.id)
    .bind(run.turn_index)
    .bind(Uuid::new_v4())
    .bind(ttl.as_secs_f64())
    .fetch_one(conn)
    .await?;
    Ok(row)
}

/// Renews `run_id`'s claim `claim_id` for `ttl` from now. The caller found it live under the run's lock, in the one
/// read of the claim its transaction judges by ([`of_turn`]): the clock is not read again here, so that a claim is
/// never judged live by one statement and lapsed by the next. `None` if it ended meanwhile (it cannot, under the
/// lock).
pub async fn renew(
    conn: &mut PgConnection,
    run_id: Uuid,
    claim_id: Uuid,
    ttl: std::time::Duration,
) -> Result<Option<ClaimRow>, StorageError> {
    let row = sql::query_as::<ClaimRow>(sqlx::AssertSqlSafe(format!(
        "update worker_claims set until = clock_timestamp() + make_interval(secs => $3)
         where run_id = $1 and claim_id = $2 and ended_at is null
         returning {CLAIM_COLUMNS}"
    )))
    .bind(run_id)
    .bind(claim_id)
    .bind(ttl.as_secs_f64())
    .fetch_optional(conn)
    .await?;
    Ok(row)
}

/// Ends the open claim of `run_id`'s turn `turn_index`, if there is one: its turn resumed or the run was cancelled.
pub async fn end(
    conn: &mut PgConnection,
    run_id: Uuid,
    turn_index: i32,
) -> Result<(), StorageError> {
    sql::query(
        "update worker_claims set ended_at = clock_timestamp()
         where run_id = $1 and turn_index = $2 and ended_at is null",
    )
    .bind(run_id)
    .bind(turn_index)
    .execute(conn)
    .await?;
    Ok(())
}

/// Records the lapse of `run_id`'s claim `claim_id`, which the caller found open and past its `until` under the run's
/// lock: the claim as it is now, or `None` if it was not open any more (then the caller writes nothing else of the
/// lapse either).
pub async fn mark_lapsed(
    conn: &mut PgConnection,
    run_id: Uuid,
    claim_id: Uuid,
) -> Result<Option<ClaimRow>, StorageError> {
    let row = sql::query_as::<ClaimRow>(sqlx::AssertSqlSafe(format!(
        "update worker_claims set lapsed_at = clock_timestamp(), ended_at = clock_timestamp()
         where run_id = $1 and claim_id = $2 and ended_at is null and lapsed_at is null
         returning {CLAIM_COLUMNS}"
    )))
    .bind(run_id)
    .bind(claim_id)
    .fetch_optional(conn)
    .await?;
    Ok(row)
}

/// Locks up to `limit` released runs whose claim has lapsed and nobody has written the lapse, skipping runs another
/// transaction holds (a results post, a renewal, a cancel, another instance's sweeper): whoever holds one finds the
/// lapse itself, or leaves it to the next sweep. Answers `(run id, tenant)` of each: the caller reads the run and its
/// claim again under the lock before it writes anything, since this statement's snapshot may predate a renewal or
/// a result that committed before the lock was granted.
pub async fn lock_lapsed(
    conn: &mut PgConnection,
    limit: i64,
) -> Result<Vec<(Uuid, String)>, StorageError> {
    let rows = sql::query_as::<(Uuid, String)>(
        "select r.id, r.tenant from runs r
         join worker_claims w on w.run_id = r.id and w.turn_index = r.turn_index
         where w.ended_at is null and w.until <= clock_timestamp() and r.status = 'released'
         order by w.until limit $1 for update of r skip locked",
    )
    .bind(limit)
    .fetch_all(conn)
    .await?;
    Ok(rows)
}
