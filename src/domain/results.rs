//! The tool results the model reads after a decision: the denial text of ADR-200, the edit note, the expired text
//! and the other fixed results.
//!
//! Every text here is built from fixed words and a tool name only. Tool names are restricted to
//! `^[A-Za-z0-9_.-]{1,128}$` at registration, so they need no escaping and cannot carry a person's words. The one
//! exception is the edit note, which quotes the arguments a decider typed: its fixed words say who typed them.

use super::vocabulary::{
    APPROVAL_DENIED, APPROVAL_EDITED, APPROVAL_EXPIRED, DecidedBy, DenialReason, Effect, Outcome,
};

/// One tool result per pending call, in the turn's order. Not serializable: answers show it through
/// `http::views::ResultView`, built with the reader's audience (`domain::token_view`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolResult {
    pub call_id: String,
    pub tool: String,
    pub outcome: Outcome,
    pub is_error: bool,
    pub content: String,
    /// Whether the call ran with arguments a decider edited (its content then starts with the edit note).
    pub edited: bool,
}

/// The result of a denied call (docs/design.md §3).
///
/// The reason is rendered only for `write` tools: telling the model to propose "a different version" of a read makes
/// no sense, so read calls keep the plain text.
pub fn denied(
    call_id: &str,
    tool: &str,
    effect: Effect,
    decided_by: DecidedBy,
    reason: Option<DenialReason>,
) -> ToolResult {
    ToolResult {
        call_id: call_id.to_owned(),
        tool: tool.to_owned(),
        outcome: Outcome::Denied,
        is_error: true,
        content: denial_text(tool, effect, decided_by, reason),
        edited: false,
    }
}

/// The text of a denied call's result.
pub fn denial_text(
    tool: &str,
    effect: Effect,
    decided_by: DecidedBy,
    reason: Option<DenialReason>,
) -> String {
    let reason = reason.filter(|_| effect == Effect::Write);
    let token = decided_by.as_str();
    let reason_part = match reason {
        Some(reason) => format!(", reason: {}", reason.as_str()),
        None => String::new(),
    };
    format!(
        "Error: {APPROVAL_DENIED} (decided_by: {token}{reason_part}). The approval for tool \"{tool}\" was declined {who}. Nothing was executed. {advice}",
        who = who_declined(decided_by),
        advice = advice(decided_by, reason),
    )
}

fn who_declined(decided_by: DecidedBy) -> &'static str {
    match decided_by {
        DecidedBy::RunOwner => "by the user who started this run, the person you are talking to",
        DecidedBy::OtherUser => "by another backend user, not the person you are talking to",
        DecidedBy::Unknown => "by the human reviewer",
    }
}

fn advice(decided_by: DecidedBy, reason: Option<DenialReason>) -> &'static str {
    use DecidedBy::*;
    use DenialReason::*;
    match (decided_by, reason) {
        (RunOwner, None) => {
            "Tell them that they declined the approval themselves, not the system or an operator, and ask whether the change should be proposed again."
        }
        (OtherUser, None) => {
            "Tell the user that another backend user declined the approval; do not describe it as a system error."
        }
        (Unknown, None) => {
            "Tell the user that a human reviewer declined the approval; do not describe it as a system error."
        }
        (RunOwner, Some(Variant)) => {
            "Tell them that they declined this version themselves, not the system or an operator, and propose a different version of this change."
        }
        (OtherUser, Some(Variant)) => {
            "Tell the user that another backend user declined this version, and propose a different version of this change."
        }
        (Unknown, Some(Variant)) => {
            "Tell the user that a human reviewer declined this version, and propose a different version of this change."
        }
        (RunOwner, Some(Skip)) => {
            "Tell them that they declined the approval themselves, not the system or an operator, and do not propose this change again."
        }
        (OtherUser, Some(Skip)) => {
            "Tell the user that another backend user declined the approval, and do not propose this change again."
        }
        (Unknown, Some(Skip)) => {
            "Tell the user that a human reviewer declined the approval, and do not propose this change again."
        }
    }
}

/// The note that leads the result of a call approved with edited arguments (docs/design.md §3): `arguments` is the
/// text exactly as the decider sent it.
pub fn edit_note(decided_by: DecidedBy, arguments: &str) -> String {
    format!(
        "Note: {APPROVAL_EDITED} (decided_by: {token}). The arguments of this call were changed before it was approved, {who}; it ran with these arguments instead of the ones you proposed: {arguments}",
        token = decided_by.as_str(),
        who = who_declined(decided_by),
    )
}

/// The result of an approved call that ran with edited arguments: the edit note, a blank line, then the result.
pub fn with_edit_note(result: ToolResult, decided_by: DecidedBy, arguments: &str) -> ToolResult {
    ToolResult {
        content: format!("{}\n\n{}", edit_note(decided_by, arguments), result.content),
        edited: true,
        ..result
    }
}

/// The text of a call of a turn nobody decided before it expired (docs/design.md §3): not a denial, no `decided_by`.
pub fn expired_text(tool: &str) -> String {
    format!(
        "Error: {APPROVAL_EXPIRED}. No one decided on the approval for tool \"{tool}\" before it expired. Nothing was executed. Tell the user that the approval request expired without a decision, not that anyone declined it, and ask whether the change should be proposed again."
    )
}

/// The result of a call of an expired turn.
pub fn expired(call_id: &str, tool: &str) -> ToolResult {
    fixed_error(call_id, tool, Outcome::Expired, expired_text(tool))
}

/// An approved call whose tool has no enabled executor.
pub fn not_permitted(call_id: &str, tool: &str) -> ToolResult {
    fixed_error(
        call_id,
        tool,
        Outcome::NotPermitted,
        format!("Error: tool \"{tool}\" is no longer permitted and was not executed."),
    )
}

/// An approved call whose executor timed out, refused, or answered badly.
pub fn failed(call_id: &str, tool: &str) -> ToolResult {
    fixed_error(
        call_id,
        tool,
        Outcome::Failed,
        format!("Error: tool \"{tool}\" failed."),
    )
}

/// An approved call that was running when the service stopped: it may or may not have taken effect.
pub fn interrupted(call_id: &str, tool: &str) -> ToolResult {
    fixed_error(
        call_id,
        tool,
        Outcome::Interrupted,
        format!("Error: tool \"{tool}\" was interrupted; whether it took effect is unknown."),
    )
}

/// An approved call whose executor answered: its content and error flag pass through.
pub fn executed(call_id: &str, tool: &str, content: String, is_error: bool) -> ToolResult {
    ToolResult {
        call_id: call_id.to_owned(),
        tool: tool.to_owned(),
        outcome: if is_error {
            Outcome::Failed
        } else {
            Outcome::Ok
        },
        is_error,
        content,
        edited: false,
    }
}

fn fixed_error(call_id: &str, tool: &str, outcome: Outcome, content: String) -> ToolResult {
    ToolResult {
        call_id: call_id.to_owned(),
        tool: tool.to_owned(),
        outcome,
        is_error: true,
        content,
        edited: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TOOL: &str = "update_page_metadata";

    /// The nine texts of docs/design.md §3, written out in full so that any drift in wording fails here.
    #[test]
    fn every_denial_text_reads_exactly_as_the_design_says() {
        let table: [(DecidedBy, Option<DenialReason>, &str); 9] = [
            (
                DecidedBy::RunOwner,
                None,
                "Error: approval_denied (decided_by: run_owner). The approval for tool \"update_page_metadata\" was declined by the user who started this run, the person you are talking to. Nothing was executed. Tell them that they declined the approval themselves, not the system or an operator, and ask whether the change should be proposed again.",
            ),
            (
                DecidedBy::OtherUser,
                None,
                "Error: approval_denied (decided_by: other_user). The approval for tool \"update_page_metadata\" was declined by another backend user, not the person you are talking to. Nothing was executed. Tell the user that another backend user declined the approval; do not describe it as a system error.",
            ),
            (
                DecidedBy::Unknown,
                None,
                "Error: approval_denied (decided_by: unknown). The approval for tool \"update_page_metadata\" was declined by the human reviewer. Nothing was executed. Tell the user that a human reviewer declined the approval; do not describe it as a system error.",
            ),
            (
                DecidedBy::RunOwner,
                Some(DenialReason::Variant),
                "Error: approval_denied (decided_by: run_owner, reason: variant). The approval for tool \"update_page_metadata\" was declined by the user who started this run, the person you are talking to. Nothing was executed. Tell them that they declined this version themselves, not the system or an operator, and propose a different version of this change.",
            ),
            (
                DecidedBy::OtherUser,
                Some(DenialReason::Variant),
                "Error: approval_denied (decided_by: other_user, reason: variant). The approval for tool \"update_page_metadata\" was declined by another backend user, not the person you are talking to. Nothing was executed. Tell the user that another backend user declined this version, and propose a different version of this change.",
            ),
            (
                DecidedBy::Unknown,
                Some(DenialReason::Variant),
                "Error: approval_denied (decided_by: unknown, reason: variant). The approval for tool \"update_page_metadata\" was declined by the human reviewer. Nothing was executed. Tell the user that a human reviewer declined this version, and propose a different version of this change.",
            ),
            (
                DecidedBy::RunOwner,
                Some(DenialReason::Skip),
                "Error: approval_denied (decided_by: run_owner, reason: skip). The approval for tool \"update_page_metadata\" was declined by the user who started this run, the person you are talking to. Nothing was executed. Tell them that they declined the approval themselves, not the system or an operator, and do not propose this change again.",
            ),
            (
                DecidedBy::OtherUser,
                Some(DenialReason::Skip),
                "Error: approval_denied (decided_by: other_user, reason: skip). The approval for tool \"update_page_metadata\" was declined by another backend user, not the person you are talking to. Nothing was executed. Tell the user that another backend user declined the approval, and do not propose this change again.",
            ),
            (
                DecidedBy::Unknown,
                Some(DenialReason::Skip),
                "Error: approval_denied (decided_by: unknown, reason: skip). The approval for tool \"update_page_metadata\" was declined by the human reviewer. Nothing was executed. Tell the user that a human reviewer declined the approval, and do not propose this change again.",
            ),
        ];
        for (decided_by, reason, expected) in table {
            assert_eq!(
                denial_text(TOOL, Effect::Write, decided_by, reason),
                expected,
                "{decided_by:?} {reason:?}"
            );
        }
    }

    /// The edit note of docs/design.md §3 for the three tokens, written out in full.
    #[test]
    fn every_edit_note_reads_exactly_as_the_design_says() {
        let arguments = r#"{"title": "Q3 plan", "tags": ["a"]}"#;
        let table: [(DecidedBy, &str); 3] = [
            (
                DecidedBy::RunOwner,
                "Note: approval_edited (decided_by: run_owner). The arguments of this call were changed before it was approved, by the user who started this run, the person you are talking to; it ran with these arguments instead of the ones you proposed: {\"title\": \"Q3 plan\", \"tags\": [\"a\"]}",
            ),
            (
                DecidedBy::OtherUser,
                "Note: approval_edited (decided_by: other_user). The arguments of this call were changed before it was approved, by another backend user, not the person you are talking to; it ran with these arguments instead of the ones you proposed: {\"title\": \"Q3 plan\", \"tags\": [\"a\"]}",
            ),
            (
                DecidedBy::Unknown,
                "Note: approval_edited (decided_by: unknown). The arguments of this call were changed before it was approved, by the human reviewer; it ran with these arguments instead of the ones you proposed: {\"title\": \"Q3 plan\", \"tags\": [\"a\"]}",
            ),
        ];
        for (decided_by, expected) in table {
            assert_eq!(edit_note(decided_by, arguments), expected, "{decided_by:?}");
        }
    }

    #[test]
    fn an_edited_result_is_the_note_a_blank_line_and_the_result_as_it_was() {
        let ran = executed("c", TOOL, "saved".into(), false);
        let edited = with_edit_note(ran.clone(), DecidedBy::OtherUser, "{}");
        assert_eq!(
            edited.content,
            format!("{}\n\nsaved", edit_note(DecidedBy::OtherUser, "{}"))
        );
        assert!(edited.edited);
        assert_eq!(
            (edited.outcome, edited.is_error),
            (ran.outcome, ran.is_error)
        );
        let failed = with_edit_note(failed("c", TOOL), DecidedBy::RunOwner, "{}");
        assert!(
            failed
                .content
                .ends_with("\n\nError: tool \"update_page_metadata\" failed.")
        );
        assert_eq!((failed.outcome, failed.is_error), (Outcome::Failed, true));
    }

    #[test]
    fn the_expired_text_reads_exactly_as_the_design_says() {
        let result = expired("call_1", TOOL);
        assert_eq!(
            result.content,
            "Error: approval_expired. No one decided on the approval for tool \"update_page_metadata\" before it expired. Nothing was executed. Tell the user that the approval request expired without a decision, not that anyone declined it, and ask whether the change should be proposed again."
        );
        assert_eq!(
            (result.outcome, result.is_error, result.edited),
            (Outcome::Expired, true, false)
        );
        assert!(!result.content.contains("decided_by"));
        assert!(!result.content.contains(APPROVAL_DENIED));
    }

    #[test]
    fn a_reason_is_not_rendered_on_a_read_tool() {
        for reason in [DenialReason::Variant, DenialReason::Skip] {
            assert_eq!(
                denial_text(TOOL, Effect::Read, DecidedBy::RunOwner, Some(reason)),
                denial_text(TOOL, Effect::Read, DecidedBy::RunOwner, None)
            );
        }
    }

    #[test]
    fn a_denied_result_is_an_error_with_the_denied_outcome() {
        let result = denied("call_1", TOOL, Effect::Read, DecidedBy::Unknown, None);
        assert!(result.is_error);
        assert_eq!(result.outcome, Outcome::Denied);
        assert!(
            result
                .content
                .starts_with("Error: approval_denied (decided_by: unknown).")
        );
    }

    #[test]
    fn the_other_results_read_exactly_as_the_design_says() {
        assert_eq!(
            not_permitted("c", "x").content,
            "Error: tool \"x\" is no longer permitted and was not executed."
        );
        assert_eq!(failed("c", "x").content, "Error: tool \"x\" failed.");
        assert_eq!(
            interrupted("c", "x").content,
            "Error: tool \"x\" was interrupted; whether it took effect is unknown."
        );
        for result in [
            not_permitted("c", "x"),
            failed("c", "x"),
            interrupted("c", "x"),
        ] {
            assert!(result.is_error);
        }
    }

    #[test]
    fn an_executor_answer_passes_through_with_its_error_flag() {
        let ok = executed("c", "x", "done".into(), false);
        assert_eq!(
            (ok.outcome, ok.is_error, ok.content.as_str()),
            (Outcome::Ok, false, "done")
        );
        let refused = executed("c", "x", "no such page".into(), true);
        assert_eq!((refused.outcome, refused.is_error), (Outcome::Failed, true));
    }
}

#[cfg(test)]
mod properties {
    use proptest::prelude::*;

    use super::*;

    fn any_decided_by() -> impl Strategy<Value = DecidedBy> {
        prop_oneof![
            Just(DecidedBy::RunOwner),
            Just(DecidedBy::OtherUser),
            Just(DecidedBy::Unknown)
        ]
    }

    fn any_reason() -> impl Strategy<Value = Option<DenialReason>> {
        prop_oneof![
            Just(None),
            Just(Some(DenialReason::Variant)),
            Just(Some(DenialReason::Skip))
        ]
    }

    proptest! {
        /// Whatever the tool is called, the text is the fixed words around it: replacing the name by a fixed one
        /// gives exactly the text for that fixed name, so nothing else of the input can have slipped in.
        #[test]
        fn a_denial_text_holds_nothing_but_fixed_words_and_the_tool_name(
            tool in "[A-Za-z0-9_.-]{1,128}",
            write in any::<bool>(),
            decided_by in any_decided_by(),
            reason in any_reason(),
        ) {
            let effect = if write { Effect::Write } else { Effect::Read };
            let text = denial_text(&tool, effect, decided_by, reason);
            let quoted = format!("\"{tool}\"");
            prop_assert_eq!(text.matches(&quoted).count(), 1);
            prop_assert_eq!(
                text.replacen(&quoted, "\"TOOL\"", 1),
                denial_text("TOOL", effect, decided_by, reason)
            );
            prop_assert!(text.starts_with("Error: approval_denied (decided_by: "));
        }
    }
}
