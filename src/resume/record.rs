//! Recording a decision the rules let through: the one write that records it (a denial closing its turn, or an
//! approval taking it), on the read's connection or inside the locked path's transaction, and what follows once it
//! committed (the count, the log line, an approval's calls).

use sqlx::PgConnection;
use sqlx::pool::PoolConnection;

use super::approve;
use super::error::ResumeError;
use super::resumer::Resumer;
use super::rules::{Actor, DecisionRequest, authorize_decider, gate_approval, turn_calls};
use super::turn::{Resumed, closing_event, tool_events};
use crate::domain::event_payloads;
use crate::domain::results::{self, ToolResult};
use crate::domain::verdicts::{DecisionForm, Verdicts};
use crate::domain::vocabulary::{DecidedBy, RunStatus};
use crate::metrics;
use crate::storage::decision_record::NewDecision;
use crate::storage::decision_statements::{
    self, ClosingTurn, DenialWrite, RunForDecision, TakingTurn,
};
use crate::storage::run_snapshot::RunSnapshot;
use crate::storage::runs::CallRow;

/// A decision every rule let through, on a turn that, as last read, waits for one and has none: what writing it
/// needs.
pub(super) struct ClearedDecision {
    pub(super) facts: RunForDecision,
    pub(super) calls: Vec<CallRow>,
    pub(super) earlier_calls: Vec<CallRow>,
    pub(super) verdicts: Verdicts,
    pub(super) decided_by: DecidedBy,
}

impl ClearedDecision {
    /// The snapshot's decision when it is the usual case that every rule lets through, or `None`: anything else is
    /// answered under the lock, where the rules run in their order (a replay before the decider's rules, §5).
    pub(super) fn from_read(
        resumer: &Resumer,
        actor: &Actor,
        request: &DecisionRequest,
        snapshot: RunSnapshot,
    ) -> Option<Self> {
        let RunSnapshot {
            facts,
            calls,
            earlier_calls,
        } = snapshot;
        let waiting = request.turn_digest == facts.run.turn_digest
            && facts.decision.is_none()
            && !facts.expired
            && !facts.past_expiry
            && facts.run.status() == RunStatus::WaitingForApproval;
        if !waiting {
            return None;
        }
        let verdicts =
            Verdicts::resolve(&request.form, &turn_calls(resumer, &facts.run, &calls)).ok()?;
        let decided_by = authorize_decider(
            actor,
            &facts,
            request.decider_uid,
            request.form.approves_any(),
        )
        .ok()?;
        gate_approval(&facts, request.decider_uid, &verdicts).ok()?;
        Some(ClearedDecision {
            facts,
            calls,
            earlier_calls,
            verdicts,
            decided_by,
        })
    }
}

/// Where a decision is written.
pub(super) enum Through<'c> {
    /// Decided from the read that took no lock: an approval takes its turn on the connection the read used (behind a
    /// transaction pooler, `None`: on any), a deny goes to the writer of denies (`denial_writer`), which writes it on
    /// that connection or, under load, with others.
    Unlocked(Option<PoolConnection<sqlx::Postgres>>),
    /// Decided under the run's lock: written inside that transaction, which the caller commits.
    Locked(&'c mut PgConnection),
}

/// A decision recorded (not yet committed when recorded under the lock): what is left to do once it is.
pub(super) struct Recorded {
    decided_by: DecidedBy,
    outcome: RecordedOutcome,
}

// One value per decision, moved once from the write to `finish`: boxing either variant would only add an allocation.
#[allow(clippy::large_enum_variant)]
enum RecordedOutcome {
    /// A denial: the answer is complete.
    Denied(Resumed),
    /// An approval, with how many of its calls were denied and edited: its calls are still to run.
    Taken {
        taken: approve::TakenTurn,
        denied: usize,
        edited: usize,
    },
}

impl ClearedDecision {
    /// Writes the decision in one statement `through` a connection; `None` when the run no longer waits on the turn
    /// read.
    pub(super) async fn record(
        self,
        resumer: &Resumer,
        actor: &Actor,
        request: &DecisionRequest,
        through: Through<'_>,
    ) -> Result<Option<Recorded>, ResumeError> {
        let ClearedDecision {
            facts,
            calls,
            earlier_calls,
            verdicts,
            decided_by,
        } = self;
        let run = &facts.run;
        let recorded = verdicts.recorded();
        let new_decision = NewDecision {
            run_id: run.id,
            turn_index: run.turn_index,
            approved: verdicts.summary(),
            decider_uid: request.decider_uid,
            decided_by,
            reason: whole_turn_reason(&request.form),
            turn_digest: &run.turn_digest,
            client_name: &actor.client_name,
            token_kid: actor.token_kid.as_deref(),
            calls: &recorded,
        };
        let results = denial_results(&verdicts, decided_by);

        if request.form.approves_any() {
            let positioned: Vec<(i32, &ToolResult)> = results
                .iter()
                .map(|(position, result)| (*position, result))
                .collect();
            let edits: Vec<(i32, &str)> = verdicts
                .approved()
                .filter_map(|v| v.edited_arguments.as_deref().map(|a| (v.position, a)))
                .collect();
            // The calls as they are once this commits, so that nothing needs reading again before the turn closes.
            let mut calls = calls;
            as_taken(&mut calls, &positioned, &edits);
            let first_sent = approve::first_sent(resumer, &facts.run, &calls);
            let taking = TakingTurn {
                decision: &new_decision,
                sealer: resumer.pool.sealer(),
                denied: &positioned,
                edits: &edits,
                lease_owner: resumer.instance_id,
                lease: resumer.lease(),
                first_sent,
            };
            let taken = match through {
                Through::Unlocked(Some(mut conn)) => {
                    decision_statements::take_turn(&mut *conn, &taking).await?
                }
                Through::Unlocked(None) => {
                    decision_statements::take_turn(&resumer.pool, &taking).await?
                }
                Through::Locked(tx) => decision_statements::take_turn(tx, &taking).await?,
            };
            let Some((decision, first_started)) = taken else {
                return Ok(None);
            };
            let (denied, edited) = (positioned.len(), edits.len());
            let taken = approve::TakenTurn {
                decision,
                calls,
                earlier_calls,
                transcript: facts.transcript,
                first_started: first_sent.filter(|_| first_started),
                run: facts.run,
            };
            return Ok(Some(Recorded {
                decided_by,
                outcome: RecordedOutcome::Taken {
                    taken,
                    denied,
                    edited,
                },
            }));
        }

        let results: Vec<ToolResult> = results.into_iter().map(|(_, result)| result).collect();
        let positioned: Vec<(i32, &ToolResult)> = calls
            .iter()
            .map(|c| c.position)
            .zip(results.iter())
            .collect();
        let events = tool_events(resumer, run, &calls, &results, decided_by).await?;
        let resumed_event = closing_event(
            run,
            Some(&event_payloads::Verdict {
                decided_by,
                decider_uid: request.decider_uid,
                approved: Some(false),
                outcomes: results.iter().map(|result| result.outcome).collect(),
            }),
        );
        let closing = ClosingTurn {
            run,
            sealer: resumer.pool.sealer(),
            results: &positioned,
            events: &events,
            resumed_event: &resumed_event,
        };
        let write = DenialWrite::new(&new_decision, &closing);
        let recorded = match through {
            Through::Unlocked(connection) => resumer.denials.record(connection, write).await?,
            Through::Locked(tx) => decision_statements::record_denial(tx, write).await?,
        };
        let Some(decision) = recorded else {
            return Ok(None);
        };
        let resumed =
            Resumed::from_reads(run.id, decision, results, facts.transcript, &earlier_calls)?;
        Ok(Some(Recorded {
            decided_by,
            outcome: RecordedOutcome::Denied(resumed),
        }))
    }
}

impl Recorded {
    /// Once the decision committed: counts it, and runs an approval's calls.
    pub(super) async fn finish(self, resumer: &Resumer) -> Result<Resumed, ResumeError> {
        let decided_by = self.decided_by.as_str();
        match self.outcome {
            RecordedOutcome::Denied(resumed) => {
                metrics::decision(false, decided_by);
                tracing::info!(run_id = %resumed.run_id, turn = resumed.decision.turn_index, decided_by,
                    "turn denied");
                Ok(resumed)
            }
            RecordedOutcome::Taken {
                taken,
                denied,
                edited,
            } => {
                metrics::decision(true, decided_by);
                tracing::info!(run_id = %taken.run.id, turn = taken.run.turn_index, decided_by, denied, edited,
                    "turn approved");
                approve::finish_taken(resumer, taken).await
            }
        }
    }
}

/// Applies to calls read before an approval what its taking stores: the denied calls' results and the edited
/// calls' arguments (both exactly as `take_turn` stores them).
fn as_taken(calls: &mut [CallRow], denied: &[(i32, &ToolResult)], edits: &[(i32, &str)]) {
    for call in calls.iter_mut() {
        if let Some((_, result)) = denied
            .iter()
            .find(|(position, _)| *position == call.position)
        {
            call.outcome = Some(result.outcome.as_str().to_owned());
            call.is_error = Some(result.is_error);
            call.content = Some(result.content.clone());
        }
        if let Some((_, arguments)) = edits
            .iter()
            .find(|(position, _)| *position == call.position)
        {
            call.edited_arguments = Some((*arguments).to_owned());
        }
    }
}

/// The denial result of every denied call, with its position, in the turn's order.
fn denial_results(verdicts: &Verdicts, decided_by: DecidedBy) -> Vec<(i32, ToolResult)> {
    verdicts
        .denied()
        .map(|v| {
            (
                v.position,
                results::denied(&v.call_id, &v.tool, v.effect, decided_by, v.reason),
            )
        })
        .collect()
}

/// The approval event's own `reason`: the whole-turn form's; per-call reasons are in its `calls`.
fn whole_turn_reason(form: &DecisionForm) -> Option<crate::domain::vocabulary::DenialReason> {
    match form {
        DecisionForm::WholeTurn { reason, .. } => *reason,
        DecisionForm::PerCall(_) => None,
    }
}
