//! Remembered decisions (docs/design.md §18) as pure rules: which rule would decide each pending call (deny wins, then
//! the earliest made), whether an author could make the decision a rule stands for on the run at hand (§4 at use),
//! and whether the rules decide the turn (every call covered, all by one author).

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::authorize::{self, DeciderFacts, DecisionAsk};
use super::gate::{self, ApprovedCall, Approver};
use super::json_equality::JsonValue;
use super::vocabulary::{DenialReason, Effect};

/// What a rule covers: the later turns of one run, or the owner's runs of one tool until it expires.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RuleScope {
    Run,
    Owner,
}

impl RuleScope {
    pub fn as_str(self) -> &'static str {
        match self {
            RuleScope::Run => "run",
            RuleScope::Owner => "owner",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        [RuleScope::Run, RuleScope::Owner]
            .into_iter()
            .find(|scope| scope.as_str() == text)
    }
}

/// What a rule decides of each call it matches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RuleVerdict {
    Approve,
    Deny,
}

impl RuleVerdict {
    pub fn as_str(self) -> &'static str {
        match self {
            RuleVerdict::Approve => "approve",
            RuleVerdict::Deny => "deny",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        [RuleVerdict::Approve, RuleVerdict::Deny]
            .into_iter()
            .find(|verdict| verdict.as_str() == text)
    }

    pub fn approves(self) -> bool {
        self == RuleVerdict::Approve
    }
}

/// What a decision asks to remember (docs/design.md §18: `remember`, `remember_until`): per call id, the scope its
/// verdict is remembered in; one rule is made per distinct tool and verdict.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Remember {
    pub calls: Vec<(String, RuleScope)>,
    /// The whole-turn form's: every call's verdict, in this scope.
    pub every_call: Option<RuleScope>,
    /// The end of the `owner` scope rules made.
    pub until: Option<DateTime<Utc>>,
}

impl Remember {
    /// The scope `call_id`'s verdict is remembered in, if any.
    pub fn scope_of(&self, call_id: &str) -> Option<RuleScope> {
        self.every_call.or_else(|| {
            self.calls
                .iter()
                .find(|(id, _)| id == call_id)
                .map(|(_, scope)| *scope)
        })
    }

    /// Whether some verdict is remembered in `owner` scope (which needs `until`).
    pub fn any_owner(&self) -> bool {
        self.every_call == Some(RuleScope::Owner)
            || self
                .calls
                .iter()
                .any(|(_, scope)| *scope == RuleScope::Owner)
    }
}

/// A rule author's row as the lookup read it: `facts` is `None` when the uid names no backend user any more.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Author {
    pub facts: Option<DeciderFacts>,
    /// `None`: no limit (docs/design.md §4).
    pub approvable_tools: Option<Vec<String>>,
}

/// A live rule (not revoked, not expired) that may apply to a turn.
#[derive(Debug, Clone, PartialEq)]
pub struct LiveRule {
    pub id: Uuid,
    pub tool: String,
    /// The exact arguments the rule matches, read as a JSON value; `None`: any call of the tool.
    pub arguments: Option<JsonValue>,
    pub verdict: RuleVerdict,
    pub reason: Option<DenialReason>,
    pub created_by: i64,
    pub created_at: DateTime<Utc>,
    pub author: Author,
}

/// The facts of the run at hand that §4 reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunAtHand {
    pub owner_uid: i64,
    pub require_second_approver: bool,
}

/// A pending call as rules are matched against it.
#[derive(Debug, Clone, Copy)]
pub struct RuleCall<'a> {
    pub tool: &'a str,
    /// The arguments text the model proposed.
    pub arguments: &'a str,
    /// The effect that applies (the run's declaration or the configuration's, whichever says write).
    pub effect: Effect,
}

impl LiveRule {
    /// Whether the rule matches the call: its tool, and its arguments equal as JSON values when it has any (the
    /// comparison of edits and replays, [`JsonValue`]: `42` matches `42.0`; integers past 2^53 by their digits).
    pub fn matches(&self, call: &RuleCall<'_>) -> bool {
        self.tool == call.tool
            && self.arguments.as_ref().is_none_or(|wanted| {
                JsonValue::parse(call.arguments).is_some_and(|given| &given == wanted)
            })
    }

    /// Whether the author could post, on the run at hand, the decision this rule stands for on the call: enabled and
    /// allowed to decide the run, not its owner approving under four-eyes, the approver gate for an approved write.
    /// A rule that would not pass decides nothing (docs/design.md §18).
    pub fn passes(&self, run: &RunAtHand, call: &RuleCall<'_>) -> bool {
        may_decide(
            self.created_by,
            &self.author,
            run,
            self.verdict,
            call.tool,
            call.effect,
        )
    }
}

/// Whether the backend user `uid`, whose row is `author`, may make a decision of `verdict` on a call of `tool` with
/// `effect` in the run at hand (docs/design.md §4): the rule of a rule's creation and of its use.
pub fn may_decide(
    uid: i64,
    author: &Author,
    run: &RunAtHand,
    verdict: RuleVerdict,
    tool: &str,
    effect: Effect,
) -> bool {
    let allowed = authorize::authorize(&DecisionAsk {
        decider_uid: Some(uid),
        decider: author.facts,
        owner_uid: run.owner_uid,
        require_second_approver: run.require_second_approver,
        approved: verdict.approves(),
        client_may_decide_anonymously: false,
    })
    .is_ok();
    let gate_passed = !verdict.approves()
        || gate::may_approve(
            Approver::User {
                approvable_tools: author.approvable_tools.as_deref(),
            },
            ApprovedCall {
                tool,
                effect,
                edited: false,
            },
        );
    allowed && gate_passed
}

/// Whether the backend user `uid` (an admin or not) may revoke a rule of `scope` made by `created_by` for the owner
/// `owner_uid` (DESIGN.md §18): its author, an admin, and the run's owner for a `run` scope rule only. An
/// owner-scope rule an admin made over the owner's runs is a guardrail the owner may not lift.
pub fn may_revoke(
    scope: RuleScope,
    created_by: i64,
    owner_uid: i64,
    uid: i64,
    is_admin: bool,
) -> bool {
    created_by == uid || is_admin || (scope == RuleScope::Run && owner_uid == uid)
}

/// Per call, in the turn's order, the rule that would decide it: among the live rules that match it and pass §4 at
/// use, a deny before any approve, and between rules of the same verdict the earliest made (ties by id, so that every
/// instance picks the same one).
pub fn deciding<'r>(
    rules: &'r [LiveRule],
    run: &RunAtHand,
    calls: &[RuleCall<'_>],
) -> Vec<Option<&'r LiveRule>> {
    calls
        .iter()
        .map(|call| deciding_call(rules, run, call))
        .collect()
}

/// The rule that would decide one call, among `rules` (any that may apply: the ones of other tools match nothing):
/// the choice [`deciding`] makes for each call, and the one a waiting turn's view shows (docs/design.md §18).
pub fn deciding_call<'r>(
    rules: impl IntoIterator<Item = &'r LiveRule>,
    run: &RunAtHand,
    call: &RuleCall<'_>,
) -> Option<&'r LiveRule> {
    rules
        .into_iter()
        .filter(|rule| rule.matches(call) && rule.passes(run, call))
        .min_by_key(|rule| (rule.verdict.approves(), rule.created_at, rule.id))
}

/// A live rule that may decide a waiting turn's call, as the run view and the inbox read it with the call: the rule
/// as its use weighs it, and what they show of it besides.
#[derive(Debug, Clone, PartialEq)]
pub struct CandidateRule {
    pub rule: LiveRule,
    pub scope: RuleScope,
    pub expires_at: Option<DateTime<Utc>>,
}

/// The candidate that would decide `call` now, chosen as its use would choose it ([`deciding_call`]).
pub fn deciding_candidate<'r>(
    candidates: &'r [CandidateRule],
    run: &RunAtHand,
    call: &RuleCall<'_>,
) -> Option<&'r CandidateRule> {
    let chosen = deciding_call(
        candidates.iter().map(|candidate| &candidate.rule),
        run,
        call,
    )?;
    candidates
        .iter()
        .find(|candidate| std::ptr::eq(&candidate.rule, chosen))
}

/// The candidate a reader is shown for `call` while its turn waits: the one [`deciding_candidate`] chooses, to a
/// reader who sees the call's arguments; to one who does not (a decision token below `redacted`), none at all where
/// some candidate matches on arguments, whether or not it matches this call: otherwise the rule shown would tell
/// whether a rule's arguments, which that reader may make, equal the hidden ones (docs/design.md §18).
pub fn shown_candidate<'r>(
    candidates: &'r [CandidateRule],
    run: &RunAtHand,
    call: &RuleCall<'_>,
    sees_arguments: bool,
) -> Option<&'r CandidateRule> {
    if !sees_arguments
        && candidates
            .iter()
            .any(|candidate| candidate.rule.arguments.is_some())
    {
        return None;
    }
    deciding_candidate(candidates, run, call)
}

/// The author whose rules decide the whole turn: every call has a deciding rule and all of them are that one person's.
/// `None`: the turn waits for a person (covered in part, by several people, or not at all).
pub fn sole_author(deciding: &[Option<&LiveRule>]) -> Option<i64> {
    let mut author = None;
    for rule in deciding {
        let uid = rule.as_ref()?.created_by;
        match author {
            None => author = Some(uid),
            Some(first) if first != uid => return None,
            Some(_) => {}
        }
    }
    author
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    const PLAIN: DeciderFacts = DeciderFacts {
        is_admin: false,
        can_approve_others: false,
        disabled: false,
    };
    const RUN: RunAtHand = RunAtHand {
        owner_uid: 7,
        require_second_approver: false,
    };

    fn rule(id: u128, uid: i64, tool: &str, verdict: RuleVerdict, minute: u32) -> LiveRule {
        LiveRule {
            id: Uuid::from_u128(id),
            tool: tool.to_owned(),
            arguments: None,
            verdict,
            reason: None,
            created_by: uid,
            created_at: Utc.with_ymd_and_hms(2026, 1, 1, 0, minute, 0).unwrap(),
            author: Author {
                facts: Some(PLAIN),
                approvable_tools: None,
            },
        }
    }

    fn call<'a>(tool: &'a str, arguments: &'a str) -> RuleCall<'a> {
        RuleCall {
            tool,
            arguments,
            effect: Effect::Write,
        }
    }

    fn ids(found: &[Option<&LiveRule>]) -> Vec<Option<u128>> {
        found.iter().map(|r| r.map(|r| r.id.as_u128())).collect()
    }

    #[test]
    fn a_deny_rule_wins_over_an_earlier_approve_rule() {
        let rules = [
            rule(1, 7, "edit", RuleVerdict::Approve, 1),
            rule(2, 7, "edit", RuleVerdict::Deny, 2),
        ];
        assert_eq!(
            ids(&deciding(&rules, &RUN, &[call("edit", "{}")])),
            [Some(2)]
        );
    }

    #[test]
    fn a_candidate_shown_is_the_one_its_use_would_choose() {
        let candidates: Vec<CandidateRule> = [
            rule(1, 7, "edit", RuleVerdict::Approve, 1),
            rule(2, 7, "edit", RuleVerdict::Deny, 2),
            rule(3, 7, "edit", RuleVerdict::Deny, 3),
        ]
        .into_iter()
        .map(|rule| CandidateRule {
            rule,
            scope: RuleScope::Run,
            expires_at: None,
        })
        .collect();
        let shown = deciding_candidate(&candidates, &RUN, &call("edit", "{}"));
        assert_eq!(shown.map(|c| c.rule.id.as_u128()), Some(2));
        assert_eq!(
            deciding_candidate(&candidates, &RUN, &call("send", "{}")),
            None
        );
    }

    #[test]
    fn a_reader_who_cannot_see_the_arguments_is_shown_no_rule_where_one_matches_on_arguments() {
        let mut on_arguments = rule(1, 7, "edit", RuleVerdict::Deny, 1);
        on_arguments.arguments = JsonValue::parse(r#"{"page": 12}"#);
        let candidates: Vec<CandidateRule> =
            [on_arguments, rule(2, 7, "edit", RuleVerdict::Approve, 2)]
                .into_iter()
                .map(|rule| CandidateRule {
                    rule,
                    scope: RuleScope::Run,
                    expires_at: None,
                })
                .collect();
        let shown = |arguments: &str, sees_arguments: bool| {
            shown_candidate(&candidates, &RUN, &call("edit", arguments), sees_arguments)
                .map(|c| c.rule.id.as_u128())
        };
        assert_eq!(shown(r#"{"page": 12}"#, true), Some(1));
        assert_eq!(shown(r#"{"page": 13}"#, true), Some(2));
        // The same answer whether the rule's arguments are the call's or not.
        assert_eq!(shown(r#"{"page": 12}"#, false), None);
        assert_eq!(shown(r#"{"page": 13}"#, false), None);
        // Rules without arguments say nothing of them.
        assert_eq!(
            shown_candidate(&candidates[1..], &RUN, &call("edit", "{}"), false)
                .map(|c| c.rule.id.as_u128()),
            Some(2)
        );
    }

    #[test]
    fn between_rules_of_one_verdict_the_earliest_decides() {
        let rules = [
            rule(1, 7, "edit", RuleVerdict::Approve, 5),
            rule(2, 7, "edit", RuleVerdict::Approve, 3),
        ];
        assert_eq!(
            ids(&deciding(&rules, &RUN, &[call("edit", "{}")])),
            [Some(2)]
        );
    }

    #[test]
    fn a_rule_with_arguments_matches_only_equal_arguments_as_json_values() {
        let mut exact = rule(1, 7, "edit", RuleVerdict::Approve, 1);
        exact.arguments = JsonValue::parse(r#"{"a": 1, "b": [true]}"#);
        let rules = [exact];
        let calls = [
            call("edit", r#"{ "b" : [ true ], "a": 1 }"#),
            call("edit", r#"{"a": 2, "b": [true]}"#),
            call("edit", "not json"),
        ];
        assert_eq!(ids(&deciding(&rules, &RUN, &calls)), [Some(1), None, None]);
    }

    #[test]
    fn a_deny_rule_matches_a_number_written_another_way() {
        let mut never = rule(1, 7, "edit", RuleVerdict::Deny, 1);
        never.arguments = JsonValue::parse(r#"{"page": 42}"#);
        let rules = [never];
        let calls = [
            call("edit", r#"{"page": 42.0}"#),
            call("edit", r#"{"page": 4.2e1}"#),
            call("edit", r#"{"page": 420e-1}"#),
            call("edit", r#"{"page": 43}"#),
        ];
        assert_eq!(
            ids(&deciding(&rules, &RUN, &calls)),
            [Some(1), Some(1), Some(1), None]
        );
    }

    #[test]
    fn a_rule_on_an_integer_past_64_bits_matches_only_that_integer() {
        let mut never = rule(1, 7, "edit", RuleVerdict::Deny, 1);
        never.arguments = JsonValue::parse(r#"{"order": 123456789012345678901234}"#);
        let rules = [never];
        let calls = [
            call("edit", r#"{"order": 123456789012345678901235}"#),
            call("edit", r#"{"order": 1.23456789012345678901234e23}"#),
        ];
        assert_eq!(ids(&deciding(&rules, &RUN, &calls)), [None, Some(1)]);
    }

    #[test]
    fn the_owner_revokes_run_rules_of_others_but_not_an_admins_owner_scope_rule() {
        const ADMIN: i64 = 10;
        // The run's owner, on a run-scope rule someone else made.
        assert!(may_revoke(RuleScope::Run, 8, 7, 7, false));
        // The owner, on an admin's owner-scope rule: a guardrail, not theirs to lift.
        assert!(!may_revoke(RuleScope::Owner, ADMIN, 7, 7, false));
        // Its author and any admin may.
        assert!(may_revoke(RuleScope::Owner, 7, 7, 7, false));
        assert!(may_revoke(RuleScope::Owner, ADMIN, 7, ADMIN, true));
        assert!(may_revoke(RuleScope::Owner, 8, 7, 11, true));
        // Anybody else may not.
        assert!(!may_revoke(RuleScope::Run, 8, 7, 9, false));
    }

    #[test]
    fn a_rule_of_another_tool_covers_nothing() {
        let rules = [rule(1, 7, "edit", RuleVerdict::Deny, 1)];
        assert_eq!(ids(&deciding(&rules, &RUN, &[call("send", "{}")])), [None]);
    }

    #[test]
    fn one_author_covering_every_call_decides_the_turn() {
        let rules = [
            rule(1, 7, "edit", RuleVerdict::Approve, 1),
            rule(2, 7, "send", RuleVerdict::Deny, 2),
        ];
        let found = deciding(&rules, &RUN, &[call("edit", "{}"), call("send", "{}")]);
        assert_eq!(sole_author(&found), Some(7));
    }

    #[test]
    fn rules_of_two_people_on_one_turn_decide_nothing() {
        let mut other = rule(2, 8, "send", RuleVerdict::Approve, 2);
        other.author.facts = Some(DeciderFacts {
            can_approve_others: true,
            ..PLAIN
        });
        let rules = [rule(1, 7, "edit", RuleVerdict::Approve, 1), other];
        let found = deciding(&rules, &RUN, &[call("edit", "{}"), call("send", "{}")]);
        assert_eq!(ids(&found), [Some(1), Some(2)]);
        assert_eq!(sole_author(&found), None);
    }

    #[test]
    fn a_turn_covered_in_part_decides_nothing() {
        let rules = [rule(1, 7, "edit", RuleVerdict::Approve, 1)];
        let found = deciding(&rules, &RUN, &[call("edit", "{}"), call("send", "{}")]);
        assert_eq!(sole_author(&found), None);
    }

    #[test]
    fn a_rule_of_a_disabled_author_decides_nothing() {
        let mut disabled = rule(1, 7, "edit", RuleVerdict::Deny, 1);
        disabled.author.facts = Some(DeciderFacts {
            disabled: true,
            ..PLAIN
        });
        assert_eq!(
            ids(&deciding(&[disabled], &RUN, &[call("edit", "{}")])),
            [None]
        );
    }

    #[test]
    fn a_rule_of_an_author_who_lost_the_right_to_decide_decides_nothing() {
        let stranger = rule(1, 9, "edit", RuleVerdict::Approve, 1);
        assert_eq!(
            ids(&deciding(&[stranger], &RUN, &[call("edit", "{}")])),
            [None]
        );
    }

    #[test]
    fn the_owners_approve_rule_decides_nothing_on_a_run_that_requires_a_second_approver() {
        let four_eyes = RunAtHand {
            require_second_approver: true,
            ..RUN
        };
        let rules = [
            rule(1, 7, "edit", RuleVerdict::Approve, 1),
            rule(2, 7, "send", RuleVerdict::Deny, 2),
        ];
        assert_eq!(
            ids(&deciding(
                &rules,
                &four_eyes,
                &[call("edit", "{}"), call("send", "{}")]
            )),
            [None, Some(2)]
        );
    }

    #[test]
    fn an_approve_rule_of_a_write_outside_the_authors_approvable_tools_decides_nothing() {
        let mut gated = rule(1, 7, "edit", RuleVerdict::Approve, 1);
        gated.author.approvable_tools = Some(vec!["send".to_owned()]);
        let mut deny = rule(2, 7, "edit", RuleVerdict::Deny, 2);
        deny.author.approvable_tools = Some(Vec::new());
        let read = RuleCall {
            effect: Effect::Read,
            ..call("edit", "{}")
        };
        assert_eq!(
            ids(&deciding(&[gated.clone()], &RUN, &[call("edit", "{}")])),
            [None]
        );
        assert_eq!(ids(&deciding(&[gated], &RUN, &[read])), [Some(1)]);
        // The gate never applies to a denial.
        assert_eq!(
            ids(&deciding(&[deny], &RUN, &[call("edit", "{}")])),
            [Some(2)]
        );
    }
}
