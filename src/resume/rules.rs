//! The rules a decision answers to before anything is written (docs/design.md §4): who decides it (the decider's rights
//! over the run) and what an approver may release (the tool gate), over the turn's calls with the effect each has.
//! The read without the lock applies them to let the usual decision through; the locked path applies them in order.

use super::error::ResumeError;
use super::resumer::Resumer;
use crate::domain::authorize::{self, DecisionAsk, Refusal};
use crate::domain::gate;
use crate::domain::verdicts::{DecisionForm, TurnCall, Verdicts};
use crate::domain::vocabulary::{DecidedBy, ExecutorKind};
use crate::storage::decision_statements::RunForDecision;
use crate::storage::runs::{CallRow, RunRow};
use uuid::Uuid;

/// The client on whose behalf a decision is made.
#[derive(Debug, Clone)]
pub struct Actor {
    pub tenant: String,
    pub client_name: String,
    pub may_decide_anonymously: bool,
    /// The `kid` of the decision token the decision came with; `None` for an API key.
    pub token_kid: Option<String>,
}

/// A decision as the client posted it, its form already checked ([`DecisionForm::check`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecisionRequest {
    pub run_id: Uuid,
    pub decider_uid: Option<i64>,
    pub turn_digest: String,
    pub form: DecisionForm,
    /// The verdicts to remember as rules (docs/design.md §18); such a decision is made under the run's lock.
    pub remember: Option<crate::domain::remembered::Remember>,
}

/// The pending calls as the verdicts are resolved against them, each with the effect that applies and who runs it
/// and whether it may be edited (the run's declaration, else the configuration's: docs/design.md §15).
pub(super) fn turn_calls<'a>(
    resumer: &Resumer,
    run: &RunRow,
    calls: &'a [CallRow],
) -> Vec<TurnCall<'a>> {
    calls
        .iter()
        .map(|call| {
            let declared = run.declared(&call.tool);
            let executors = &resumer.executors;
            TurnCall {
                position: call.position,
                call_id: &call.call_id,
                tool: &call.tool,
                arguments: &call.arguments,
                effect: executors.effect(&call.tool, Some(call.effect())),
                executor: executors.executor_kind(&call.tool, declared.and_then(|d| d.executor)),
                editable: executors.editable(&call.tool, declared.and_then(|d| d.editable)),
            }
        })
        .collect()
}

/// Whether an approved call of `run` is released to the worker rather than sent (docs/design.md §15).
pub(super) fn runs_on_worker(resumer: &Resumer, run: &RunRow, call: &CallRow) -> bool {
    let declared = run.declared(&call.tool).and_then(|d| d.executor);
    resumer.executors.executor_kind(&call.tool, declared) == ExecutorKind::Worker
}

/// Applies §4 with the decider's row, read with the run under its lock.
/// A decision that approves one call is an approval for these rules (docs/design.md §4).
pub(super) fn authorize_decider(
    actor: &Actor,
    locked: &RunForDecision,
    decider_uid: Option<i64>,
    approves: bool,
) -> Result<DecidedBy, ResumeError> {
    let decided_by = authorize::authorize(&DecisionAsk {
        decider_uid,
        decider: locked.decider,
        owner_uid: locked.run.owner_uid,
        require_second_approver: locked.run.require_second_approver,
        approved: approves,
        client_may_decide_anonymously: actor.may_decide_anonymously,
    })?;
    Ok(decided_by)
}

/// The approver tool gate (docs/design.md §4) over the calls this decision approves; denied calls release nothing.
pub(super) fn gate_approval(
    locked: &RunForDecision,
    decider_uid: Option<i64>,
    verdicts: &Verdicts,
) -> Result<(), Refusal> {
    let released: Vec<gate::ApprovedCall> = verdicts
        .approved()
        .map(|verdict| gate::ApprovedCall {
            tool: &verdict.tool,
            effect: verdict.effect,
            edited: verdict.edited_arguments.is_some(),
        })
        .collect();
    let approver = match decider_uid {
        None => gate::Approver::Anonymous,
        Some(_) => gate::Approver::User {
            approvable_tools: locked.approvable_tools.as_deref(),
        },
    };
    gate::check(approver, &released)
}
