//! Events (docs/design.md §10): what a consumer waits for, as the outbox stores it and the feed and webhooks send it.
//!
//! An event's data holds ids and metadata only: the run, the tenant, the turn's index and digest, who decided, the
//! verdict and how many calls ended in each outcome, and where the run came from (its `source` label, of a narrow
//! alphabet: no payload). It is built from those values alone, so no transcript,
//! argument, result or reason text can reach it, at any privacy level.

use std::collections::BTreeMap;

use serde::Serialize;
use uuid::Uuid;

use super::model_input::ModelInputFormat;
use super::vocabulary::{DecidedBy, Outcome, RunStatus};

/// The kinds of event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub enum EventType {
    /// A run was registered, or a new turn was appended: it waits for a decision.
    #[serde(rename = "run.waiting")]
    Waiting,
    /// A decided turn released calls to the worker (docs/design.md §15): it waits for their results.
    #[serde(rename = "run.released")]
    Released,
    /// A decided turn has its results: the run may go on.
    #[serde(rename = "run.resumed")]
    Resumed,
    /// A turn nobody decided in time ended: every call has the expired result, and the run may go on.
    #[serde(rename = "run.expired")]
    Expired,
    #[serde(rename = "run.cancelled")]
    Cancelled,
    #[serde(rename = "run.completed")]
    Completed,
    /// A remembered decision was made (docs/design.md §18).
    #[serde(rename = "rule.created")]
    RuleCreated,
    /// A remembered decision was revoked.
    #[serde(rename = "rule.revoked")]
    RuleRevoked,
}

impl EventType {
    pub const ALL: [EventType; 8] = [
        EventType::Waiting,
        EventType::Released,
        EventType::Resumed,
        EventType::Expired,
        EventType::Cancelled,
        EventType::Completed,
        EventType::RuleCreated,
        EventType::RuleRevoked,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Waiting => "run.waiting",
            EventType::Released => "run.released",
            EventType::Resumed => "run.resumed",
            EventType::Expired => "run.expired",
            EventType::Cancelled => "run.cancelled",
            EventType::Completed => "run.completed",
            EventType::RuleCreated => "rule.created",
            EventType::RuleRevoked => "rule.revoked",
        }
    }

    pub fn parse(text: &str) -> Option<EventType> {
        EventType::ALL
            .into_iter()
            .find(|kind| kind.as_str() == text)
    }

    /// The event a move to `status` announces, if any (`resuming` is not waited for: the tools are still running).
    /// `run.released` is written only by the statement that releases calls, with their ids ([`released_data`]).
    pub fn of_status(status: RunStatus) -> Option<EventType> {
        match status {
            RunStatus::WaitingForApproval => Some(EventType::Waiting),
            RunStatus::Released => None,
            RunStatus::Resumed => Some(EventType::Resumed),
            RunStatus::Cancelled => Some(EventType::Cancelled),
            RunStatus::Completed => Some(EventType::Completed),
            RunStatus::Resuming => None,
        }
    }
}

/// The facts of a run an event tells.
#[derive(Debug, Clone)]
pub struct RunFacts<'a> {
    pub run_id: Uuid,
    pub tenant: &'a str,
    pub status: RunStatus,
    /// The format the run was registered in and answers in (docs/design.md §14).
    pub format: ModelInputFormat,
    pub turn_index: i32,
    pub turn_digest: &'a str,
    /// Where the run came from (docs/design.md §2), if its registration said.
    pub source: Option<&'a str>,
}

/// What a resume adds: who decided, the verdict, and the outcome of each call of the turn.
#[derive(Debug, Clone)]
pub struct Verdict {
    pub decided_by: DecidedBy,
    pub decider_uid: Option<i64>,
    /// `None` for a decision that approved some calls and denied others.
    pub approved: Option<bool>,
    pub outcomes: Vec<Outcome>,
}

/// The `data` of an event: `{run_id, tenant, status, format, turn: {index, digest}}`, and for `run.resumed` also
/// `decision: {approved, decided_by, decider_uid}` and `outcomes: {outcome: count}`. Serialized straight into the
/// outbox row: a decision builds no JSON tree for it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EventData {
    run_id: Uuid,
    tenant: String,
    status: &'static str,
    format: &'static str,
    turn: TurnData,
    #[serde(skip_serializing_if = "Option::is_none")]
    decision: Option<DecisionData>,
    #[serde(skip_serializing_if = "Option::is_none")]
    outcomes: Option<BTreeMap<&'static str, u32>>,
    /// `run.released` only: the ids of the calls released to the worker (never their arguments).
    #[serde(skip_serializing_if = "Option::is_none")]
    released_call_ids: Option<Vec<String>>,
    /// The run's `source` label; absent when it has none, so events of unlabelled runs read as before.
    #[serde(skip_serializing_if = "Option::is_none")]
    source: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
struct TurnData {
    index: i32,
    digest: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
struct DecisionData {
    approved: Option<bool>,
    decided_by: &'static str,
    decider_uid: Option<i64>,
}

/// The data of an event about `facts`, with the verdict of a resume.
pub fn data(facts: &RunFacts<'_>, verdict: Option<&Verdict>) -> EventData {
    let (decision, outcomes) = match verdict {
        Some(verdict) => {
            let mut outcomes: BTreeMap<&'static str, u32> = BTreeMap::new();
            for outcome in &verdict.outcomes {
                *outcomes.entry(outcome.as_str()).or_default() += 1;
            }
            let decision = DecisionData {
                approved: verdict.approved,
                decided_by: verdict.decided_by.as_str(),
                decider_uid: verdict.decider_uid,
            };
            (Some(decision), Some(outcomes))
        }
        None => (None, None),
    };
    EventData {
        run_id: facts.run_id,
        tenant: facts.tenant.to_owned(),
        status: facts.status.as_str(),
        format: facts.format.as_str(),
        turn: TurnData {
            index: facts.turn_index,
            digest: facts.turn_digest.to_owned(),
        },
        decision,
        outcomes,
        released_call_ids: None,
        source: facts.source.map(str::to_owned),
    }
}

/// The data of `run.released`: the run's facts (status `released`) and the ids of the calls released to the worker.
pub fn released_data(facts: &RunFacts<'_>, released_call_ids: Vec<String>) -> EventData {
    EventData {
        released_call_ids: Some(released_call_ids),
        ..data(facts, None)
    }
}

/// The `data` of `rule.created` and `rule.revoked` (docs/design.md §18): the rule's ids, tool, verdict and scope, and
/// who made or revoked it; never its arguments.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RuleEventData {
    pub rule_id: Uuid,
    pub tenant: String,
    pub scope: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run_id: Option<Uuid>,
    pub owner_uid: i64,
    pub tool: String,
    pub verdict: &'static str,
    pub created_by: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub revoked_by: Option<i64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(status: RunStatus) -> RunFacts<'static> {
        RunFacts {
            run_id: Uuid::nil(),
            tenant: "acme",
            status,
            format: ModelInputFormat::Anthropic,
            turn_index: 2,
            turn_digest: "ab",
            source: None,
        }
    }

    #[test]
    fn every_event_type_reads_back_from_its_name() {
        for kind in EventType::ALL {
            assert_eq!(EventType::parse(kind.as_str()), Some(kind));
            assert_eq!(
                serde_json::to_value(kind).unwrap(),
                serde_json::Value::from(kind.as_str())
            );
        }
        assert_eq!(EventType::parse("run.deleted"), None);
    }

    #[test]
    fn a_resume_counts_its_outcomes_and_names_who_decided() {
        let verdict = Verdict {
            decided_by: DecidedBy::RunOwner,
            decider_uid: Some(7),
            approved: Some(false),
            outcomes: vec![Outcome::Denied, Outcome::Denied],
        };
        let data = serde_json::to_value(data(&facts(RunStatus::Resumed), Some(&verdict))).unwrap();
        assert_eq!(
            data,
            serde_json::json!({
                "run_id": Uuid::nil(),
                "tenant": "acme",
                "status": "resumed",
                "format": "anthropic",
                "turn": {"index": 2, "digest": "ab"},
                "decision": {"approved": false, "decided_by": "run_owner", "decider_uid": 7},
                "outcomes": {"denied": 2},
            })
        );
    }

    #[test]
    fn a_waiting_run_tells_its_turn_only() {
        let data = serde_json::to_value(data(&facts(RunStatus::WaitingForApproval), None)).unwrap();
        assert_eq!(data["status"], "waiting_for_approval");
        assert!(data.get("decision").is_none() && data.get("outcomes").is_none());
    }

    #[test]
    fn a_release_names_the_released_calls_by_id_only() {
        let data = released_data(&facts(RunStatus::Released), vec!["call_2".into()]);
        let data = serde_json::to_value(data).unwrap();
        assert_eq!(data["status"], "released");
        assert_eq!(data["released_call_ids"], serde_json::json!(["call_2"]));
        assert!(data.get("decision").is_none() && data.get("outcomes").is_none());
    }

    #[test]
    fn a_labelled_run_names_its_source_and_an_unlabelled_one_leaves_it_out() {
        let labelled = RunFacts {
            source: Some("mcp:github"),
            ..facts(RunStatus::WaitingForApproval)
        };
        let data = serde_json::to_value(data(&labelled, None)).unwrap();
        assert_eq!(data["source"], "mcp:github");
        let data = serde_json::to_value(super::data(&facts(RunStatus::Resumed), None)).unwrap();
        assert!(data.get("source").is_none());
    }

    #[test]
    fn resuming_is_not_an_event() {
        assert_eq!(EventType::of_status(RunStatus::Resuming), None);
        assert_eq!(
            EventType::of_status(RunStatus::Cancelled),
            Some(EventType::Cancelled)
        );
    }
}
