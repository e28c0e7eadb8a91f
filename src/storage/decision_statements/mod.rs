//! The statements of one decision, merged so a decision costs few round trips: everything the rules need is read in
//! one statement (without the lock by `run_snapshot`, or under the run's row lock by [`lock_run`]), and a turn is
//! taken or closed (results, tool events, status, the `run.resumed` event) in one more, which writes only while the
//! run still waits on the turn that was read. A deny is the service's busiest path and its cost should be the commit
//! (BENCHMARKS.md); each statement saved here is a network round trip and a pass through the executor of Postgres
//! saved per click.
//!
//! One file per job: `locked_read` (the run and its decision facts under the lock, and the calls), `closing` (the
//! statements that close a turn: approve, held lease, deny, expiry), `closing_params` (the turn to close, its
//! parameters' positions, named once, and the columns bound to them), `take` (the approval's take of its turn) and
//! `release` (an approved turn moved to `released` once its service calls ran, docs/design.md §15).

mod closing;
mod closing_params;
mod locked_read;
mod release;
mod take;

pub use closing::{DenialWrite, close_held_turn, close_turn, record_denial, record_expiry};
pub use closing_params::{ClosingColumns, ClosingTurn};
pub use locked_read::{RunForDecision, calls_through, lock_run};
pub(super) use locked_read::{run_for_decision, split_at_turn};
pub use release::release_held_turn;
pub use take::{TakingTurn, take_turn};

use closing_params::Param;

/// The condition on the run's row under which a decision made from a read of turn `turn` may still be recorded: the
/// run waits on that turn, and the turn has not expired (judged when the row's lock is granted). The one
/// compare-and-set of [`record_denial`] and [`take_turn`].
fn still_waiting(turn: Param) -> String {
    format!(
        " and {} and turn_index = {turn}
          and (expires_at is null or expires_at > clock_timestamp())",
        super::sql::status_is!("waiting_for_approval")
    )
}
