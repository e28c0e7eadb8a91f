//! How a decision or a resume fails, in the terms of docs/design.md §4 and §5; `http::error` says how each is answered.

use chrono::{DateTime, Utc};

use crate::domain::authorize::Refusal;
use crate::domain::verdicts::VerdictError;
use crate::domain::vocabulary::RunStatus;
use crate::storage::StorageError;

#[derive(Debug, thiserror::Error)]
pub enum ResumeError {
    #[error("the key is unknown or revoked")]
    UnknownKey,
    /// The client lacks the scope named (several: `a or b`, any of which would do).
    #[error("the client lacks the scope {0}")]
    MissingScope(String),
    #[error("no such run")]
    RunNotFound,
    /// The model input asked for cannot carry everything of the run's native transcript.
    #[error("{0}")]
    NotRepresentable(String),
    #[error("decision refused: {0}")]
    Refused(#[from] Refusal),
    /// The digest names another turn than the current one; the run's status says where the run is now.
    #[error("the turn digest is not the current turn's")]
    StaleTurn(RunStatus),
    #[error("this turn was already decided differently")]
    AlreadyDecided,
    #[error("the run is not waiting for approval")]
    NotAwaitingApproval,
    #[error("the approved turn's tools are still running")]
    ResumeInProgress,
    #[error("the turn expired before it was decided")]
    Expired,
    /// An approval of a call a live deny rule covers (docs/design.md §18): revoke the rule first.
    #[error(
        "the call {call_id:?} is denied by the remembered decision {rule_id}; revoke it to approve the call"
    )]
    DeniedByRule {
        call_id: String,
        rule_id: uuid::Uuid,
    },
    #[error("{0}")]
    Verdicts(#[from] VerdictError),
    #[error("the run was cancelled")]
    RunCancelled,
    #[error("results names the call {0:?} more than once")]
    RepeatedResult(String),
    #[error("{0:?} is not a call the current turn released to the worker")]
    NotReleased(String),
    /// The turn may still release calls (waiting for its decision, or resuming): asking again may succeed.
    #[error("the turn is not decided yet (the run is {}): nothing is released; ask again once it is released", .0.as_str())]
    NotReleasedYet(RunStatus),
    /// The turn was decided and the run moved on without releasing the call (a denial): it never will.
    #[error(
        "the run already resumed (it is {}): its turn released no call to the worker, so it takes no results; \
         continue from its model input",
        .0.as_str()
    )]
    AlreadyResumed(RunStatus),
    #[error("the call {0:?} already has another result")]
    ResultConflict(String),
    /// Another worker's claim on the released calls is live until `until` (docs/design.md §15).
    #[error("another worker's claim on the released calls is live")]
    Claimed { until: DateTime<Utc> },
    #[error("the claim lapsed; its unposted calls ended interrupted")]
    ClaimLapsed,
    #[error("results are taken only under the live claim: name its claim_id")]
    ClaimRequired,
    #[error("no claim of this run's released turn has this claim_id; claim it first")]
    UnknownClaim,
    /// A claim on a run that has nothing released now; the status tells a wait (it may still release) from never.
    #[error("the run is {}: nothing is released to claim", .0.as_str())]
    NotClaimable(RunStatus),
    #[error("the redaction of the tool events failed: {0}")]
    Redaction(String),
    /// The decision's `remember` is refused: the whole decision is (docs/design.md §18).
    #[error(transparent)]
    Remember(#[from] super::rule_book::RuleError),
    #[error(transparent)]
    Storage(#[from] StorageError),
}

impl From<sqlx::Error> for ResumeError {
    fn from(error: sqlx::Error) -> Self {
        ResumeError::Storage(error.into())
    }
}
