//! What a decision says of each pending call (docs/design.md §2 "verdict", §5): the whole-turn form and the per-call
//! form, checked and resolved against the turn's calls into one verdict per call, in the turn's order.
//!
//! The whole-turn form `{approved, reason?}` is one verdict for every call, so everything after resolution (the
//! rules of §4, recording, replays) handles a single shape. [`Verdicts::approved`] is the one place where the calls
//! a decision releases are known, with tool and effect, before anything is recorded.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};
use uuid::Uuid;

use super::json_equality::same_json;
use super::vocabulary::{DenialReason, Effect, ExecutorKind};

/// A decision's verdicts as the client posted them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DecisionForm {
    /// `{approved, reason?}`: the same verdict for every call.
    WholeTurn {
        approved: bool,
        reason: Option<DenialReason>,
    },
    /// `{calls: [{call_id, approved, reason?, arguments?}]}`.
    PerCall(Vec<CallVerdict>),
}

/// One entry of `calls`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallVerdict {
    pub call_id: String,
    pub approved: bool,
    pub reason: Option<DenialReason>,
    /// Edited arguments, as the decider sent them (a JSON object's text).
    pub arguments: Option<String>,
}

/// A decision that does not fit the turn or the rules of its form; answered 422 with [`VerdictError::code`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VerdictError {
    #[error("calls names {0:?} more than once")]
    RepeatedCall(String),
    #[error("calls names {0:?}, which is not a pending call of this turn")]
    UnknownCall(String),
    #[error("calls does not name the pending call {0:?}; give a verdict for every call")]
    MissingCall(String),
    #[error("arguments are given only with an approval (call {0:?})")]
    ArgumentsOnDenial(String),
    #[error("a reason is given only with a denial (call {0:?})")]
    ReasonOnApproval(String),
    #[error("the edited arguments of call {0:?} are not the text of a JSON object")]
    ArgumentsNotObject(String),
    #[error(
        "the edited arguments of call {call_id:?} have {bytes} bytes; at most {max} are accepted (MAX_ARGUMENTS_BYTES)"
    )]
    ArgumentsTooLarge {
        call_id: String,
        bytes: usize,
        max: usize,
    },
    #[error("calls is empty; a turn has at least one pending call")]
    NoCalls,
    #[error("the tool of call {0:?} is declared editable: false; approve or deny it as proposed")]
    NotEditable(String),
}

impl VerdictError {
    /// The stable `code` of the problem answer.
    pub fn code(&self) -> &'static str {
        match self {
            VerdictError::RepeatedCall(_) => "repeated_call",
            VerdictError::UnknownCall(_) => "unknown_call",
            VerdictError::MissingCall(_) => "missing_call",
            VerdictError::ArgumentsOnDenial(_) => "arguments_require_approval",
            VerdictError::ReasonOnApproval(_) => "reason_requires_denial",
            VerdictError::ArgumentsNotObject(_) => "arguments_not_object",
            VerdictError::ArgumentsTooLarge { .. } => "arguments_too_large",
            VerdictError::NoCalls => "missing_call",
            VerdictError::NotEditable(_) => "not_editable",
        }
    }
}

impl DecisionForm {
    /// The checks that need no turn: repeats, fields on the wrong verdict, arguments' shape and size.
    pub fn check(&self, max_arguments_bytes: usize) -> Result<(), VerdictError> {
        let DecisionForm::PerCall(calls) = self else {
            return Ok(());
        };
        if calls.is_empty() {
            return Err(VerdictError::NoCalls);
        }
        let mut seen = std::collections::HashSet::new();
        for call in calls {
            if !seen.insert(call.call_id.as_str()) {
                return Err(VerdictError::RepeatedCall(call.call_id.clone()));
            }
            if call.approved && call.reason.is_some() {
                return Err(VerdictError::ReasonOnApproval(call.call_id.clone()));
            }
            let Some(arguments) = &call.arguments else {
                continue;
            };
            if !call.approved {
                return Err(VerdictError::ArgumentsOnDenial(call.call_id.clone()));
            }
            if arguments.len() > max_arguments_bytes {
                return Err(VerdictError::ArgumentsTooLarge {
                    call_id: call.call_id.clone(),
                    bytes: arguments.len(),
                    max: max_arguments_bytes,
                });
            }
            if !matches!(
                serde_json::from_str::<Value>(arguments),
                Ok(Value::Object(_))
            ) {
                return Err(VerdictError::ArgumentsNotObject(call.call_id.clone()));
            }
        }
        Ok(())
    }

    /// Whether the decision approves at least one call: such a decision is an approval for §4's rules.
    pub fn approves_any(&self) -> bool {
        match self {
            DecisionForm::WholeTurn { approved, .. } => *approved,
            DecisionForm::PerCall(calls) => calls.iter().any(|call| call.approved),
        }
    }
}

/// A pending call as the verdicts are resolved against it.
#[derive(Debug, Clone, Copy)]
pub struct TurnCall<'a> {
    pub position: i32,
    pub call_id: &'a str,
    pub tool: &'a str,
    /// The arguments text the model proposed.
    pub arguments: &'a str,
    /// The effect that applies (the run's declaration or the service's configuration, whichever says write).
    pub effect: Effect,
    /// Who runs the call once approved (docs/design.md §15).
    pub executor: ExecutorKind,
    /// Whether a decider may edit its arguments.
    pub editable: bool,
}

/// The verdict on one pending call, resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    pub position: i32,
    pub call_id: String,
    pub tool: String,
    pub effect: Effect,
    /// Who runs the call once approved: an approved call of a worker's tool is released to the worker.
    pub executor: ExecutorKind,
    pub approved: bool,
    pub reason: Option<DenialReason>,
    /// Edited arguments that differ (as JSON values) from the proposed ones; `None`: as proposed.
    pub edited_arguments: Option<String>,
    /// The remembered decision that gave this verdict (docs/design.md §18); `None`: a person posted it.
    pub rule_id: Option<Uuid>,
    /// The scope the decision asks this verdict remembered in (docs/design.md §18).
    pub remember: Option<super::remembered::RuleScope>,
}

/// One verdict per pending call, in the turn's order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdicts(pub Vec<Verdict>);

/// A verdict as the approval event records it: never the edited arguments, only their SHA-256.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordedVerdict {
    pub call_id: String,
    pub approved: bool,
    pub reason: Option<DenialReason>,
    pub edited: bool,
    /// Lowercase hex SHA-256 of the edited arguments text, when edited.
    pub arguments_sha256: Option<String>,
    /// The remembered decision that gave the verdict (docs/design.md §18: the approval event names the rule of each
    /// call); left out when a person posted it, so that decisions recorded before rules existed read as they did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule_id: Option<Uuid>,
    /// The scope the decision asked this verdict remembered in (`remember`), part of the decision for its replay.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remember: Option<super::remembered::RuleScope>,
}

impl Verdicts {
    /// Resolves a checked form against the turn's calls: every call named exactly once, edits that change nothing
    /// dropped.
    pub fn resolve(form: &DecisionForm, calls: &[TurnCall<'_>]) -> Result<Verdicts, VerdictError> {
        let verdict = |call: &TurnCall<'_>, approved, reason, edited_arguments| Verdict {
            position: call.position,
            call_id: call.call_id.to_owned(),
            tool: call.tool.to_owned(),
            effect: call.effect,
            executor: call.executor,
            approved,
            reason,
            edited_arguments,
            rule_id: None,
            remember: None,
        };
        match form {
            DecisionForm::WholeTurn { approved, reason } => Ok(Verdicts(
                calls
                    .iter()
                    .map(|call| verdict(call, *approved, *reason, None))
                    .collect(),
            )),
            DecisionForm::PerCall(given) => {
                if let Some(unknown) = given
                    .iter()
                    .find(|g| !calls.iter().any(|call| call.call_id == g.call_id))
                {
                    return Err(VerdictError::UnknownCall(unknown.call_id.clone()));
                }
                calls
                    .iter()
                    .map(|call| {
                        let g = given
                            .iter()
                            .find(|g| g.call_id == call.call_id)
                            .ok_or_else(|| VerdictError::MissingCall(call.call_id.to_owned()))?;
                        let edited = g
                            .arguments
                            .as_ref()
                            .filter(|edited| !same_json(edited, call.arguments))
                            .cloned();
                        // Arguments equal to the proposed ones are no edit, so they are no edit of a tool that
                        // may not be edited either.
                        if edited.is_some() && !call.editable {
                            return Err(VerdictError::NotEditable(call.call_id.to_owned()));
                        }
                        Ok(verdict(call, g.approved, g.reason, edited))
                    })
                    .collect::<Result<Vec<_>, _>>()
                    .map(Verdicts)
            }
        }
    }

    /// The calls this decision approves, with tool and effect, in the turn's order: what the approver gates of
    /// docs/design.md §4 look at, before anything is recorded.
    pub fn approved(&self) -> impl Iterator<Item = &Verdict> {
        self.0.iter().filter(|verdict| verdict.approved)
    }

    /// Whether the decision releases a call to the worker: approves a call of a worker's tool (docs/design.md §15).
    pub fn releases_any(&self) -> bool {
        self.approved()
            .any(|verdict| verdict.executor == ExecutorKind::Worker)
    }

    /// The calls this decision denies, in the turn's order.
    pub fn denied(&self) -> impl Iterator<Item = &Verdict> {
        self.0.iter().filter(|verdict| !verdict.approved)
    }

    pub fn approves_any(&self) -> bool {
        self.approved().next().is_some()
    }

    /// `decision.approved`: `true` when every call is approved, `false` when every call is denied, `None` if mixed.
    pub fn summary(&self) -> Option<bool> {
        summary(self.0.iter().map(|verdict| verdict.approved))
    }

    /// The verdicts as the approval event records them.
    pub fn recorded(&self) -> Vec<RecordedVerdict> {
        self.0
            .iter()
            .map(|verdict| RecordedVerdict {
                call_id: verdict.call_id.clone(),
                approved: verdict.approved,
                reason: verdict.reason,
                edited: verdict.edited_arguments.is_some(),
                arguments_sha256: verdict
                    .edited_arguments
                    .as_ref()
                    .map(|arguments| hex::encode(Sha256::digest(arguments.as_bytes()))),
                rule_id: verdict.rule_id,
                remember: verdict.remember,
            })
            .collect()
    }

    /// Whether a recorded decision says the same of every call: verdict, reason and edited arguments (as JSON
    /// values; `stored_edits` gives each call's stored edited arguments by call id).
    pub fn same_as<'a>(
        &self,
        recorded: &[RecordedVerdict],
        stored_edits: impl Fn(&str) -> Option<&'a str>,
    ) -> bool {
        self.0.len() == recorded.len()
            && self.0.iter().all(|verdict| {
                recorded.iter().any(|stored| {
                    stored.call_id == verdict.call_id
                        && stored.approved == verdict.approved
                        && stored.remember == verdict.remember
                        && stored.reason == verdict.reason
                        && match (&verdict.edited_arguments, stored_edits(&stored.call_id)) {
                            (None, None) => !stored.edited,
                            (Some(asked), Some(stored_text)) => same_json(asked, stored_text),
                            _ => false,
                        }
                })
            })
    }
}

/// `true` / `false` when every verdict agrees, `None` when they are mixed (or there are none).
pub fn summary(approvals: impl Iterator<Item = bool>) -> Option<bool> {
    let (mut any_approved, mut any_denied) = (false, false);
    for approved in approvals {
        any_approved |= approved;
        any_denied |= !approved;
    }
    match (any_approved, any_denied) {
        (true, false) => Some(true),
        (false, true) => Some(false),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn calls() -> Vec<TurnCall<'static>> {
        vec![
            TurnCall {
                position: 0,
                call_id: "a",
                tool: "read_page",
                arguments: r#"{"id": 1}"#,
                effect: Effect::Read,
                executor: ExecutorKind::Service,
                editable: true,
            },
            TurnCall {
                position: 1,
                call_id: "b",
                tool: "save_page",
                arguments: r#"{"title": "x", "n": 2}"#,
                effect: Effect::Write,
                executor: ExecutorKind::Service,
                editable: true,
            },
        ]
    }

    fn per_call(entries: &[(&str, bool, Option<&str>)]) -> DecisionForm {
        DecisionForm::PerCall(
            entries
                .iter()
                .map(|(id, approved, arguments)| CallVerdict {
                    call_id: (*id).into(),
                    approved: *approved,
                    reason: None,
                    arguments: arguments.map(Into::into),
                })
                .collect(),
        )
    }

    #[test]
    fn a_whole_turn_form_is_the_same_verdict_for_every_call() {
        let form = DecisionForm::WholeTurn {
            approved: false,
            reason: Some(DenialReason::Skip),
        };
        let verdicts = Verdicts::resolve(&form, &calls()).unwrap();
        assert_eq!(verdicts.0.len(), 2);
        assert!(
            verdicts
                .0
                .iter()
                .all(|v| !v.approved && v.reason == Some(DenialReason::Skip))
        );
        assert_eq!(verdicts.summary(), Some(false));
    }

    #[test]
    fn per_call_verdicts_come_out_in_the_turns_order_whatever_the_order_given() {
        let verdicts = Verdicts::resolve(
            &per_call(&[("b", false, None), ("a", true, None)]),
            &calls(),
        )
        .unwrap();
        let ids: Vec<&str> = verdicts.0.iter().map(|v| v.call_id.as_str()).collect();
        assert_eq!(ids, ["a", "b"]);
        assert_eq!(verdicts.summary(), None);
        let approved: Vec<(&str, Effect)> = verdicts
            .approved()
            .map(|v| (v.tool.as_str(), v.effect))
            .collect();
        assert_eq!(approved, [("read_page", Effect::Read)]);
    }

    #[test]
    fn calls_that_miss_repeat_or_invent_a_call_are_refused_with_their_codes() {
        let missing = Verdicts::resolve(&per_call(&[("a", true, None)]), &calls()).unwrap_err();
        assert_eq!(missing.code(), "missing_call");
        let invented = Verdicts::resolve(
            &per_call(&[("a", true, None), ("b", true, None), ("z", true, None)]),
            &calls(),
        )
        .unwrap_err();
        assert_eq!(invented.code(), "unknown_call");
        let repeated = per_call(&[("a", true, None), ("a", false, None)])
            .check(1024)
            .unwrap_err();
        assert_eq!(repeated.code(), "repeated_call");
    }

    #[test]
    fn fields_on_the_wrong_verdict_and_bad_arguments_are_refused_with_their_codes() {
        let cases: [(DecisionForm, &str); 5] = [
            (
                per_call(&[("a", false, Some("{}"))]),
                "arguments_require_approval",
            ),
            (
                per_call(&[("a", true, Some("[1]"))]),
                "arguments_not_object",
            ),
            (
                per_call(&[("a", true, Some("{nope"))]),
                "arguments_not_object",
            ),
            (
                per_call(&[("a", true, Some(r#"{"long": "xxxxxxxx"}"#))]),
                "arguments_too_large",
            ),
            (
                DecisionForm::PerCall(vec![CallVerdict {
                    call_id: "a".into(),
                    approved: true,
                    reason: Some(DenialReason::Variant),
                    arguments: None,
                }]),
                "reason_requires_denial",
            ),
        ];
        for (form, code) in cases {
            assert_eq!(form.check(16).unwrap_err().code(), code, "{form:?}");
        }
    }

    #[test]
    fn an_edit_of_a_tool_that_may_not_be_edited_is_refused_but_the_same_arguments_are_no_edit() {
        let mut calls = calls();
        calls[1].editable = false;
        calls[1].executor = ExecutorKind::Worker;
        let edited = per_call(&[("a", true, None), ("b", true, Some(r#"{"title": "y"}"#))]);
        let refused = Verdicts::resolve(&edited, &calls).unwrap_err();
        assert_eq!(refused, VerdictError::NotEditable("b".into()));
        assert_eq!(refused.code(), "not_editable");
        let same = per_call(&[
            ("a", false, None),
            ("b", true, Some(r#"{"n":2,"title":"x"}"#)),
        ]);
        let verdicts = Verdicts::resolve(&same, &calls).unwrap();
        assert_eq!(verdicts.0[1].edited_arguments, None);
        assert!(
            verdicts.releases_any(),
            "an approved call of a worker's tool is released"
        );
        let denied = per_call(&[("a", true, None), ("b", false, None)]);
        assert!(!Verdicts::resolve(&denied, &calls).unwrap().releases_any());
    }

    #[test]
    fn edited_arguments_equal_as_json_to_the_proposed_ones_are_no_edit() {
        let verdicts = Verdicts::resolve(
            &per_call(&[
                ("a", true, Some(r#"{ "id" : 1 }"#)),
                ("b", true, Some(r#"{"n": 2, "title": "y"}"#)),
            ]),
            &calls(),
        )
        .unwrap();
        assert_eq!(verdicts.0[0].edited_arguments, None);
        assert_eq!(
            verdicts.0[1].edited_arguments.as_deref(),
            Some(r#"{"n": 2, "title": "y"}"#)
        );
        let recorded = verdicts.recorded();
        assert!(!recorded[0].edited && recorded[0].arguments_sha256.is_none());
        assert!(recorded[1].edited && recorded[1].arguments_sha256.as_ref().unwrap().len() == 64);
    }

    #[test]
    fn an_edit_that_writes_a_number_another_way_is_no_edit_but_another_integer_past_64_bits_is() {
        let calls = [TurnCall {
            arguments: r#"{"id": 42, "order": 123456789012345678901234}"#,
            ..calls()[0]
        }];
        let resolved = |edit: &str| {
            Verdicts::resolve(&per_call(&[("a", true, Some(edit))]), &calls)
                .unwrap()
                .0[0]
                .edited_arguments
                .clone()
        };
        assert_eq!(
            resolved(r#"{"id": 4.2e1, "order": 1.23456789012345678901234e23}"#),
            None
        );
        let other = r#"{"id": 42, "order": 123456789012345678901235}"#;
        assert_eq!(resolved(other).as_deref(), Some(other));
    }

    #[test]
    fn a_replay_with_an_edit_whose_numbers_are_written_another_way_is_the_same_decision() {
        let first = Verdicts::resolve(
            &per_call(&[
                ("a", false, None),
                ("b", true, Some(r#"{"n":3,"title":"y"}"#)),
            ]),
            &calls(),
        )
        .unwrap();
        let recorded = first.recorded();
        let stored = |id: &str| (id == "b").then_some(r#"{"n":3,"title":"y"}"#);
        let again = Verdicts::resolve(
            &per_call(&[
                ("b", true, Some(r#"{"title": "y", "n": 3.0}"#)),
                ("a", false, None),
            ]),
            &calls(),
        )
        .unwrap();
        assert!(again.same_as(&recorded, stored));
    }

    #[test]
    fn the_same_verdicts_match_in_any_order_and_with_arguments_spelled_differently() {
        let first = Verdicts::resolve(
            &per_call(&[
                ("a", false, None),
                ("b", true, Some(r#"{"n":3,"title":"y"}"#)),
            ]),
            &calls(),
        )
        .unwrap();
        let recorded = first.recorded();
        let stored = |id: &str| (id == "b").then_some(r#"{"n":3,"title":"y"}"#);
        let again = Verdicts::resolve(
            &per_call(&[
                ("b", true, Some(r#"{"title": "y", "n": 3}"#)),
                ("a", false, None),
            ]),
            &calls(),
        )
        .unwrap();
        assert!(again.same_as(&recorded, stored));
        let other = Verdicts::resolve(
            &per_call(&[
                ("b", true, Some(r#"{"title": "z", "n": 3}"#)),
                ("a", false, None),
            ]),
            &calls(),
        )
        .unwrap();
        assert!(!other.same_as(&recorded, stored));
        let unedited = Verdicts::resolve(
            &per_call(&[("b", true, None), ("a", false, None)]),
            &calls(),
        )
        .unwrap();
        assert!(!unedited.same_as(&recorded, stored));
    }
}
