//! The calls of each turn (`turn_calls`): stored when a turn starts waiting, read back opened, one turn's or the
//! earlier turns' that have a result.

use chrono::{DateTime, Utc};
use sqlx::{PgConnection, PgExecutor};
use uuid::Uuid;

use super::sealed::{self, Column, Row};
use super::{StorageError, sql};
use crate::domain::transcript::PendingCall;
use crate::domain::vocabulary::{Effect, Outcome};
use crate::sealing::Sealer;

/// One pending call of a turn, with its result once known.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct CallRow {
    pub position: i32,
    pub call_id: String,
    pub tool: String,
    pub arguments: String,
    pub effect: String,
    pub started_at: Option<DateTime<Utc>>,
    pub outcome: Option<String>,
    pub is_error: Option<bool>,
    pub content: Option<String>,
    pub finished_at: Option<DateTime<Utc>>,
    /// The arguments a decider approved the call with, when they differ from the proposed ones.
    pub edited_arguments: Option<String>,
    /// When its approval released it to the worker (docs/design.md §15); `None` for every other call.
    pub released_at: Option<DateTime<Utc>>,
}

/// A call as its row holds it: arguments and content in clear or sealed (storage::sealed).
#[derive(sqlx::FromRow)]
pub(super) struct StoredCall {
    pub(super) turn_index: i32,
    pub(super) position: i32,
    pub(super) call_id: String,
    pub(super) tool: String,
    pub(super) arguments: Option<String>,
    pub(super) arguments_sealed: Option<Vec<u8>>,
    pub(super) effect: String,
    pub(super) started_at: Option<DateTime<Utc>>,
    pub(super) outcome: Option<String>,
    pub(super) is_error: Option<bool>,
    pub(super) content: Option<String>,
    pub(super) content_sealed: Option<Vec<u8>>,
    pub(super) finished_at: Option<DateTime<Utc>>,
    pub(super) edited_arguments: Option<String>,
    pub(super) edited_arguments_sealed: Option<Vec<u8>>,
    pub(super) released_at: Option<DateTime<Utc>>,
}

/// The columns a [`StoredCall`] is read from.
pub(super) const CALL_COLUMNS: &str =
    "turn_index, position, call_id, tool, arguments, arguments_sealed, effect,
     started_at, outcome, is_error, content, content_sealed, finished_at, edited_arguments, edited_arguments_sealed,
     released_at";

impl StoredCall {
    /// The bytes of its text and binary values, as read.
    pub(super) fn stored_bytes(&self) -> usize {
        let text = [&self.arguments, &self.content, &self.edited_arguments];
        let sealed = [
            &self.arguments_sealed,
            &self.content_sealed,
            &self.edited_arguments_sealed,
        ];
        self.call_id.len()
            + self.tool.len()
            + text
                .iter()
                .flat_map(|value| value.as_deref())
                .map(str::len)
                .sum::<usize>()
            + sealed
                .iter()
                .flat_map(|value| value.as_deref())
                .map(<[u8]>::len)
                .sum::<usize>()
    }

    /// The call with its arguments (proposed and edited) and content opened.
    pub(super) fn open(self, sealer: &Sealer, run_id: Uuid) -> Result<CallRow, StorageError> {
        let row = Row::call(run_id, self.turn_index, self.position);
        Ok(CallRow {
            position: self.position,
            arguments: sealed::open_required(
                sealer,
                Column::CallArguments,
                row,
                self.arguments,
                self.arguments_sealed.as_deref(),
            )?,
            content: sealed::open(
                sealer,
                Column::CallContent,
                row,
                self.content,
                self.content_sealed.as_deref(),
            )?,
            edited_arguments: sealed::open(
                sealer,
                Column::CallEditedArguments,
                row,
                self.edited_arguments,
                self.edited_arguments_sealed.as_deref(),
            )?,
            call_id: self.call_id,
            tool: self.tool,
            effect: self.effect,
            started_at: self.started_at,
            outcome: self.outcome,
            is_error: self.is_error,
            finished_at: self.finished_at,
            released_at: self.released_at,
        })
    }
}

impl CallRow {
    /// The arguments the executor receives: the edited ones, if a decider edited them.
    pub fn effective_arguments(&self) -> &str {
        self.edited_arguments.as_deref().unwrap_or(&self.arguments)
    }

    /// Whether its approval released it to the worker, which posts its result (docs/design.md §15).
    pub fn is_released(&self) -> bool {
        self.released_at.is_some()
    }

    pub fn effect(&self) -> Effect {
        // The column's check constraint allows only the two values.
        Effect::parse(&self.effect).unwrap_or(Effect::Read)
    }

    pub fn outcome(&self) -> Result<Option<Outcome>, StorageError> {
        self.outcome
            .as_deref()
            .map(|text| {
                Outcome::parse(text)
                    .ok_or_else(|| StorageError::Corrupt(format!("outcome {text:?}")))
            })
            .transpose()
    }
}

/// Stores the pending calls of a turn in one statement.
pub async fn insert_calls(
    conn: &mut PgConnection,
    sealer: &Sealer,
    run_id: Uuid,
    turn_index: i32,
    calls: &[(PendingCall, Effect)],
) -> Result<(), StorageError> {
    let positions: Vec<i32> = (0..calls.len() as i32).collect();
    let ids: Vec<&str> = calls.iter().map(|(call, _)| call.id.as_str()).collect();
    let tools: Vec<&str> = calls.iter().map(|(call, _)| call.name.as_str()).collect();
    let (arguments, arguments_sealed): (Vec<Option<String>>, Vec<Option<Vec<u8>>>) = calls
        .iter()
        .zip(&positions)
        .map(|((call, _), position)| {
            let row = Row::call(run_id, turn_index, *position);
            let stored = sealed::seal(sealer, Column::CallArguments, row, &call.arguments);
            (stored.clear, stored.sealed)
        })
        .unzip();
    let effects: Vec<&str> = calls.iter().map(|(_, effect)| effect.as_str()).collect();
    sql::query(
        "insert into turn_calls (run_id, turn_index, position, call_id, tool, arguments, effect, arguments_sealed)
         select $1, $2, * from unnest($3::int[], $4::text[], $5::text[], $6::text[], $7::text[], $8::bytea[])",
    )
    .bind(run_id)
    .bind(turn_index)
    .bind(&positions)
    .bind(&ids)
    .bind(&tools)
    .bind(&arguments)
    .bind(&effects)
    .bind(&arguments_sealed)
    .execute(conn)
    .await?;
    Ok(())
}

/// The calls of one turn in the turn's order.
pub async fn calls(
    db: impl PgExecutor<'_>,
    sealer: &Sealer,
    run_id: Uuid,
    turn_index: i32,
) -> Result<Vec<CallRow>, StorageError> {
    let rows = sql::query_as::<StoredCall>(sqlx::AssertSqlSafe(format!(
        "select {CALL_COLUMNS} from turn_calls where run_id = $1 and turn_index = $2 order by position"
    )))
    .bind(run_id)
    .bind(turn_index)
    .fetch_all(db)
    .await?;
    rows.into_iter()
        .map(|row| row.open(sealer, run_id))
        .collect()
}

/// The calls of every turn before `turn_index` that have a result, in turn order.
pub async fn calls_before(
    db: impl PgExecutor<'_>,
    sealer: &Sealer,
    run_id: Uuid,
    turn_index: i32,
) -> Result<Vec<CallRow>, StorageError> {
    let rows = sql::query_as::<StoredCall>(sqlx::AssertSqlSafe(format!(
        "select {CALL_COLUMNS} from turn_calls where run_id = $1 and turn_index < $2 and outcome is not null
         order by turn_index, position"
    )))
    .bind(run_id)
    .bind(turn_index)
    .fetch_all(db)
    .await?;
    rows.into_iter()
        .map(|row| row.open(sealer, run_id))
        .collect()
}

/// The ids of every call the run has had, in the order they were stored.
pub async fn call_ids(db: impl PgExecutor<'_>, run_id: Uuid) -> Result<Vec<String>, StorageError> {
    let ids = sql::query_scalar(
        "select call_id from turn_calls where run_id = $1 order by turn_index, position",
    )
    .bind(run_id)
    .fetch_all(db)
    .await?;
    Ok(ids)
}
