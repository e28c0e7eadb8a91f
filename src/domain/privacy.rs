//! The privacy filter for stored tool events (docs/design.md §6, ADR-064).
//!
//! Approval events are always stored whole; this module decides what of a tool result survives into its tool event.

use super::redact::redact;
use super::results::ToolResult;
use super::vocabulary::{DecidedBy, Outcome, PrivacyLevel};

/// The tool event of one call, as it is to be stored: metadata always, payloads only where the level allows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolEvent {
    pub call_id: String,
    pub tool: String,
    pub outcome: Outcome,
    pub is_error: bool,
    pub decided_by: DecidedBy,
    pub privacy_level: PrivacyLevel,
    /// Lengths in bytes of what the model produced and what the tool answered, kept at every level but `none`.
    pub arguments_bytes: i32,
    pub result_bytes: i32,
    pub arguments: Option<String>,
    pub result: Option<String>,
}

/// Filters one call's arguments and result by `level`; `None` at level `none`, where no tool event is stored.
pub fn tool_event(
    level: PrivacyLevel,
    arguments: &str,
    result: &ToolResult,
    decided_by: DecidedBy,
) -> Option<ToolEvent> {
    let (arguments_kept, result_kept) = match level {
        PrivacyLevel::None => return None,
        PrivacyLevel::Metadata => (None, None),
        PrivacyLevel::Redacted => (Some(redact(arguments)), Some(redact(&result.content))),
        PrivacyLevel::Full => (Some(arguments.to_owned()), Some(result.content.clone())),
    };
    Some(ToolEvent {
        call_id: result.call_id.clone(),
        tool: result.tool.clone(),
        outcome: result.outcome,
        is_error: result.is_error,
        decided_by,
        privacy_level: level,
        arguments_bytes: saturating_len(arguments),
        result_bytes: saturating_len(&result.content),
        arguments: arguments_kept,
        result: result_kept,
    })
}

fn saturating_len(text: &str) -> i32 {
    i32::try_from(text.len()).unwrap_or(i32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::results;

    const SECRET_ARGS: &str =
        r#"{"api_key":"sk-abcdefghijklmnopqrstuvwxyz0123456789","to":"ann@example.com"}"#;

    fn ok_result() -> ToolResult {
        results::executed("c1", "send_mail", "sent to ann@example.com".into(), false)
    }

    #[test]
    fn level_none_stores_no_tool_event() {
        assert_eq!(
            tool_event(
                PrivacyLevel::None,
                SECRET_ARGS,
                &ok_result(),
                DecidedBy::RunOwner
            ),
            None
        );
    }

    #[test]
    fn level_metadata_keeps_names_outcome_and_lengths_but_no_payload() {
        let event = tool_event(
            PrivacyLevel::Metadata,
            SECRET_ARGS,
            &ok_result(),
            DecidedBy::OtherUser,
        )
        .unwrap();
        assert_eq!(event.tool, "send_mail");
        assert_eq!(event.outcome, Outcome::Ok);
        assert_eq!(event.decided_by, DecidedBy::OtherUser);
        assert_eq!(event.arguments_bytes as usize, SECRET_ARGS.len());
        assert_eq!(event.result_bytes as usize, "sent to ann@example.com".len());
        assert_eq!((event.arguments, event.result), (None, None));
    }

    #[test]
    fn level_redacted_keeps_payloads_with_secrets_masked() {
        let event = tool_event(
            PrivacyLevel::Redacted,
            SECRET_ARGS,
            &ok_result(),
            DecidedBy::RunOwner,
        )
        .unwrap();
        let arguments = event.arguments.unwrap();
        assert!(
            !arguments.contains("sk-abcdefghijklmnopqrstuvwxyz0123456789"),
            "{arguments}"
        );
        assert!(!arguments.contains("ann@example.com"), "{arguments}");
        assert!(!event.result.unwrap().contains("ann@example.com"));
    }

    #[test]
    fn level_full_keeps_payloads_verbatim() {
        let event = tool_event(
            PrivacyLevel::Full,
            SECRET_ARGS,
            &ok_result(),
            DecidedBy::Unknown,
        )
        .unwrap();
        assert_eq!(event.arguments.as_deref(), Some(SECRET_ARGS));
        assert_eq!(event.result.as_deref(), Some("sent to ann@example.com"));
    }
}
