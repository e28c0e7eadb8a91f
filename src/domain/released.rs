//! Calls released to the worker (docs/design.md §15): how a released call is shown (`released_calls`), and the result a
//! worker posts for one as it is stored and compared with one stored before. An edited call's stored result is the
//! edit note (§3), a blank line, then the worker's content, as for any edited call; what is shown back, and what a
//! post is compared with, is the worker's own content.

use super::results::{self, ToolResult};
use super::vocabulary::DecidedBy;

/// A released call, whole. Not serializable: every answer shows it through `http::views::ReleasedCallView`, built with
/// its reader's audience (`domain::token_view`), so no answer can show it unfiltered by accident.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReleasedCall {
    pub call_id: String,
    pub tool: String,
    /// The arguments to run: the edited ones where a decider edited them. What a reader is shown of them is the
    /// reader's audience's to say (`domain::token_view`, `http::views::ReleasedCallView`).
    pub arguments: Option<String>,
    pub edited: bool,
    /// Absent until the worker posted it.
    pub result: Option<PostedContent>,
}

/// A worker's result of one call: its content and whether it is an error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PostedContent {
    pub content: String,
    pub is_error: bool,
}

/// A released call's result as stored: `executed`'s (`ok`, or `failed` for an error), the content made storable, and
/// for an edited call (`edit`: who decided and the edited arguments) the edit note before it.
pub fn stored_result(
    call_id: &str,
    tool: &str,
    posted: &PostedContent,
    edit: Option<(DecidedBy, &str)>,
) -> ToolResult {
    let result = results::executed(call_id, tool, storable(&posted.content), posted.is_error);
    match edit {
        Some((decided_by, arguments)) => results::with_edit_note(result, decided_by, arguments),
        None => result,
    }
}

/// The worker's content of a stored result: the stored content without the edit note an edited call's carries.
pub fn posted_content<'a>(stored: &'a str, edit: Option<(DecidedBy, &str)>) -> &'a str {
    match edit {
        Some((decided_by, arguments)) => {
            let note = results::edit_note(decided_by, arguments);
            stored
                .strip_prefix(note.as_str())
                .and_then(|rest| rest.strip_prefix("\n\n"))
                .unwrap_or(stored)
        }
        None => stored,
    }
}

/// Postgres stores no NUL character in text: it is replaced, as in an executor's content.
fn storable(content: &str) -> String {
    content.replace('\0', "\u{FFFD}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::vocabulary::Outcome;

    fn posted(content: &str, is_error: bool) -> PostedContent {
        PostedContent {
            content: content.into(),
            is_error,
        }
    }

    #[test]
    fn a_worker_result_is_ok_or_failed_by_its_error_flag() {
        let ok = stored_result("c1", "save", &posted("done", false), None);
        assert_eq!(
            (ok.outcome, ok.is_error, ok.content.as_str()),
            (Outcome::Ok, false, "done")
        );
        let failed = stored_result("c1", "save", &posted("no disk", true), None);
        assert_eq!((failed.outcome, failed.is_error), (Outcome::Failed, true));
        assert!(!failed.edited);
    }

    #[test]
    fn an_edited_call_stores_the_edit_note_before_the_content_and_shows_the_content_alone() {
        let edit = Some((DecidedBy::RunOwner, r#"{"title": "y"}"#));
        let stored = stored_result("c1", "save", &posted("saved", false), edit);
        assert!(stored.edited);
        assert_eq!(
            stored.content,
            format!(
                "{}\n\nsaved",
                results::edit_note(DecidedBy::RunOwner, r#"{"title": "y"}"#)
            )
        );
        assert_eq!(posted_content(&stored.content, edit), "saved");
        assert_eq!(posted_content("saved", None), "saved");
    }

    #[test]
    fn a_nul_character_is_stored_replaced() {
        let stored = stored_result("c1", "save", &posted("a\0b", false), None);
        assert_eq!(stored.content, "a\u{FFFD}b");
    }
}
