//! A run's worker state (docs/design.md §15): the JSON text a worker registered with its run or its latest turn, stored
//! byte for byte in `runs.worker_state`, or sealed in `runs.worker_state_sealed` when keys are configured
//! (migration 0014).
//!
//! Only these functions name the two columns: every other read of a run lists its columns, so the state is loaded
//! by the one answer that gives it back and by `keys rotate` (`rekeying`), and goes with its row when a run is
//! purged (`retention`).

use sqlx::{PgConnection, Row as _};
use uuid::Uuid;

use super::runs::release_buffers;
use super::sealed::{self, Column, Row};
use super::{StorageError, sql};
use crate::sealing::Sealer;

/// Sets the run's worker state to `text`, or clears it (`None`), in the caller's transaction, which holds the run's
/// row (it registered the run or locked it for a new turn). A run that had none and gets none is not written.
pub async fn replace(
    conn: &mut PgConnection,
    sealer: &Sealer,
    run_id: Uuid,
    text: Option<&str>,
) -> Result<(), StorageError> {
    let stored = sealed::seal_optional(sealer, Column::WorkerState, Row::run(run_id), text);
    sql::query(
        "update runs set worker_state = $2, worker_state_sealed = $3
         where id = $1
           and ($2::text is not null or $3::bytea is not null
                or worker_state is not null or worker_state_sealed is not null)",
    )
    .bind(run_id)
    .bind(stored.clear)
    .bind(stored.sealed)
    .execute(&mut *conn)
    .await?;
    release_buffers(conn, text.map_or(0, str::len));
    Ok(())
}

/// The run's worker state as the worker sent it; `None` when it has none (or no such run exists). On a connection
/// of its own (or a transaction), whose buffers a large state would otherwise keep ([`release_buffers`]).
pub async fn find(
    conn: &mut PgConnection,
    sealer: &Sealer,
    run_id: Uuid,
) -> Result<Option<String>, StorageError> {
    let row = sql::query("select worker_state, worker_state_sealed from runs where id = $1")
        .bind(run_id)
        .fetch_optional(&mut *conn)
        .await?;
    let Some(row) = row else {
        return Ok(None);
    };
    let text = sealed::open(
        sealer,
        Column::WorkerState,
        Row::run(run_id),
        row.try_get("worker_state")?,
        row.try_get::<Option<&[u8]>, _>("worker_state_sealed")?,
    )?;
    release_buffers(conn, text.as_ref().map_or(0, String::len));
    Ok(text)
}
