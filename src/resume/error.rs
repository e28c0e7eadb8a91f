//! How a decision or a resume fails, in the terms of docs/design.md §4 and §5; `http::error` says how each is answered.

use crate::domain::authorize::Refusal;
use crate::domain::verdicts::VerdictError;
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
    #[error("the turn digest is not the current turn's")]
    StaleTurn,
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
    #[error("the turn is not decided yet: nothing is released")]
    NotReleasedYet,
    #[error("the call {0:?} already has another result")]
    ResultConflict(String),
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
