//! The approver tool gate (docs/design.md §4, ADR-133): an approver may only release a write they could run.
//!
//! A pure rule over the calls a decision approves, applied after `authorize` said the decider may decide the run
//! at all. A denial approves no call, so it is never gated: callers pass what an approval releases, and a denial
//! passes nothing.
//!
//! Edited arguments are a release too (docs/design.md §17): the call runs as the owner with the decider's arguments, so
//! an edited call needs the right to approve a write whatever the tool's effect, and nobody (no decider uid) may
//! edit at all.

use super::authorize::Refusal;
use super::vocabulary::Effect;

/// A call a decision approves: its tool, its effect as the executors resolve it, and whether the decision edits its
/// arguments.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ApprovedCall<'a> {
    pub tool: &'a str,
    pub effect: Effect,
    pub edited: bool,
}

/// Who releases the calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Approver<'a> {
    /// No decider uid: may release reads only.
    Anonymous,
    /// A backend user and its `approvable_tools` (`None`: no limit). The owner is held to the list too.
    User {
        approvable_tools: Option<&'a [String]>,
    },
}

/// Whether `approver` may release every call of `approved`. Unedited reads always pass; an edited call is held to
/// the rule of a write; the first call outside the rule refuses the whole decision (nothing is recorded).
pub fn check(approver: Approver<'_>, approved: &[ApprovedCall<'_>]) -> Result<(), Refusal> {
    let gated = |call: &&ApprovedCall<'_>| call.effect == Effect::Write || call.edited;
    for call in approved.iter().filter(gated) {
        match approver {
            Approver::Anonymous if call.edited => return Err(Refusal::AnonymousEdit),
            Approver::Anonymous => return Err(Refusal::AnonymousWriteApproval),
            Approver::User {
                approvable_tools: Some(tools),
            } if !tools.iter().any(|tool| tool == call.tool) => {
                return Err(Refusal::ToolNotApprovable);
            }
            Approver::User { .. } => {}
        }
    }
    Ok(())
}

/// Whether `approver` could approve one call: what the inbox shows per call.
pub fn may_approve(approver: Approver<'_>, call: ApprovedCall<'_>) -> bool {
    check(approver, &[call]).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(tool: &str, effect: Effect) -> ApprovedCall<'_> {
        ApprovedCall {
            tool,
            effect,
            edited: false,
        }
    }

    fn edit(tool: &str, effect: Effect) -> ApprovedCall<'_> {
        ApprovedCall {
            edited: true,
            ..call(tool, effect)
        }
    }

    /// Owner, another user and an admin are all `User`s here: the gate does not look at who they are, only at
    /// their list (whether they may decide the run at all is `authorize`'s). Anonymous has no list.
    #[test]
    fn the_gate_over_approver_effect_and_list() {
        let list = vec!["send_mail".to_owned()];
        let approvers = [
            (
                "owner",
                Approver::User {
                    approvable_tools: Some(&list),
                },
            ),
            (
                "other user",
                Approver::User {
                    approvable_tools: Some(&list),
                },
            ),
            (
                "admin",
                Approver::User {
                    approvable_tools: Some(&list),
                },
            ),
            (
                "unlimited user",
                Approver::User {
                    approvable_tools: None,
                },
            ),
            ("anonymous", Approver::Anonymous),
        ];
        for (who, approver) in approvers {
            for effect in [Effect::Read, Effect::Write] {
                for (tool, in_list) in [("send_mail", true), ("drop_table", false)] {
                    let approve = check(approver, &[call(tool, effect)]);
                    let expected = match (approver, effect) {
                        (_, Effect::Read) => Ok(()),
                        (Approver::Anonymous, Effect::Write) => {
                            Err(Refusal::AnonymousWriteApproval)
                        }
                        (
                            Approver::User {
                                approvable_tools: None,
                            },
                            _,
                        ) => Ok(()),
                        (Approver::User { .. }, Effect::Write) if in_list => Ok(()),
                        (Approver::User { .. }, Effect::Write) => Err(Refusal::ToolNotApprovable),
                    };
                    assert_eq!(
                        approve, expected,
                        "{who} approving a {effect:?} call of {tool}"
                    );
                    // A denial approves nothing, so nothing is gated.
                    assert_eq!(check(approver, &[]), Ok(()), "{who} denying");
                }
            }
        }
    }

    #[test]
    fn one_write_outside_the_list_refuses_the_whole_approval() {
        let list = vec!["read_file".to_owned()];
        let approver = Approver::User {
            approvable_tools: Some(&list),
        };
        let calls = [
            call("read_file", Effect::Read),
            call("delete_file", Effect::Write),
        ];
        assert_eq!(check(approver, &calls), Err(Refusal::ToolNotApprovable));
        assert!(may_approve(approver, calls[0]));
        assert!(!may_approve(approver, calls[1]));
    }

    #[test]
    fn an_empty_list_allows_reads_only() {
        let approver = Approver::User {
            approvable_tools: Some(&[]),
        };
        assert_eq!(check(approver, &[call("x", Effect::Read)]), Ok(()));
        assert_eq!(
            check(approver, &[call("x", Effect::Write)]),
            Err(Refusal::ToolNotApprovable)
        );
    }

    #[test]
    fn an_edit_needs_the_right_to_approve_a_write_whatever_the_tools_effect() {
        let list = vec!["send_mail".to_owned()];
        let listed = Approver::User {
            approvable_tools: Some(&list),
        };
        let unlimited = Approver::User {
            approvable_tools: None,
        };
        let reads_only = Approver::User {
            approvable_tools: Some(&[]),
        };
        for effect in [Effect::Read, Effect::Write] {
            assert_eq!(check(listed, &[edit("send_mail", effect)]), Ok(()));
            assert_eq!(check(unlimited, &[edit("lookup", effect)]), Ok(()));
            assert_eq!(
                check(listed, &[edit("lookup", effect)]),
                Err(Refusal::ToolNotApprovable),
                "{effect:?}"
            );
            assert_eq!(
                check(reads_only, &[edit("lookup", effect)]),
                Err(Refusal::ToolNotApprovable),
                "{effect:?}"
            );
        }
        // The same read, unedited, is never gated.
        assert_eq!(check(reads_only, &[call("lookup", Effect::Read)]), Ok(()));
    }

    #[test]
    fn nobody_may_edit_a_call_of_either_effect() {
        for effect in [Effect::Read, Effect::Write] {
            assert_eq!(
                check(Approver::Anonymous, &[edit("lookup", effect)]),
                Err(Refusal::AnonymousEdit),
                "{effect:?}"
            );
        }
        assert_eq!(
            check(Approver::Anonymous, &[call("lookup", Effect::Read)]),
            Ok(())
        );
    }
}
