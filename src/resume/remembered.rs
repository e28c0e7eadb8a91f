//! Remembered decisions used where a turn is registered (registration or `POST /turns`), in that transaction, once
//! (docs/design.md §18): the live rules that may decide the turn are read (one indexed read, nothing more when there
//! are none); when they cover every pending call and all come from one author, the turn is decided then and there,
//! exactly as that author's decision posted under the run's lock would be: §4 checked again against the run at
//! hand, the decision recorded by the same write, its calls run (or released) once the transaction committed.

use sqlx::PgConnection;

use super::error::ResumeError;
use super::record::{ClearedDecision, Recorded, Through};
use super::resumer::Resumer;
use super::rule_book::{self, RuleAsk, RuleError};
use super::rules::{Actor, DecisionRequest, authorize_decider, gate_approval, turn_calls};
use crate::domain::authorize::Refusal;
use crate::domain::remembered::{self, LiveRule, RuleCall, RuleScope, RuleVerdict, RunAtHand};
use crate::domain::verdicts::{CallVerdict, DecisionForm, Verdicts};
use crate::storage::decision_statements;
use crate::storage::remembered_rules;
use crate::storage::runs::{CallRow, RunRow};

/// A turn the rules decided, recorded in the registration's transaction: what is left once that transaction
/// committed (an approval's calls run, as for a posted approval).
pub struct RuleDecision(Recorded);

impl RuleDecision {
    /// Once the registration committed: runs the approved calls (or nothing, for a denial or released calls).
    pub async fn finish(self, resumer: &Resumer) -> Result<(), ResumeError> {
        self.0.finish(resumer).await.map(|_| ())
    }
}

/// Which turn is registered, and so which rules may apply to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RegisteredTurn {
    /// A new run's first turn: no run-scope rule can exist yet. `owner_ruled`: whether its owner has a live
    /// owner-scope rule for one of its tools, as the registration's owner check read it
    /// (`remembered_rules::owner_of_new_run`); without one, no rule is read.
    NewRun { owner_ruled: bool },
    /// A later turn of a run (`POST /turns`): the run's rules and its owner's.
    NextTurn,
}

/// The turn just registered on `run` (locked, or inserted, by the caller's transaction), whose pending calls are of
/// `tools`: decided by the rules of one author when they cover it whole, recorded through `conn`; `None` when it
/// waits for a person (the caller then records `run.waiting`).
pub async fn decide_by_rules(
    conn: &mut PgConnection,
    resumer: &Resumer,
    actor: &Actor,
    run: &RunRow,
    tools: &[&str],
    turn: RegisteredTurn,
) -> Result<Option<RuleDecision>, ResumeError> {
    // A new run whose owner has no live rule for its tools (a service run never has one): not even the read is made.
    if turn == (RegisteredTurn::NewRun { owner_ruled: false }) {
        return Ok(None);
    }
    let sealer = resumer.pool.sealer();
    let run_id = (turn == RegisteredTurn::NextTurn).then_some(run.id);
    let rules = remembered_rules::live_for_turn(
        &mut *conn,
        sealer,
        &actor.tenant,
        run_id,
        run.owner_uid,
        tools,
    )
    .await?;
    if rules.is_empty() {
        return Ok(None);
    }
    let (calls, earlier_calls) =
        decision_statements::calls_through(&mut *conn, sealer, run.id, run.turn_index).await?;
    let turn = turn_calls(resumer, run, &calls);
    let rule_calls: Vec<RuleCall<'_>> = turn
        .iter()
        .map(|call| RuleCall {
            tool: call.tool,
            arguments: call.arguments,
            effect: call.effect,
        })
        .collect();
    let at_hand = RunAtHand {
        owner_uid: run.owner_uid,
        require_second_approver: run.require_second_approver,
    };
    let deciding = remembered::deciding(&rules, &at_hand, &rule_calls);
    let Some(author) = remembered::sole_author(&deciding) else {
        return Ok(None);
    };
    let chosen: Vec<&LiveRule> = deciding.into_iter().flatten().collect();
    let form = DecisionForm::PerCall(
        turn.iter()
            .zip(&chosen)
            .map(|(call, rule)| CallVerdict {
                call_id: call.call_id.to_owned(),
                approved: rule.verdict.approves(),
                reason: rule.reason.filter(|_| !rule.verdict.approves()),
                arguments: None,
            })
            .collect(),
    );
    let mut verdicts = Verdicts::resolve(&form, &turn)?;
    for (verdict, rule) in verdicts.0.iter_mut().zip(&chosen) {
        verdict.rule_id = Some(rule.id);
    }
    drop(turn);
    // The author's row read with the run, under its lock, as a posted decision reads it: §4 once more, from there.
    let facts =
        decision_statements::lock_run(&mut *conn, sealer, &actor.tenant, run.id, Some(author))
            .await?
            .ok_or(ResumeError::RunNotFound)?;
    let approves = form.approves_any();
    let decided_by = match authorize_decider(actor, &facts, Some(author), approves) {
        Ok(decided_by) => decided_by,
        Err(ResumeError::Refused(refusal)) => return Ok(declined(run, refusal)),
        Err(other) => return Err(other),
    };
    if let Err(refusal) = gate_approval(&facts, Some(author), &verdicts) {
        return Ok(declined(run, refusal));
    }
    let request = DecisionRequest {
        run_id: run.id,
        decider_uid: Some(author),
        turn_digest: run.turn_digest.clone(),
        form,
        remember: None,
    };
    let cleared = ClearedDecision {
        facts,
        calls,
        earlier_calls,
        verdicts,
        decided_by,
    };
    let recorded = cleared
        .record(resumer, actor, &request, Through::Locked(conn))
        .await?;
    if recorded.is_some() {
        tracing::info!(run_id = %run.id, turn = run.turn_index, decider_uid = author,
                       "turn decided by remembered decisions");
    }
    Ok(recorded.map(RuleDecision))
}

/// A person's approval checked against the rules (docs/design.md §18): the first approved call that a live deny rule
/// covers (one that would decide it: its author passes §4 on the run at hand), refused 409 `denied_by_rule`. Read
/// through `conn`: the decision's transaction under the run's lock, or the connection of its read.
pub(super) async fn refuse_denied_by_rule(
    conn: &mut PgConnection,
    resumer: &Resumer,
    tenant: &str,
    run: &RunRow,
    calls: &[CallRow],
    verdicts: &Verdicts,
) -> Result<(), ResumeError> {
    let approved: Vec<_> = verdicts.approved().collect();
    if approved.is_empty() {
        return Ok(());
    }
    let tools: Vec<&str> = approved
        .iter()
        .map(|verdict| verdict.tool.as_str())
        .collect();
    let rules = remembered_rules::live_for_turn(
        conn,
        resumer.pool.sealer(),
        tenant,
        Some(run.id),
        run.owner_uid,
        &tools,
    )
    .await?;
    let at_hand = RunAtHand {
        owner_uid: run.owner_uid,
        require_second_approver: run.require_second_approver,
    };
    for verdict in approved {
        let Some(call) = calls.iter().find(|call| call.call_id == verdict.call_id) else {
            continue;
        };
        let rule_call = RuleCall {
            tool: &call.tool,
            arguments: &call.arguments,
            effect: verdict.effect,
        };
        let deciding = remembered::deciding(&rules, &at_hand, &[rule_call]);
        if let Some(rule) = deciding
            .into_iter()
            .flatten()
            .find(|rule| !rule.verdict.approves())
        {
            return Err(ResumeError::DeniedByRule {
                call_id: verdict.call_id.clone(),
                rule_id: rule.id,
            });
        }
    }
    Ok(())
}

/// Refuses a `remember` that no rule could come of, before anything is read under the lock: no rule is anonymous,
/// and a decision token remembers for its run only.
pub(super) fn refuse_remember(actor: &Actor, request: &DecisionRequest) -> Result<(), ResumeError> {
    let Some(remember) = &request.remember else {
        return Ok(());
    };
    if request.decider_uid.is_none() {
        return Err(RuleError::Anonymous.into());
    }
    if actor.token_kid.is_some() && remember.any_owner() {
        return Err(RuleError::TokenOwnerScope.into());
    }
    Ok(())
}

/// Marks each verdict with the scope the decision asks it remembered in: part of the decision, and of its replay.
pub(super) fn mark_remembered(request: &DecisionRequest, verdicts: &mut Verdicts) {
    if let Some(remember) = &request.remember {
        for verdict in &mut verdicts.0 {
            verdict.remember = remember.scope_of(&verdict.call_id);
        }
    }
}

/// Makes the rules a decision asks for (docs/design.md §18), in its transaction under the run's lock: one per distinct
/// tool, verdict and scope, without arguments, as the decider's; an edited verdict is refused (422), and any refusal
/// refuses the whole decision (the transaction is never committed).
pub(super) async fn make_remembered(
    conn: &mut PgConnection,
    resumer: &Resumer,
    actor: &Actor,
    run: &RunRow,
    request: &DecisionRequest,
    verdicts: &Verdicts,
) -> Result<(), ResumeError> {
    let (Some(remember), Some(decider)) = (&request.remember, request.decider_uid) else {
        return Ok(());
    };
    let mut made: Vec<(&str, bool, RuleScope)> = Vec::new();
    for verdict in &verdicts.0 {
        let Some(scope) = verdict.remember else {
            continue;
        };
        if verdict.edited_arguments.is_some() {
            return Err(RuleError::Edited(verdict.call_id.clone()).into());
        }
        let key = (verdict.tool.as_str(), verdict.approved, scope);
        if made.contains(&key) {
            continue;
        }
        made.push(key);
        let ask = RuleAsk {
            created_by: decider,
            tool: &verdict.tool,
            arguments: None,
            verdict: if verdict.approved {
                RuleVerdict::Approve
            } else {
                RuleVerdict::Deny
            },
            reason: verdict.reason,
        };
        let through = rule_book::Through {
            tenant: &actor.tenant,
            client_name: &actor.client_name,
            token_kid: actor.token_kid.as_deref(),
        };
        match (scope, remember.until) {
            (RuleScope::Run, _) => {
                rule_book::make_on_locked_run(conn, resumer, through, run, &ask, &|_, _| true)
                    .await?;
            }
            (RuleScope::Owner, Some(until)) => {
                rule_book::make_owner_on(conn, resumer, through, run.owner_uid, &ask, until)
                    .await?;
            }
            // The route refuses `remember: "owner"` without `remember_until` before anything is read.
            (RuleScope::Owner, None) => return Err(RuleError::OwnerWithoutEnd.into()),
        }
    }
    Ok(())
}

/// Rules whose author would be refused now decide nothing: the turn waits for a person.
fn declined(run: &RunRow, refusal: Refusal) -> Option<RuleDecision> {
    tracing::info!(run_id = %run.id, turn = run.turn_index, refusal = refusal.code(),
                   "remembered decisions not used: their author may not decide this turn");
    None
}
