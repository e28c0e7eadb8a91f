//! The public tokens of the service: every fixed string a model, a client or an auditor may match on.
//!
//! These are the crate's stable surface (docs/design.md §3); `openapi.yaml` repeats them as enums and a snapshot test
//! (`tests/api/public_surface.rs`) fails when one of them changes.

use serde::{Deserialize, Serialize};

/// Leads every denied tool result: `Error: approval_denied (…)`.
pub const APPROVAL_DENIED: &str = "approval_denied";
/// `decided_by` when the decider is the run's owner.
pub const RUN_OWNER: &str = "run_owner";
/// `decided_by` when another backend user decided.
pub const OTHER_USER: &str = "other_user";
/// `decided_by` when no decider uid was given.
pub const UNKNOWN: &str = "unknown";
/// Leads the note on the result of a call approved with edited arguments: `Note: approval_edited (…)`.
pub const APPROVAL_EDITED: &str = "approval_edited";
/// Leads the result of every call of a turn nobody decided before it expired: `Error: approval_expired. …`.
pub const APPROVAL_EXPIRED: &str = "approval_expired";
/// Denial reason: the person wants a different version of the change.
pub const VARIANT: &str = "variant";
/// Denial reason: the person does not want the change at all.
pub const SKIP: &str = "skip";

/// Who declined (or approved) a turn, as the model and the audit trail name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DecidedBy {
    RunOwner,
    OtherUser,
    Unknown,
}

impl DecidedBy {
    /// Resolves the token from the decider and the run's owner (docs/design.md §2).
    /// A service run (owner 0) has no human owner, so nobody decides it as its owner.
    pub fn resolve(decider_uid: Option<i64>, owner_uid: i64) -> Self {
        match decider_uid {
            None => DecidedBy::Unknown,
            Some(uid) if owner_uid >= 1 && uid == owner_uid => DecidedBy::RunOwner,
            Some(_) => DecidedBy::OtherUser,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            DecidedBy::RunOwner => RUN_OWNER,
            DecidedBy::OtherUser => OTHER_USER,
            DecidedBy::Unknown => UNKNOWN,
        }
    }

    pub fn parse(token: &str) -> Option<Self> {
        [
            DecidedBy::RunOwner,
            DecidedBy::OtherUser,
            DecidedBy::Unknown,
        ]
        .into_iter()
        .find(|by| by.as_str() == token)
    }
}

/// Why a person denied a turn, when they said.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DenialReason {
    Variant,
    Skip,
}

impl DenialReason {
    pub fn as_str(self) -> &'static str {
        match self {
            DenialReason::Variant => VARIANT,
            DenialReason::Skip => SKIP,
        }
    }

    pub fn parse(token: &str) -> Option<Self> {
        [DenialReason::Variant, DenialReason::Skip]
            .into_iter()
            .find(|reason| reason.as_str() == token)
    }
}

/// How one pending call ended (docs/design.md §2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    Ok,
    Failed,
    Denied,
    NotPermitted,
    Interrupted,
    /// Nobody decided before the turn expired; not a denial.
    Expired,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Ok => "ok",
            Outcome::Failed => "failed",
            Outcome::Denied => "denied",
            Outcome::NotPermitted => "not_permitted",
            Outcome::Interrupted => "interrupted",
            Outcome::Expired => "expired",
        }
    }

    pub fn parse(token: &str) -> Option<Self> {
        [
            Outcome::Ok,
            Outcome::Failed,
            Outcome::Denied,
            Outcome::NotPermitted,
            Outcome::Interrupted,
            Outcome::Expired,
        ]
        .into_iter()
        .find(|outcome| outcome.as_str() == token)
    }
}

/// What a tool does to the world; only `write` tools carry a denial reason in their result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Effect {
    Read,
    Write,
}

impl Effect {
    pub fn as_str(self) -> &'static str {
        match self {
            Effect::Read => "read",
            Effect::Write => "write",
        }
    }

    pub fn parse(token: &str) -> Option<Self> {
        [Effect::Read, Effect::Write]
            .into_iter()
            .find(|effect| effect.as_str() == token)
    }
}

/// Who runs an approved call of a tool (docs/design.md §15): the configured HTTP executor (`service`), or the worker
/// itself, which posts the result (`worker`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ExecutorKind {
    #[default]
    Service,
    Worker,
}

impl ExecutorKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ExecutorKind::Service => "service",
            ExecutorKind::Worker => "worker",
        }
    }
}

/// The life of a run (docs/design.md §5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    WaitingForApproval,
    Resuming,
    /// An approval released calls of worker tools (docs/design.md §15): the run waits for the worker's results.
    Released,
    Resumed,
    Cancelled,
    Completed,
}

impl RunStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::WaitingForApproval => "waiting_for_approval",
            RunStatus::Resuming => "resuming",
            RunStatus::Released => "released",
            RunStatus::Resumed => "resumed",
            RunStatus::Cancelled => "cancelled",
            RunStatus::Completed => "completed",
        }
    }

    pub fn parse(token: &str) -> Option<Self> {
        [
            RunStatus::WaitingForApproval,
            RunStatus::Resuming,
            RunStatus::Released,
            RunStatus::Resumed,
            RunStatus::Cancelled,
            RunStatus::Completed,
        ]
        .into_iter()
        .find(|status| status.as_str() == token)
    }

    /// Cancelled and completed runs never change again.
    pub fn is_final(self) -> bool {
        matches!(self, RunStatus::Cancelled | RunStatus::Completed)
    }
}

/// Privacy levels of stored tool events, strictest first (docs/design.md §6, ADR-064). No `Default`: a run without a
/// level of its own gets the service's configured level, never a level built into the code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PrivacyLevel {
    None,
    Metadata,
    Redacted,
    Full,
}

impl PrivacyLevel {
    pub fn as_str(self) -> &'static str {
        match self {
            PrivacyLevel::None => "none",
            PrivacyLevel::Metadata => "metadata",
            PrivacyLevel::Redacted => "redacted",
            PrivacyLevel::Full => "full",
        }
    }

    pub fn parse(token: &str) -> Option<Self> {
        [
            PrivacyLevel::None,
            PrivacyLevel::Metadata,
            PrivacyLevel::Redacted,
            PrivacyLevel::Full,
        ]
        .into_iter()
        .find(|level| level.as_str() == token)
    }

    /// The stricter of two levels applies: the service's floor and the run's own choice.
    pub fn stricter(self, other: PrivacyLevel) -> PrivacyLevel {
        self.min(other)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_owner_deciding_their_own_run_is_the_run_owner() {
        assert_eq!(DecidedBy::resolve(Some(7), 7), DecidedBy::RunOwner);
    }

    #[test]
    fn another_uid_is_another_user() {
        assert_eq!(DecidedBy::resolve(Some(8), 7), DecidedBy::OtherUser);
    }

    #[test]
    fn no_decider_is_unknown() {
        assert_eq!(DecidedBy::resolve(None, 7), DecidedBy::Unknown);
    }

    #[test]
    fn nobody_is_the_owner_of_a_service_run() {
        assert_eq!(DecidedBy::resolve(Some(0), 0), DecidedBy::OtherUser);
    }

    #[test]
    fn the_stricter_privacy_level_wins_either_way_round() {
        assert_eq!(
            PrivacyLevel::Full.stricter(PrivacyLevel::Metadata),
            PrivacyLevel::Metadata
        );
        assert_eq!(
            PrivacyLevel::None.stricter(PrivacyLevel::Redacted),
            PrivacyLevel::None
        );
    }

    #[test]
    fn every_token_parses_back_from_its_own_text() {
        for by in [
            DecidedBy::RunOwner,
            DecidedBy::OtherUser,
            DecidedBy::Unknown,
        ] {
            assert_eq!(DecidedBy::parse(by.as_str()), Some(by));
            assert_eq!(serde_json::to_value(by).unwrap(), by.as_str());
        }
        for status in [
            RunStatus::WaitingForApproval,
            RunStatus::Resuming,
            RunStatus::Released,
            RunStatus::Resumed,
            RunStatus::Cancelled,
            RunStatus::Completed,
        ] {
            assert_eq!(RunStatus::parse(status.as_str()), Some(status));
            assert_eq!(serde_json::to_value(status).unwrap(), status.as_str());
        }
        for level in [
            PrivacyLevel::None,
            PrivacyLevel::Metadata,
            PrivacyLevel::Redacted,
            PrivacyLevel::Full,
        ] {
            assert_eq!(PrivacyLevel::parse(level.as_str()), Some(level));
            assert_eq!(serde_json::to_value(level).unwrap(), level.as_str());
        }
        for outcome in [
            Outcome::Ok,
            Outcome::Failed,
            Outcome::Denied,
            Outcome::NotPermitted,
            Outcome::Interrupted,
            Outcome::Expired,
        ] {
            assert_eq!(Outcome::parse(outcome.as_str()), Some(outcome));
            assert_eq!(serde_json::to_value(outcome).unwrap(), outcome.as_str());
        }
    }
}
