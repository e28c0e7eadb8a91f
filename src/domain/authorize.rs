//! Who may decide a turn (docs/design.md §4), as a pure rule over facts the caller has already loaded.

use super::vocabulary::DecidedBy;

/// The facts about a backend user that the rule needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeciderFacts {
    pub is_admin: bool,
    pub can_approve_others: bool,
    pub disabled: bool,
}

/// Whether a decision token's user `uid`, whose row in the run's tenant is `user` (`None`: there is none), may decide a
/// run owned by `owner_uid`: the one rule of every token route, whichever statement read the rows.
pub fn token_user_may_decide(uid: i64, owner_uid: i64, user: Option<&DeciderFacts>) -> bool {
    user.is_some_and(|user| {
        !user.disabled && (owner_uid == uid || user.is_admin || user.can_approve_others)
    })
}

/// What is asked: who decides, and what.
#[derive(Debug, Clone, Copy)]
pub struct DecisionAsk {
    pub decider_uid: Option<i64>,
    /// `None` when the decider uid names no backend user.
    pub decider: Option<DeciderFacts>,
    pub owner_uid: i64,
    pub require_second_approver: bool,
    pub approved: bool,
    /// The client holds the scope to decide with no decider uid.
    pub client_may_decide_anonymously: bool,
}

/// Why a decision is refused; every variant is answered 403 and nothing is recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("this client may not decide without a decider uid")]
    AnonymousNotAllowed,
    #[error("the decider uid names no backend user")]
    UnknownDecider,
    #[error("the decider is disabled")]
    DisabledDecider,
    #[error(
        "the decider is neither the run's owner, an admin, nor allowed to approve others' runs"
    )]
    NotPermitted,
    #[error("this run requires a second approver: its owner may deny but not approve")]
    FourEyes,
    #[error("the decision approves a write call of a tool outside the decider's approvable_tools")]
    ToolNotApprovable,
    #[error("a decision without a decider uid may not approve a write call")]
    AnonymousWriteApproval,
    #[error("a decision without a decider uid may not edit a call's arguments")]
    AnonymousEdit,
}

impl Refusal {
    /// The stable `code` of the problem answer.
    pub fn code(self) -> &'static str {
        match self {
            Refusal::AnonymousNotAllowed => "anonymous_decision_not_allowed",
            Refusal::UnknownDecider => "unknown_decider",
            Refusal::DisabledDecider => "decider_disabled",
            Refusal::NotPermitted => "decider_not_permitted",
            Refusal::FourEyes => "second_approver_required",
            Refusal::ToolNotApprovable => "tool_not_approvable",
            Refusal::AnonymousWriteApproval => "anonymous_write_approval",
            Refusal::AnonymousEdit => "anonymous_edit",
        }
    }
}

/// Applies §4 and, when the decision may go ahead, names who decided it.
pub fn authorize(ask: &DecisionAsk) -> Result<DecidedBy, Refusal> {
    let decided_by = DecidedBy::resolve(ask.decider_uid, ask.owner_uid);
    match (ask.decider_uid, ask.decider) {
        (None, _) if ask.client_may_decide_anonymously => Ok(decided_by),
        (None, _) => Err(Refusal::AnonymousNotAllowed),
        (Some(_), None) => Err(Refusal::UnknownDecider),
        (Some(_), Some(facts)) if facts.disabled => Err(Refusal::DisabledDecider),
        (Some(_), Some(facts)) => {
            let is_owner = decided_by == DecidedBy::RunOwner;
            if !(is_owner || facts.is_admin || facts.can_approve_others) {
                Err(Refusal::NotPermitted)
            } else if is_owner && ask.approved && ask.require_second_approver {
                Err(Refusal::FourEyes)
            } else {
                Ok(decided_by)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PLAIN: DeciderFacts = DeciderFacts {
        is_admin: false,
        can_approve_others: false,
        disabled: false,
    };

    fn ask(decider_uid: Option<i64>, decider: Option<DeciderFacts>) -> DecisionAsk {
        DecisionAsk {
            decider_uid,
            decider,
            owner_uid: 7,
            require_second_approver: false,
            approved: false,
            client_may_decide_anonymously: false,
        }
    }

    #[test]
    fn the_owner_may_decide_their_own_run() {
        assert_eq!(
            authorize(&ask(Some(7), Some(PLAIN))),
            Ok(DecidedBy::RunOwner)
        );
    }

    #[test]
    fn an_admin_may_decide_another_users_run() {
        let admin = DeciderFacts {
            is_admin: true,
            ..PLAIN
        };
        assert_eq!(
            authorize(&ask(Some(8), Some(admin))),
            Ok(DecidedBy::OtherUser)
        );
    }

    #[test]
    fn an_approver_may_decide_another_users_run() {
        let approver = DeciderFacts {
            can_approve_others: true,
            ..PLAIN
        };
        assert_eq!(
            authorize(&ask(Some(8), Some(approver))),
            Ok(DecidedBy::OtherUser)
        );
    }

    #[test]
    fn a_plain_user_may_not_decide_another_users_run() {
        assert_eq!(
            authorize(&ask(Some(8), Some(PLAIN))),
            Err(Refusal::NotPermitted)
        );
    }

    #[test]
    fn an_unknown_decider_is_refused() {
        assert_eq!(authorize(&ask(Some(8), None)), Err(Refusal::UnknownDecider));
    }

    #[test]
    fn a_disabled_decider_is_refused_even_as_an_admin_or_the_owner() {
        let disabled_admin = DeciderFacts {
            is_admin: true,
            disabled: true,
            ..PLAIN
        };
        assert_eq!(
            authorize(&ask(Some(8), Some(disabled_admin))),
            Err(Refusal::DisabledDecider)
        );
        let disabled_owner = DeciderFacts {
            disabled: true,
            ..PLAIN
        };
        assert_eq!(
            authorize(&ask(Some(7), Some(disabled_owner))),
            Err(Refusal::DisabledDecider)
        );
    }

    #[test]
    fn no_decider_needs_the_anonymous_scope() {
        assert_eq!(
            authorize(&ask(None, None)),
            Err(Refusal::AnonymousNotAllowed)
        );
        let anonymous = DecisionAsk {
            client_may_decide_anonymously: true,
            ..ask(None, None)
        };
        assert_eq!(authorize(&anonymous), Ok(DecidedBy::Unknown));
    }

    #[test]
    fn under_four_eyes_the_owner_may_deny_but_not_approve() {
        let four_eyes = DecisionAsk {
            require_second_approver: true,
            ..ask(Some(7), Some(PLAIN))
        };
        assert_eq!(authorize(&four_eyes), Ok(DecidedBy::RunOwner));
        let approval = DecisionAsk {
            approved: true,
            ..four_eyes
        };
        assert_eq!(authorize(&approval), Err(Refusal::FourEyes));
    }

    #[test]
    fn under_four_eyes_an_approver_may_approve() {
        let approver = DeciderFacts {
            can_approve_others: true,
            ..PLAIN
        };
        let approval = DecisionAsk {
            require_second_approver: true,
            approved: true,
            ..ask(Some(8), Some(approver))
        };
        assert_eq!(authorize(&approval), Ok(DecidedBy::OtherUser));
    }

    #[test]
    fn an_admin_owner_under_four_eyes_still_may_not_approve_their_own_run() {
        let admin = DeciderFacts {
            is_admin: true,
            ..PLAIN
        };
        let approval = DecisionAsk {
            require_second_approver: true,
            approved: true,
            ..ask(Some(7), Some(admin))
        };
        assert_eq!(authorize(&approval), Err(Refusal::FourEyes));
    }
}
