//! Decisions and their consequences: approval events, tool results on the turn's calls, and tool events.

use chrono::{DateTime, Utc};
use sqlx::types::Json;
use sqlx::{FromRow, PgExecutor};
use uuid::Uuid;

use super::sealed::{self, Column, Row};
use super::{Query, StorageError, sql};
use crate::domain::results::ToolResult;
use crate::domain::verdicts::RecordedVerdict;
use crate::domain::vocabulary::{DecidedBy, DenialReason};
use crate::sealing::Sealer;

/// The approval event of one run turn.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct DecisionRow {
    pub turn_index: i32,
    /// `true` when every call was approved, `false` when every call was denied, `None` when mixed.
    pub approved: Option<bool>,
    pub decider_uid: Option<i64>,
    pub decided_by: String,
    pub reason: Option<String>,
    pub turn_digest: String,
    pub client_name: String,
    pub decided_at: DateTime<Utc>,
    /// The `kid` of the decision token the decision was posted with; `None` when it came with an API key.
    pub token_kid: Option<String>,
    /// The verdict on every call, in the turn's order (never the edited arguments).
    pub calls: Json<Vec<RecordedVerdict>>,
}

impl DecisionRow {
    pub fn decided_by(&self) -> Result<DecidedBy, StorageError> {
        DecidedBy::parse(&self.decided_by)
            .ok_or_else(|| StorageError::Corrupt(format!("decided_by {:?}", self.decided_by)))
    }

    pub fn reason(&self) -> Result<Option<DenialReason>, StorageError> {
        self.reason
            .as_deref()
            .map(|text| {
                DenialReason::parse(text)
                    .ok_or_else(|| StorageError::Corrupt(format!("reason {text:?}")))
            })
            .transpose()
    }
}

/// What a decision records.
#[derive(Debug, Clone)]
pub struct NewDecision<'a> {
    pub run_id: Uuid,
    pub turn_index: i32,
    pub approved: Option<bool>,
    pub decider_uid: Option<i64>,
    pub decided_by: DecidedBy,
    pub reason: Option<DenialReason>,
    pub turn_digest: &'a str,
    pub client_name: &'a str,
    /// The `kid` of the decision token the decision came with, if it came with one.
    pub token_kid: Option<&'a str>,
    pub calls: &'a [RecordedVerdict],
}

pub(super) const DECISION_COLUMNS: &str = "turn_index, approved, decider_uid, decided_by, reason, turn_digest, client_name, decided_at, token_kid, calls";

pub async fn find(
    db: impl PgExecutor<'_>,
    run_id: Uuid,
    turn_index: i32,
) -> Result<Option<DecisionRow>, StorageError> {
    let row = sql::query_as::<DecisionRow>(sqlx::AssertSqlSafe(format!(
        "select {DECISION_COLUMNS} from approval_events where run_id = $1 and turn_index = $2"
    )))
    .bind(run_id)
    .bind(turn_index)
    .fetch_optional(db)
    .await?;
    Ok(row)
}

/// The decision of the run's latest decided turn.
pub async fn latest(
    db: impl PgExecutor<'_>,
    run_id: Uuid,
) -> Result<Option<DecisionRow>, StorageError> {
    let row = sql::query_as::<DecisionRow>(sqlx::AssertSqlSafe(format!(
        "select {DECISION_COLUMNS} from approval_events where run_id = $1 order by turn_index desc limit 1"
    )))
    .bind(run_id)
    .fetch_optional(db)
    .await?;
    Ok(row)
}

/// Every approval event of a run, oldest turn first.
pub async fn all_of_run(
    db: impl PgExecutor<'_>,
    run_id: Uuid,
) -> Result<Vec<DecisionRow>, StorageError> {
    let rows = sql::query_as::<DecisionRow>(sqlx::AssertSqlSafe(format!(
        "select {DECISION_COLUMNS} from approval_events where run_id = $1 order by turn_index"
    )))
    .bind(run_id)
    .fetch_all(db)
    .await?;
    Ok(rows)
}

/// Binds what a decision records besides its run and turn, in column order: approved, decider_uid, decided_by,
/// reason, turn_digest, client_name, token_kid, calls.
pub(super) fn bind_decision<'q>(query: Query<'q>, decision: &NewDecision<'q>) -> Query<'q> {
    DecisionColumns::of(decision).bind(query)
}

/// What a decision records besides its run and turn, owned, so that a denial can wait for the writer that batches it
/// (`resume::denial_writer`).
#[derive(Debug, Clone)]
pub struct DecisionColumns {
    pub(super) approved: Option<bool>,
    pub(super) decider_uid: Option<i64>,
    pub(super) decided_by: &'static str,
    pub(super) reason: Option<&'static str>,
    pub(super) turn_digest: String,
    pub(super) client_name: String,
    pub(super) token_kid: Option<String>,
    pub(super) calls: Json<Vec<RecordedVerdict>>,
}

impl DecisionColumns {
    /// How many parameters [`DecisionColumns::bind`] binds, in a row from where a statement puts them.
    pub(super) const COUNT: u8 = 8;

    pub fn of(decision: &NewDecision<'_>) -> Self {
        DecisionColumns {
            approved: decision.approved,
            decider_uid: decision.decider_uid,
            decided_by: decision.decided_by.as_str(),
            reason: decision.reason.map(DenialReason::as_str),
            turn_digest: decision.turn_digest.to_owned(),
            client_name: decision.client_name.to_owned(),
            token_kid: decision.token_kid.map(str::to_owned),
            calls: Json(decision.calls.to_vec()),
        }
    }

    /// Binds them in column order (see [`bind_decision`]).
    pub(super) fn bind(self, query: Query<'_>) -> Query<'_> {
        query
            .bind(self.approved)
            .bind(self.decider_uid)
            .bind(self.decided_by)
            .bind(self.reason)
            .bind(self.turn_digest)
            .bind(self.client_name)
            .bind(self.token_kid)
            .bind(self.calls)
    }
}

/// The index of the run's latest turn that expired, if one did.
pub async fn latest_expired_turn(
    db: impl PgExecutor<'_>,
    run_id: Uuid,
) -> Result<Option<i32>, StorageError> {
    let turn = sql::query_scalar::<Option<i32>>(
        "select max(turn_index) from turn_expiries where run_id = $1",
    )
    .bind(run_id)
    .fetch_one(db)
    .await?;
    Ok(turn)
}

/// A turn that expired, for the audit view.
#[derive(Debug, Clone, sqlx::FromRow, serde::Serialize)]
pub struct StoredExpiry {
    pub turn_index: i32,
    pub expires_at: DateTime<Utc>,
    pub expired_at: DateTime<Utc>,
}

/// Every expiry of a run, oldest turn first.
pub async fn expiries_of_run(
    db: impl PgExecutor<'_>,
    run_id: Uuid,
) -> Result<Vec<StoredExpiry>, StorageError> {
    let rows = sql::query_as::<StoredExpiry>(
        "select turn_index, expires_at, expired_at from turn_expiries where run_id = $1 order by turn_index",
    )
    .bind(run_id)
    .fetch_all(db)
    .await?;
    Ok(rows)
}

/// Stores one call's result as soon as it is known; `false` when it already had one.
pub async fn store_result(
    db: impl PgExecutor<'_>,
    sealer: &Sealer,
    run_id: Uuid,
    turn_index: i32,
    position: i32,
    result: &ToolResult,
) -> Result<bool, StorageError> {
    let content = sealed::seal(
        sealer,
        Column::CallContent,
        Row::call(run_id, turn_index, position),
        &result.content,
    );
    let done = sql::query(
        "update turn_calls set outcome = $4, is_error = $5, content = $6, content_sealed = $7, finished_at = now()
         where run_id = $1 and turn_index = $2 and position = $3 and outcome is null",
    )
    .bind(run_id)
    .bind(turn_index)
    .bind(position)
    .bind(result.outcome.as_str())
    .bind(result.is_error)
    .bind(content.clear)
    .bind(content.sealed)
    .execute(db)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// Renews the turn's lease and marks a call as started, in one statement, only while `lease_owner` still holds the
/// turn. `false` means: do not call the executor, because another instance holds the turn now or the call already
/// started once (its outcome is unknown). Updating the run first takes its row lock, so a takeover of the lease
/// ([`super::runs::claim_expired_leases`]) is ordered before or after this, never in between.
pub async fn start_call(
    db: impl PgExecutor<'_>,
    run_id: Uuid,
    turn_index: i32,
    position: i32,
    lease_owner: Uuid,
    lease: std::time::Duration,
) -> Result<bool, StorageError> {
    // The status as `sql::status_is!` states it, so that the run is found by its key.
    let done = sql::query(concat!(
        "with lease as (
             update runs set lease_until = now() + make_interval(secs => $5)
             where id = $1 and ",
        sql::status_is!("resuming"),
        " and lease_owner = $4
             returning id
         )
         update turn_calls c set started_at = now()
         from lease
         where c.run_id = $1 and c.turn_index = $2 and c.position = $3
           and c.started_at is null and c.outcome is null"
    ))
    .bind(run_id)
    .bind(turn_index)
    .bind(position)
    .bind(lease_owner)
    .bind(lease.as_secs_f64())
    .execute(db)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// A tool event as stored, for the audit view.
#[derive(Debug, Clone, sqlx::FromRow, serde::Serialize)]
pub struct StoredToolEvent {
    pub turn_index: i32,
    pub position: i32,
    pub call_id: String,
    pub tool: String,
    pub outcome: String,
    pub is_error: bool,
    pub decided_by: String,
    pub privacy_level: String,
    pub arguments_bytes: i32,
    pub result_bytes: i32,
    pub arguments: Option<String>,
    pub result: Option<String>,
    pub started_at: Option<DateTime<Utc>>,
    pub finished_at: Option<DateTime<Utc>>,
    pub recorded_at: DateTime<Utc>,
}

/// A tool event's payload columns, clear and sealed, read beside a [`StoredToolEvent`].
#[derive(sqlx::FromRow)]
struct SealedPayloads {
    arguments_sealed: Option<Vec<u8>>,
    result_sealed: Option<Vec<u8>>,
}

/// Every tool event of a run, in turn and call order, payloads opened.
pub async fn tool_events_of_run(
    db: impl PgExecutor<'_>,
    sealer: &Sealer,
    run_id: Uuid,
) -> Result<Vec<StoredToolEvent>, StorageError> {
    let rows = sql::query(
        "select turn_index, position, call_id, tool, outcome, is_error, decided_by, privacy_level,
                arguments_bytes, result_bytes, arguments, result, started_at, finished_at, recorded_at,
                arguments_sealed, result_sealed
         from tool_events where run_id = $1 order by turn_index, position",
    )
    .bind(run_id)
    .fetch_all(db)
    .await?;
    rows.iter()
        .map(|row| {
            let mut event = StoredToolEvent::from_row(row)?;
            let payloads = SealedPayloads::from_row(row)?;
            let at = Row::call(run_id, event.turn_index, event.position);
            event.arguments = sealed::open(
                sealer,
                Column::EventArguments,
                at,
                event.arguments.take(),
                payloads.arguments_sealed.as_deref(),
            )?;
            event.result = sealed::open(
                sealer,
                Column::EventResult,
                at,
                event.result.take(),
                payloads.result_sealed.as_deref(),
            )?;
            Ok(event)
        })
        .collect()
}
