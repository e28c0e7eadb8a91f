//! `keys status` and `keys rotate` (docs/design.md §11): counting stored values per key id, and re-sealing those that
//! are in clear or under another key than the first, a bounded batch per short transaction.
//!
//! A batch locks its rows `for update skip locked`: it never waits for a row a decision holds (so it can never be
//! part of a lock cycle with the run-first order of the writers), and a row it skips is taken by a later batch. It
//! selects only rows not yet under the first key, so a rotation stopped half-way resumes where it stopped.

use sqlx::Row as _;
use sqlx::postgres::PgRow;
use uuid::Uuid;

use super::sealed::{self, Column, Row};
use super::{Database, StorageError, sql};
use crate::sealing::Sealer;

/// A table with encrypted columns: how its rows are named, and its `(clear column, column)` pairs. A clear column's
/// sealed twin is named `{clear}_sealed`.
#[derive(Debug)]
pub struct Table {
    pub name: &'static str,
    /// Whether a row is a call's `(run_id, turn_index, position)` rather than a run's `id`.
    per_call: bool,
    pub columns: &'static [(&'static str, Column)],
}

/// Every encrypted column. (A new encrypted column is added here and gets status and rotation with it.)
pub const TABLES: &[Table] = &[
    Table {
        name: "runs",
        per_call: false,
        columns: &[
            ("messages", Column::Transcript),
            ("system", Column::System),
            ("worker_state", Column::WorkerState),
        ],
    },
    Table {
        name: "turn_calls",
        per_call: true,
        columns: &[
            ("arguments", Column::CallArguments),
            ("content", Column::CallContent),
            ("edited_arguments", Column::CallEditedArguments),
        ],
    },
    Table {
        name: "tool_events",
        per_call: true,
        columns: &[
            ("arguments", Column::EventArguments),
            ("result", Column::EventResult),
        ],
    },
    // A subscription's row is named by its id, as a run's is (`sealed::Row::subscription`).
    Table {
        name: "webhook_subscriptions",
        per_call: false,
        columns: &[
            ("secret", Column::WebhookSecret),
            ("previous_secret", Column::WebhookPreviousSecret),
        ],
    },
    // A remembered decision's row is named by its id too (`sealed::Row::rule`).
    Table {
        name: "remembered_rules",
        per_call: false,
        columns: &[("arguments", Column::RuleArguments)],
    },
];

/// How many values of one column are stored under one key id (`None`: in clear).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Count {
    pub column: &'static str,
    pub key_id: Option<String>,
    pub values: i64,
}

/// Values per column and key id, clear first.
pub async fn status(db: &Database) -> Result<Vec<Count>, StorageError> {
    let mut counts = Vec::new();
    for table in TABLES {
        for (clear, column) in table.columns {
            let rows = sql::query_as::<(Option<String>, i64)>(sqlx::AssertSqlSafe(format!(
                "select case when {clear} is null then coalesce(sealed_key_id({clear}_sealed), '?') end, count(*)
                 from {table} where {clear} is not null or {clear}_sealed is not null
                 group by 1 order by 1 nulls first",
                table = table.name
            )))
            .fetch_all(db)
            .await?;
            counts.extend(rows.into_iter().map(|(key_id, values)| Count {
                column: column.as_str(),
                key_id,
                values,
            }));
        }
    }
    Ok(counts)
}

/// The condition "some value of this row is not under key `$1`".
fn stale(table: &Table) -> String {
    table
        .columns
        .iter()
        .map(|(clear, _)| {
            format!(
                "{clear} is not null or ({clear}_sealed is not null and sealed_key_id({clear}_sealed) <> $1)"
            )
        })
        .collect::<Vec<_>>()
        .join(" or ")
}

/// Rows of `table` with a value not under the sealing key, locked or not.
pub async fn remaining(db: &Database, sealer: &Sealer, table: &Table) -> Result<i64, StorageError> {
    let Some(first) = sealer.sealing_key_id() else {
        return Ok(0);
    };
    let count = sql::query_scalar(sqlx::AssertSqlSafe(format!(
        "select count(*) from {} where {}",
        table.name,
        stale(table)
    )))
    .bind(first)
    .fetch_one(db)
    .await?;
    Ok(count)
}

/// Re-seals up to `limit` rows of `table` under the first key, in one transaction; the number of rows rewritten.
/// Rows locked by others are skipped (a later batch takes them).
pub async fn rotate_batch(
    db: &Database,
    sealer: &Sealer,
    table: &Table,
    limit: i64,
) -> Result<u64, StorageError> {
    let Some(first) = sealer.sealing_key_id() else {
        return Ok(0);
    };
    let key = if table.per_call {
        "run_id, turn_index, position"
    } else {
        "id as run_id"
    };
    let order = if table.per_call {
        "run_id, turn_index, position"
    } else {
        "id"
    };
    let values = table
        .columns
        .iter()
        .map(|(clear, _)| format!("{clear}::text as {clear}, {clear}_sealed"))
        .collect::<Vec<_>>()
        .join(", ");
    let mut tx = db.begin().await?;
    let rows = sql::query(sqlx::AssertSqlSafe(format!(
        "select {key}, {values} from {table} where {stale} order by {order} limit $2 for update skip locked",
        table = table.name,
        stale = stale(table),
    )))
    .bind(first)
    .bind(limit)
    .fetch_all(&mut *tx)
    .await?;
    if rows.is_empty() {
        tx.rollback().await?;
        return Ok(0);
    }
    let mut run_ids = Vec::with_capacity(rows.len());
    let mut turns = Vec::with_capacity(rows.len());
    let mut positions = Vec::with_capacity(rows.len());
    let mut resealed: Vec<Vec<Option<Vec<u8>>>> =
        vec![Vec::with_capacity(rows.len()); table.columns.len()];
    for row in &rows {
        let at = row_of(table, row)?;
        run_ids.push(at.run_id);
        let (turn, position) = at.call.unwrap_or((0, 0));
        turns.push(turn);
        positions.push(position);
        for ((clear, column), out) in table.columns.iter().zip(&mut resealed) {
            let sealed_column = format!("{clear}_sealed");
            let text = sealed::open(
                sealer,
                *column,
                at,
                row.try_get(*clear)?,
                row.try_get::<Option<Vec<u8>>, _>(sealed_column.as_str())?
                    .as_deref(),
            )?;
            out.push(text.and_then(|text| sealed::seal(sealer, *column, at, &text).sealed));
        }
    }
    let sets = table
        .columns
        .iter()
        .map(|(clear, _)| format!("{clear} = null, {clear}_sealed = x.{clear}_sealed"))
        .collect::<Vec<_>>()
        .join(", ");
    let arrays = (0..table.columns.len())
        .map(|i| format!("${}::bytea[]", i + 4))
        .collect::<Vec<_>>()
        .join(", ");
    let names = table
        .columns
        .iter()
        .map(|(clear, _)| format!("{clear}_sealed"))
        .collect::<Vec<_>>()
        .join(", ");
    let matches = if table.per_call {
        "t.run_id = x.run_id and t.turn_index = x.turn_index and t.position = x.position"
    } else {
        "t.id = x.run_id"
    };
    let mut update = sql::query(sqlx::AssertSqlSafe(format!(
        "update {table} t set {sets}
         from unnest($1::uuid[], $2::int[], $3::int[], {arrays}) as x(run_id, turn_index, position, {names})
         where {matches}",
        table = table.name,
    )))
    .bind(&run_ids)
    .bind(&turns)
    .bind(&positions);
    for column in &resealed {
        update = update.bind(column);
    }
    let done = update.execute(&mut *tx).await?.rows_affected();
    tx.commit().await?;
    Ok(done)
}

fn row_of(table: &Table, row: &PgRow) -> Result<Row, StorageError> {
    let run_id: Uuid = row.try_get("run_id")?;
    Ok(if table.per_call {
        Row::call(run_id, row.try_get("turn_index")?, row.try_get("position")?)
    } else {
        Row::run(run_id)
    })
}
