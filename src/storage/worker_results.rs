//! The results a worker posts for the calls released to it (docs/design.md §15), stored on the calls' own rows. The
//! caller holds the run's row lock (`runs::lock`), as every writer of a run takes it first; the statement writes only
//! a released call that has no result yet, so a result is stored once whatever the order of the posts.

use sqlx::PgConnection;
use uuid::Uuid;

use super::sealed::{self, Column, Row};
use super::{StorageError, sql};
use crate::domain::results::ToolResult;
use crate::sealing::Sealer;

/// Stores `results` (`(position, result)`) on released calls of the turn without a result; answers how many it stored.
pub async fn store(
    conn: &mut PgConnection,
    sealer: &Sealer,
    run_id: Uuid,
    turn_index: i32,
    results: &[(i32, &ToolResult)],
) -> Result<u64, StorageError> {
    let (contents, contents_sealed): (Vec<Option<String>>, Vec<Option<Vec<u8>>>) = results
        .iter()
        .map(|(position, result)| {
            let row = Row::call(run_id, turn_index, *position);
            let stored = sealed::seal(sealer, Column::CallContent, row, &result.content);
            (stored.clear, stored.sealed)
        })
        .unzip();
    let done = sql::query(
        "update turn_calls c set outcome = r.outcome, is_error = r.is_error, content = r.content,
                                content_sealed = r.content_sealed, finished_at = now()
         from unnest($3::int[], $4::text[], $5::bool[], $6::text[], $7::bytea[])
              as r(position, outcome, is_error, content, content_sealed)
         where c.run_id = $1 and c.turn_index = $2 and c.position = r.position
           and c.outcome is null and c.released_at is not null",
    )
    .bind(run_id)
    .bind(turn_index)
    .bind(results.iter().map(|(p, _)| *p).collect::<Vec<i32>>())
    .bind(
        results
            .iter()
            .map(|(_, r)| r.outcome.as_str())
            .collect::<Vec<&str>>(),
    )
    .bind(
        results
            .iter()
            .map(|(_, r)| r.is_error)
            .collect::<Vec<bool>>(),
    )
    .bind(contents)
    .bind(contents_sealed)
    .execute(conn)
    .await?;
    Ok(done.rows_affected())
}
