//! What a reader's answers show of a run's payloads (docs/design.md §6, §13, §17): the one filter every read of a run
//! goes through. An API key's client sees its tenant's runs whole. A decision token is held by a browser, so it sees
//! a run as the inbox shows it, filtered by the run's privacy level: payloads verbatim at `full`, redacted at
//! `redacted` (exactly as the model input's texts are), and none at `metadata` or `none`.
//!
//! Payloads are the call's arguments (the model's and a decider's edits), what a tool or a worker answered, and the
//! transcript. The texts this service writes from fixed words (a denial, an expiry, an interruption, a tool no
//! longer permitted) carry none, and stay at every level; an edited call's result quotes the edited arguments in
//! its note, so it is a payload.

use serde_json::Value;

use super::redact::redact;
use super::results::ToolResult;
use super::vocabulary::{Outcome, PrivacyLevel};

/// Which credential reads a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reader {
    /// An API key of the run's tenant.
    Key,
    /// A decision token of a user who may decide the run.
    Token,
}

/// What one reader may see of one run's payloads. Built only from the reader and the run's level, so that every
/// answer that shows a payload asks it first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Audience {
    /// The level payloads are shown at: `full` for a key, the run's level for a token.
    shows: PrivacyLevel,
}

impl Audience {
    /// An API key's audience: every payload whole.
    pub const KEY: Audience = Audience {
        shows: PrivacyLevel::Full,
    };

    /// The audience of `reader` on a run whose privacy level (the stricter of the service's and the run's) is `level`.
    pub fn of(reader: Reader, level: PrivacyLevel) -> Audience {
        match reader {
            Reader::Key => Audience::KEY,
            Reader::Token => Audience { shows: level },
        }
    }

    /// Whether payloads are shown whole: the stored text may then be answered as it is, never parsed again.
    pub fn sees_whole(self) -> bool {
        self.shows == PrivacyLevel::Full
    }

    /// Whether a call's arguments are shown at all (whole or redacted): at `redacted` and above, and to a key.
    pub fn sees_arguments(self) -> bool {
        matches!(self.shows, PrivacyLevel::Full | PrivacyLevel::Redacted)
    }

    /// Whether the transcript (the model input) is shown at all.
    pub fn sees_transcript(self) -> bool {
        matches!(self.shows, PrivacyLevel::Full | PrivacyLevel::Redacted)
    }

    /// A payload text (arguments, edited arguments, a tool's or a worker's output) as shown: `None` where the level
    /// shows no payload.
    pub fn payload(self, text: &str) -> Option<String> {
        match self.shows {
            PrivacyLevel::Full => Some(text.to_owned()),
            PrivacyLevel::Redacted => Some(redact(text)),
            PrivacyLevel::Metadata | PrivacyLevel::None => None,
        }
    }

    /// A call's result as shown: a payload where it holds one (a tool's or worker's answer, an edit note), and the
    /// fixed words of the other results at every level.
    pub fn result_content(self, result: &ToolResult) -> Option<String> {
        if holds_payload(result) {
            self.payload(&result.content)
        } else {
            Some(result.content.clone())
        }
    }

    /// A model input (any format) as shown: whole at `full`; every string in it redacted at `redacted` (the texts
    /// of messages, arguments and results alike; names and ids have no secret shape and pass unchanged); `None`
    /// where the level shows no payload.
    pub fn model_input(self, mut model_input: Value) -> Option<Value> {
        match self.shows {
            PrivacyLevel::Full => Some(model_input),
            PrivacyLevel::Redacted => {
                redact_strings(&mut model_input);
                Some(model_input)
            }
            PrivacyLevel::Metadata | PrivacyLevel::None => None,
        }
    }
}

/// Whether a result's content holds something other than this service's fixed words: what an executor or a worker
/// answered (`ok`, and `failed`, whose text may be the tool's own error), or an edit note quoting arguments.
fn holds_payload(result: &ToolResult) -> bool {
    result.edited || matches!(result.outcome, Outcome::Ok | Outcome::Failed)
}

/// Redacts every string of a JSON value in place. A loop over a stack, not recursion: a transcript nests only as
/// deep as the service let it in, but nothing here should depend on that.
fn redact_strings(value: &mut Value) {
    let mut stack = vec![value];
    while let Some(value) = stack.pop() {
        match value {
            Value::String(text) => *text = redact(text),
            Value::Array(items) => stack.extend(items.iter_mut()),
            Value::Object(members) => stack.extend(members.values_mut()),
            Value::Null | Value::Bool(_) | Value::Number(_) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::results;
    use crate::domain::vocabulary::{DecidedBy, Effect};
    use serde_json::json;

    const SECRET: &str =
        r#"{"api_key":"sk-abcdefghijklmnopqrstuvwxyz0123456789","to":"ann@example.com"}"#;

    fn token(level: PrivacyLevel) -> Audience {
        Audience::of(Reader::Token, level)
    }

    #[test]
    fn a_token_sees_payloads_verbatim_at_full_redacted_at_redacted_and_none_below() {
        assert_eq!(
            token(PrivacyLevel::Full).payload(SECRET).as_deref(),
            Some(SECRET)
        );
        let redacted = token(PrivacyLevel::Redacted).payload(SECRET).unwrap();
        assert_eq!(redacted, redact(SECRET));
        assert!(!redacted.contains("sk-abcdefghij"), "{redacted}");
        assert!(!redacted.contains("ann@example.com"), "{redacted}");
        assert_eq!(token(PrivacyLevel::Metadata).payload(SECRET), None);
        assert_eq!(token(PrivacyLevel::None).payload(SECRET), None);
    }

    #[test]
    fn a_key_sees_every_payload_whole_whatever_the_runs_level() {
        for level in [
            PrivacyLevel::None,
            PrivacyLevel::Metadata,
            PrivacyLevel::Redacted,
            PrivacyLevel::Full,
        ] {
            let key = Audience::of(Reader::Key, level);
            assert!(key.sees_whole() && key.sees_transcript());
            assert_eq!(key.payload(SECRET).as_deref(), Some(SECRET));
        }
    }

    #[test]
    fn below_redacted_a_token_sees_the_fixed_texts_of_results_but_no_answer_of_a_tool_or_edit_note()
    {
        let denied = results::denied("c1", "save", Effect::Write, DecidedBy::RunOwner, None);
        let expired = results::expired("c2", "save");
        let interrupted = results::interrupted("c3", "save");
        let ran = results::executed("c4", "save", SECRET.into(), false);
        let failed = results::executed("c5", "save", SECRET.into(), true);
        let edited = results::with_edit_note(
            results::not_permitted("c6", "save"),
            DecidedBy::RunOwner,
            SECRET,
        );
        for level in [PrivacyLevel::Metadata, PrivacyLevel::None] {
            let audience = token(level);
            for fixed in [&denied, &expired, &interrupted] {
                assert_eq!(
                    audience.result_content(fixed).as_deref(),
                    Some(fixed.content.as_str())
                );
            }
            for payload in [&ran, &failed, &edited] {
                assert_eq!(audience.result_content(payload), None, "{payload:?}");
            }
        }
        let redacted = token(PrivacyLevel::Redacted);
        assert_eq!(
            redacted.result_content(&edited),
            Some(redact(&edited.content))
        );
        assert_eq!(
            token(PrivacyLevel::Full).result_content(&ran).as_deref(),
            Some(SECRET)
        );
    }

    #[test]
    fn a_redacted_model_input_keeps_its_shape_and_masks_every_text_in_it() {
        let input = json!({"format": "openai-chat", "messages": [
            {"role": "user", "content": "mail ann@example.com"},
            {"role": "assistant", "tool_calls": [{"id": "call_1", "type": "function",
                "function": {"name": "send_mail", "arguments": SECRET}}]},
            {"role": "tool", "tool_call_id": "call_1", "content": [{"type": "text", "text": "sent to ann@example.com"}]},
        ]});
        let shown = token(PrivacyLevel::Redacted)
            .model_input(input.clone())
            .unwrap();
        let text = shown.to_string();
        assert!(!text.contains("ann@example.com"), "{text}");
        assert!(!text.contains("sk-abcdefghij"), "{text}");
        assert_eq!(shown["messages"][1]["tool_calls"][0]["id"], "call_1");
        assert_eq!(
            shown["messages"][1]["tool_calls"][0]["function"]["name"],
            "send_mail"
        );
        assert_eq!(shown["messages"][2]["role"], "tool");
        assert_eq!(
            token(PrivacyLevel::Full).model_input(input.clone()),
            Some(input.clone())
        );
        assert_eq!(
            token(PrivacyLevel::Metadata).model_input(input.clone()),
            None
        );
        assert_eq!(token(PrivacyLevel::None).model_input(input), None);
    }
}
