//! Who of a turn's `notify` list gets a mail (docs/design.md §20): each named person who has an address, is enabled
//! and may decide the run (§4). The others get nothing, and the registration's answer says why, per person.

use serde::Serialize;

use super::authorize::{DeciderFacts, token_user_may_decide};

/// Most people one turn may name.
pub const MAX_NOTIFIED: usize = 10;

/// A named person as the tenant's users table has them; `None` facts: no such user.
#[derive(Debug, Clone, Copy)]
pub struct Named {
    pub uid: i64,
    pub facts: Option<DeciderFacts>,
    pub has_email: bool,
}

/// Why a named person gets no mail.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Skipped {
    UnknownUser,
    Disabled,
    MayNotDecide,
    NoEmail,
}

/// What became of a turn's `notify`: the people a mail is queued for, and the others with the reason.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct NotifyOutcome {
    pub queued: Vec<i64>,
    pub skipped: Vec<SkippedPerson>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct SkippedPerson {
    pub uid: i64,
    pub reason: Skipped,
}

/// Sorts the named people of a run owned by `owner_uid`, in the order named, each once.
pub fn sort(named: &[Named], owner_uid: i64) -> NotifyOutcome {
    let mut outcome = NotifyOutcome::default();
    let mut seen = Vec::with_capacity(named.len());
    for person in named {
        if seen.contains(&person.uid) {
            continue;
        }
        seen.push(person.uid);
        let reason = match person.facts {
            None => Some(Skipped::UnknownUser),
            Some(facts) if facts.disabled => Some(Skipped::Disabled),
            Some(facts) if !token_user_may_decide(person.uid, owner_uid, Some(&facts)) => {
                Some(Skipped::MayNotDecide)
            }
            Some(_) if !person.has_email => Some(Skipped::NoEmail),
            Some(_) => None,
        };
        match reason {
            None => outcome.queued.push(person.uid),
            Some(reason) => outcome.skipped.push(SkippedPerson {
                uid: person.uid,
                reason,
            }),
        }
    }
    outcome
}

#[cfg(test)]
mod tests {
    use super::*;

    const PLAIN: DeciderFacts = DeciderFacts {
        is_admin: false,
        can_approve_others: false,
        disabled: false,
    };

    fn named(uid: i64, facts: Option<DeciderFacts>, has_email: bool) -> Named {
        Named {
            uid,
            facts,
            has_email,
        }
    }

    #[test]
    fn the_owner_and_an_approver_with_addresses_are_mailed_and_everyone_else_is_told_why_not() {
        let approver = DeciderFacts {
            can_approve_others: true,
            ..PLAIN
        };
        let disabled = DeciderFacts {
            disabled: true,
            is_admin: true,
            ..PLAIN
        };
        let outcome = sort(
            &[
                named(7, Some(PLAIN), true),
                named(8, Some(approver), true),
                named(9, None, false),
                named(10, Some(disabled), true),
                named(11, Some(PLAIN), true),
                named(12, Some(approver), false),
                named(7, Some(PLAIN), true),
            ],
            7,
        );
        assert_eq!(outcome.queued, vec![7, 8]);
        let reasons: Vec<(i64, Skipped)> = outcome
            .skipped
            .iter()
            .map(|person| (person.uid, person.reason))
            .collect();
        assert_eq!(
            reasons,
            vec![
                (9, Skipped::UnknownUser),
                (10, Skipped::Disabled),
                (11, Skipped::MayNotDecide),
                (12, Skipped::NoEmail),
            ]
        );
    }
}
