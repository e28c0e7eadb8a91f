//! The JSON shapes of answers shared by several routes: a run, a decision, a call's result and a released call. Every
//! payload in them (arguments, results, a worker's content) is filled in through the reader's [`Audience`], the one
//! privacy filter of docs/design.md §13: a view cannot be built without saying who reads it.

use crate::domain::notify::NotifyOutcome;
use chrono::{DateTime, Utc};
use serde::Serialize;
use uuid::Uuid;

use crate::domain::model_input::ModelInputFormat;
use crate::domain::released::ReleasedCall;
use crate::domain::remembered::{self, CandidateRule, RuleCall, RuleScope, RuleVerdict, RunAtHand};
use crate::domain::results::ToolResult;
use crate::domain::token_view::{Audience, Reader};
use crate::domain::verdicts::RecordedVerdict;
use crate::domain::vocabulary::{
    DecidedBy, DenialReason, Effect, ExecutorKind, Outcome, PrivacyLevel, RunStatus,
};
use crate::executor::Executors;
use crate::resume::{recorded_results, released_calls};
use crate::storage::StorageError;
use crate::storage::decision_record::DecisionRow;
use crate::storage::runs::{CallRow, RunRow};

#[derive(Debug, Serialize)]
pub struct RunView {
    pub id: Uuid,
    pub owner_uid: i64,
    pub status: RunStatus,
    /// The level that applies: the stricter of the service's and the run's own.
    pub privacy_level: PrivacyLevel,
    /// The format the run was registered in and answers in (docs/design.md §14).
    pub format: ModelInputFormat,
    /// Where the run came from (docs/design.md §2); absent when its registration named none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    pub require_second_approver: bool,
    /// When the current turn expires if nobody decides it; `null`: never.
    pub expires_at: Option<DateTime<Utc>>,
    pub turn: TurnView,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub decision: Option<DecisionView>,
    /// The current turn's results so far, as a decision's answer shows them (docs/design.md §18: a turn decided by
    /// rules at its registration is answered with them); absent while the turn has none.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub results: Vec<ResultView>,
    /// The current turn's calls released to the worker (docs/design.md §15), present whenever it has any.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub released_calls: Vec<ReleasedCallView>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    /// Only in the answer of the request that named `notify` (docs/design.md §20): who is mailed, who is not and why.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub notify: Option<NotifyOutcome>,
}

#[derive(Debug, Serialize)]
pub struct TurnView {
    pub index: i32,
    pub digest: String,
    pub pending_calls: Vec<PendingCallView>,
}

#[derive(Debug, Serialize)]
pub struct PendingCallView {
    pub id: String,
    pub name: String,
    /// Always to an API key; to a decision token only where the run's privacy level shows them ([`Audience`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub arguments: Option<String>,
    pub effect: Effect,
    /// Who runs the call once approved, and whether a decider may edit it (docs/design.md §15).
    pub executor: ExecutorKind,
    pub editable: bool,
    /// While the turn waits, the remembered decision that would decide this call now (docs/design.md §18).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rule: Option<DecidingRuleView>,
}

/// The rule that would decide a waiting turn's call, chosen as its use chooses (a live deny before any approve, the
/// earliest made, its author passing §4 on the run now). Never its arguments: no reader learns through it what the
/// run's privacy level hides, and the call's own arguments say what it matched; to a reader who does not see the
/// call's arguments, no rule at all where one of the tool's matches on arguments.
#[derive(Debug, Serialize)]
pub struct DecidingRuleView {
    pub id: Uuid,
    pub scope: RuleScope,
    pub verdict: RuleVerdict,
    pub reason: Option<DenialReason>,
    pub created_by: i64,
    pub created_at: DateTime<Utc>,
    pub expires_at: Option<DateTime<Utc>>,
}

impl DecidingRuleView {
    /// The rule among `candidates` (the live rules of the call's tool that may apply) that would decide `call` of
    /// the run at hand, as shown to a reader who sees the call's arguments or not
    /// ([`remembered::shown_candidate`]); `None` when none would, or it is not shown.
    pub fn deciding(
        candidates: &[CandidateRule],
        run: &RunAtHand,
        call: &RuleCall<'_>,
        sees_arguments: bool,
    ) -> Option<Self> {
        remembered::shown_candidate(candidates, run, call, sees_arguments).map(|candidate| {
            DecidingRuleView {
                id: candidate.rule.id,
                scope: candidate.scope,
                verdict: candidate.rule.verdict,
                reason: candidate.rule.reason,
                created_by: candidate.rule.created_by,
                created_at: candidate.rule.created_at,
                expires_at: candidate.expires_at,
            }
        })
    }
}

#[derive(Debug, Serialize)]
pub struct DecisionView {
    /// `true`: every call approved; `false`: every call denied; `null`: mixed.
    pub approved: Option<bool>,
    pub decided_by: DecidedBy,
    pub decider_uid: Option<i64>,
    pub reason: Option<DenialReason>,
    pub turn_digest: String,
    pub decided_at: DateTime<Utc>,
    pub calls: Vec<CallVerdictView>,
}

/// The verdict on one call, as a decision's answer shows it (the edited arguments are not repeated).
#[derive(Debug, Serialize)]
pub struct CallVerdictView {
    pub call_id: String,
    pub approved: bool,
    pub reason: Option<DenialReason>,
    pub edited: bool,
    /// The remembered decision that gave this verdict (docs/design.md §18); absent when a person posted it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rule_id: Option<uuid::Uuid>,
}

impl CallVerdictView {
    fn of(verdict: &RecordedVerdict) -> Self {
        CallVerdictView {
            call_id: verdict.call_id.clone(),
            approved: verdict.approved,
            reason: verdict.reason,
            edited: verdict.edited,
            rule_id: verdict.rule_id,
        }
    }
}

impl DecisionView {
    pub fn of(row: &DecisionRow) -> Result<Self, StorageError> {
        Ok(DecisionView {
            approved: row.approved,
            decided_by: row.decided_by()?,
            decider_uid: row.decider_uid,
            reason: row.reason()?,
            turn_digest: row.turn_digest.clone(),
            decided_at: row.decided_at,
            calls: row.calls.0.iter().map(CallVerdictView::of).collect(),
        })
    }
}

impl RunView {
    /// `rules[i]`: the candidate rules of `calls[i]` while the turn waits (shorter, or empty, otherwise).
    pub fn of(
        run: &RunRow,
        calls: &[CallRow],
        rules: &[Vec<CandidateRule>],
        decision: Option<&DecisionRow>,
        privacy_floor: PrivacyLevel,
        executors: &Executors,
        reader: Reader,
    ) -> Result<Self, StorageError> {
        let privacy_level = privacy_floor.stricter(run.privacy_level());
        let audience = Audience::of(reader, privacy_level);
        let at_hand = RunAtHand {
            owner_uid: run.owner_uid,
            require_second_approver: run.require_second_approver,
        };
        Ok(RunView {
            notify: None,
            id: run.id,
            owner_uid: run.owner_uid,
            status: run.status(),
            privacy_level,
            format: run.format(),
            source: run.source.clone(),
            require_second_approver: run.require_second_approver,
            expires_at: run.expires_at,
            turn: TurnView {
                index: run.turn_index,
                digest: run.turn_digest.clone(),
                pending_calls: calls
                    .iter()
                    .enumerate()
                    .map(|(n, call)| {
                        let declared = run.declared(&call.tool);
                        let effect = executors.effect(&call.tool, Some(call.effect()));
                        let candidates = rules.get(n).map_or(&[][..], Vec::as_slice);
                        let rule_call = RuleCall {
                            tool: &call.tool,
                            arguments: &call.arguments,
                            effect,
                        };
                        PendingCallView {
                            id: call.call_id.clone(),
                            name: call.tool.clone(),
                            arguments: audience.payload(&call.arguments),
                            effect,
                            executor: executors
                                .executor_kind(&call.tool, declared.and_then(|d| d.executor)),
                            editable: executors
                                .editable(&call.tool, declared.and_then(|d| d.editable)),
                            rule: DecidingRuleView::deciding(
                                candidates,
                                &at_hand,
                                &rule_call,
                                audience.sees_arguments(),
                            ),
                        }
                    })
                    .collect(),
            },
            decision: decision.map(DecisionView::of).transpose()?,
            results: ResultView::all(&recorded_results(calls)?, audience),
            released_calls: ReleasedCallView::all(
                released_calls(calls, decision.map(DecisionRow::decided_by).transpose()?),
                audience,
            ),
            created_at: run.created_at,
            updated_at: run.updated_at,
        })
    }
}

/// A call's result as a reader sees it ([`Audience::result_content`]): to a key, the result whole.
#[derive(Debug, Serialize)]
pub struct ResultView {
    pub call_id: String,
    pub tool: String,
    pub outcome: Outcome,
    pub is_error: bool,
    /// Absent where the run's privacy level shows a decision token no payload and the result holds one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
    pub edited: bool,
}

impl ResultView {
    pub fn all(results: &[ToolResult], audience: Audience) -> Vec<ResultView> {
        results
            .iter()
            .map(|result| ResultView {
                call_id: result.call_id.clone(),
                tool: result.tool.clone(),
                outcome: result.outcome,
                is_error: result.is_error,
                content: audience.result_content(result),
                edited: result.edited,
            })
            .collect()
    }
}

/// A call released to the worker as a reader sees it (docs/design.md §15): its arguments to run and the worker's
/// result are payloads ([`Audience::payload`]).
#[derive(Debug, Serialize)]
pub struct ReleasedCallView {
    pub call_id: String,
    pub tool: String,
    /// The arguments to run, edited where a decider edited them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub arguments: Option<String>,
    pub edited: bool,
    /// Absent until the worker posted it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result: Option<PostedView>,
}

/// A worker's result of a released call.
#[derive(Debug, Serialize)]
pub struct PostedView {
    /// Absent where the run's privacy level shows a decision token no payload.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
    pub is_error: bool,
}

impl ReleasedCallView {
    pub fn all(released: Vec<ReleasedCall>, audience: Audience) -> Vec<ReleasedCallView> {
        released
            .into_iter()
            .map(|call| ReleasedCallView {
                arguments: call
                    .arguments
                    .as_deref()
                    .and_then(|arguments| audience.payload(arguments)),
                result: call.result.map(|posted| PostedView {
                    content: audience.payload(&posted.content),
                    is_error: posted.is_error,
                }),
                call_id: call.call_id,
                tool: call.tool,
                edited: call.edited,
            })
            .collect()
    }
}
