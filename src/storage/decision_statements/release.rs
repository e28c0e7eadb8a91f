//! The release of an approved turn (docs/design.md §15): once the service's calls of the turn have their results, one
//! statement moves the run from `resuming` to `released` (only while this instance holds the turn's lease, as a close
//! does), stores the last service call's result, writes the tool events of the calls that have results, marks the
//! released calls, and records `run.released`. The released calls' results, their tool events and `run.resumed`
//! follow when the worker posts them (`worker_results`).

use std::sync::LazyLock;

use uuid::Uuid;

use super::super::{StorageError, sql};
use super::closing::{CallTimes, LEASE_OWNER, bind_closing, close_turn_ctes, still_held};
use super::closing_params::{ClosingTurn, Param, RUN_ID, TURN_INDEX};
use sqlx::PgExecutor;

/// The positions of the calls released, the parameter after the lease's owner.
const RELEASED_POSITIONS: Param = Param(LEASE_OWNER.0 + 1);

/// The closing expressions with the run moved to `released` and the event `run.released`, and the released calls
/// marked once the run moved. `closing.results` and `closing.events` hold only calls with results (denied, or run by
/// the service); the released calls have neither yet.
static RELEASE_HELD_TURN: LazyLock<String> = LazyLock::new(|| {
    format!(
        "with {ctes}, marked as (
             update turn_calls c set released_at = now()
             where c.run_id = {RUN_ID} and c.turn_index = {TURN_INDEX} and c.position = any({RELEASED_POSITIONS}::int[])
               and c.outcome is null and exists (select from resumed)
             returning c.position
         )
         select resumed.id from resumed cross join outboxed",
        ctes = close_turn_ctes(
            "released",
            "run.released",
            &still_held(),
            "",
            CallTimes::Stored
        ),
    )
});

/// Releases a turn held under `lease_owner`'s lease: `true` when it did; `false` when the lease is no longer this
/// instance's, and then only `closing.results` were stored (as [`super::close_held_turn`] does, so that whoever took
/// the turn over finds them).
pub async fn release_held_turn(
    db: impl PgExecutor<'_>,
    closing: &ClosingTurn<'_>,
    lease_owner: Uuid,
    released_positions: &[i32],
) -> Result<bool, StorageError> {
    let released = bind_closing(
        sql::query(sqlx::AssertSqlSafe(RELEASE_HELD_TURN.as_str())),
        closing,
    )
    .bind(LEASE_OWNER, lease_owner)
    .bind(RELEASED_POSITIONS, released_positions)
    .into_query()
    .fetch_optional(db)
    .await?;
    Ok(released.is_some())
}

#[cfg(test)]
mod tests {
    use super::super::closing_params::placeholders;
    use super::*;

    #[test]
    fn a_release_binds_the_lease_then_the_released_positions_after_the_closing_columns() {
        let read: Vec<u8> = placeholders(&RELEASE_HELD_TURN).into_iter().collect();
        assert_eq!(read, (1..=23).collect::<Vec<u8>>());
        assert!(RELEASE_HELD_TURN.contains("set status = 'released'"));
        assert!(RELEASE_HELD_TURN.contains("'run.released'"));
        assert!(RELEASE_HELD_TURN.contains("lease_owner = $22"));
    }
}
