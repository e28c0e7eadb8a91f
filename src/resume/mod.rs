//! Recording a decision and resuming the run: the rules of docs/design.md §4 and §5, applied to a read of the run that
//! took no lock when the write can tell that nothing overtook it, and under the run's row lock otherwise.
//!
//! A decision is never cancelled half-way, in particular never inside `BEGIN`, where sqlx 0.9 would return the
//! connection to the pool still inside a transaction (transact-rs/sqlx#4393): the HTTP layer runs every handler
//! to completion in a task of its own (`http::detach`), and a client that disconnects or an HTTP timeout only
//! stops the wait for the answer.
//!
//! The rooms, each importing only those below it (this file only names them and hands their names on):
//!
//! ```text
//! posted.rs        the decision route's one call: read the run (the key's client with it), check the key's
//!                  holder or the token's user, then decide
//! decide.rs        decide from that read (the usual decision, no lock) or under the run's row lock
//! record.rs        the one write of a decision every rule cleared; what follows once it committed
//! approve.rs       an approved turn: its calls run, the turn closes; recovery of turns whose instance stopped
//! sweeper.rs       expiry: turns nobody decided in time
//! periodic.rs      the loop the background tasks share
//! remembered.rs    a new turn decided by remembered decisions, in its registration's transaction (§18)
//! rule_book.rs     making and revoking remembered decisions (docs/design.md §18), audited, with their events
//! rules.rs         who may decide, what an approver may release (docs/design.md §4); the actor and the request
//! results.rs       the worker's results of released calls (docs/design.md §15), under the run's row lock
//! claims.rs        a worker's claim on released calls, its renewal, and the claim a results post must hold
//! lapses.rs        a lapsed claim: its unposted calls end interrupted; found by a post or by the sweeper
//! released_turn.rs closing a released turn once every released call has its result
//! turn.rs          a closed turn: the resumed answer read back, the closing and tool events
//! resumer.rs       what the decision path shares (pool, executors, privacy floor, lease, denial writer)
//! error.rs         how a decision fails
//! denial_writer.rs the denies decided without the lock, written together under load
//! ```
//!
//! The run's read itself is storage's (`storage::run_snapshot`); its connection stays inside this module, from the
//! read to the decision's write.

pub mod approve;
pub mod claims;
mod decide;
pub mod denial_writer;
mod error;
pub mod lapses;
pub mod periodic;
pub mod posted;
mod record;
mod released_turn;
pub mod remembered;
pub mod results;
mod resumer;
pub mod rule_book;
mod rules;
pub mod sweeper;
mod turn;

pub use approve::{finish_turn, spawn_recovery};
pub use decide::decide;
pub use denial_writer::DenialWriter;
pub use error::ResumeError;
pub use lapses::spawn_lapse_sweeper;
pub use posted::{Decided, Posted, Poster, read};
pub use resumer::Resumer;
pub use rules::{Actor, DecisionRequest};
pub use sweeper::spawn_sweeper;
pub use turn::{ClosedTurn, Resumed, load_resumed, load_turn, recorded_results, released_calls};
