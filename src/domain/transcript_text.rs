//! The stored transcript as JSON text: the array of OpenAI-chat messages exactly as the service wrote it, kept as
//! bytes that an answer splices in as they are, never parsed and written again.
//!
//! A decision's answer is mostly the transcript it read. Parsing that text into a tree of `Value`s only to
//! serialize the tree again cost most of a deny's CPU and memory (BENCHMARKS.md, "Cost per decision"), so the text
//! travels from the database row to the response body untouched: [`TranscriptText::messages`] is a slice of the
//! very buffer the row was read into, and cloning it shares that buffer. Only what needs the messages themselves
//! (the `anthropic` and `openai-responses` formats, a new turn's checks) parses them, with [`TranscriptText::values`].
//!
//! The text is the list the loop registered, as it sent it (docs/design.md §14: member order, number forms, unknown
//! members kept), then what the service appended. A run in a provider's own format also keeps that format's system
//! member as its own text ([`TranscriptText::system`]). Text written by Postgres's `jsonb` before migration 0008 is
//! brought once to the form earlier answers had, `serde_json::to_string` of the messages, when it is read
//! ([`TranscriptText::from_stored`]).

use std::borrow::Cow;

use bytes::Bytes;
use serde::Deserialize;
use serde_json::Value;
use serde_json::value::RawValue;

use super::model_format::{ModelInputFormat, NotATranscript};

/// The JSON text of a transcript (`[message, …]`), shared rather than copied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TranscriptText {
    /// The whole array, brackets included.
    text: Bytes,
    /// The format the run was registered in; the list is that format's (`messages`, `input`, `contents`).
    format: ModelInputFormat,
    /// The format's system member (`system`, `instructions`, `system_instruction`) as the loop sent it, if it did.
    system: Option<Bytes>,
}

impl TranscriptText {
    /// The canonical text of `messages`, as it is stored.
    pub fn canonical(messages: &[Value]) -> String {
        // Serializing a slice of `Value`s cannot fail: every key is a string and no number is NaN.
        serde_json::to_string(messages).expect("a JSON value always serializes")
    }

    /// The transcript of a stored text. `reformat` says the text is not in the canonical form (a transcript written
    /// by `jsonb`): it is parsed and written again, once, so that every answer renders it the same way. Otherwise
    /// only its outline is checked, an array: the text is the service's own (and a sealed one is authenticated), and
    /// checking every message would cost a scan of the whole text per read, which is what splicing saves.
    /// `text` is UTF-8: a `String`'s bytes, or a Postgres text value's (`storage::row_text`).
    pub fn from_stored(text: Bytes, reformat: bool) -> Result<Self, NotATranscript> {
        if reformat {
            let messages: Vec<Value> =
                serde_json::from_slice(&text).map_err(|error| NotATranscript(error.to_string()))?;
            return Ok(Self::of(&messages));
        }
        if !(text.len() >= 2 && text.starts_with(b"[") && text.ends_with(b"]")) {
            return Err(NotATranscript(format!(
                "{} bytes that are not an array",
                text.len()
            )));
        }
        Ok(TranscriptText {
            text,
            format: ModelInputFormat::OpenAiChat,
            system: None,
        })
    }

    /// The same transcript, of a run registered in `format`, with that format's system member's text.
    pub fn in_format(self, format: ModelInputFormat, system: Option<Bytes>) -> Self {
        TranscriptText {
            format,
            system,
            ..self
        }
    }

    /// The transcript of messages the service holds as values (a test, a transcript read from `jsonb`).
    pub fn of(messages: &[Value]) -> Self {
        TranscriptText {
            text: Bytes::from(Self::canonical(messages)),
            format: ModelInputFormat::OpenAiChat,
            system: None,
        }
    }

    /// The transcript a loop registered: its list's text (an array) and its system member's, as they came.
    pub fn registered(
        format: ModelInputFormat,
        list: &RawValue,
        system: Option<&RawValue>,
    ) -> Result<Self, NotATranscript> {
        let transcript = Self::from_stored(Bytes::copy_from_slice(list.get().as_bytes()), false)?;
        let system = system.map(|system| Bytes::copy_from_slice(system.get().as_bytes()));
        Ok(transcript.in_format(format, system))
    }

    /// The format the run was registered in.
    pub fn format(&self) -> ModelInputFormat {
        self.format
    }

    /// The text of the format's system member, if the loop sent one.
    pub fn system(&self) -> Option<&Bytes> {
        self.system.as_ref()
    }

    /// The system member's text as a string.
    pub fn system_str(&self) -> Option<&str> {
        // Made only from UTF-8, as the list.
        self.system
            .as_ref()
            .map(|system| std::str::from_utf8(system).expect("a transcript's text is UTF-8"))
    }

    /// The messages, comma-separated, without the array's brackets: what goes between `[` and `]` in an answer.
    pub fn messages(&self) -> Bytes {
        self.text.slice(1..self.text.len() - 1)
    }

    /// The whole array's text.
    pub fn as_str(&self) -> &str {
        // Made only from UTF-8 (`from_stored`'s rule, `String`s) and slices of it at element boundaries.
        std::str::from_utf8(&self.text).expect("a transcript's text is UTF-8")
    }

    /// The same text in a buffer of its own, letting go of whatever the shared one keeps alive (a row read with it,
    /// `storage::row_text`).
    pub fn copied(&self) -> Self {
        TranscriptText {
            text: Bytes::copy_from_slice(&self.text),
            format: self.format,
            system: self
                .system
                .as_ref()
                .map(|system| Bytes::copy_from_slice(system)),
        }
    }

    /// The length of the whole text in bytes.
    pub fn text_len(&self) -> usize {
        self.text.len()
    }

    /// Whether the transcript holds no message.
    pub fn is_empty(&self) -> bool {
        self.messages().iter().all(u8::is_ascii_whitespace)
    }

    /// The messages as a tree, for what needs to look inside them.
    pub fn values(&self) -> Result<Vec<Value>, NotATranscript> {
        serde_json::from_slice(&self.text).map_err(|error| NotATranscript(error.to_string()))
    }

    /// The canonical text of this transcript with `more` messages after it.
    pub fn appended(&self, more: &[Value]) -> String {
        self.appended_text(&Self::canonical(more))
    }

    /// The text of this transcript's list with the entries of `more`, the text of a JSON array, after it.
    pub fn appended_text(&self, more: &str) -> String {
        let mut text = String::with_capacity(self.text.len() + more.len());
        text.push_str(&self.as_str()[..self.text.len() - 1]);
        if !self.is_empty() && more.len() > 2 {
            text.push(',');
        }
        text.push_str(&more[1..]);
        text
    }

    /// Cuts the list back to what it was when it was `length` bytes long (docs/design.md §14: a native transcript is
    /// never parsed to find a turn). `length` is recorded when the next turn is appended: the append put a comma where
    /// the list's closing bracket was, so the bracket goes back there.
    pub fn cut_at(&mut self, length: usize) -> Result<(), NotATranscript> {
        if length >= self.text.len() {
            return Ok(());
        }
        if length < 2 || self.text[length - 1] != b',' {
            return Err(NotATranscript(format!(
                "{length} bytes do not end an entry of the list"
            )));
        }
        let mut text = Vec::with_capacity(length + 1);
        text.extend_from_slice(&self.text[..length - 1]);
        text.push(b']');
        self.text = Bytes::from(text);
        Ok(())
    }

    /// Cuts the transcript back to the last assistant message that holds the call `call_id`, dropping whatever
    /// later turns appended after it; unchanged when no message holds it.
    pub fn truncate_to_call(&mut self, call_id: &str) -> Result<(), NotATranscript> {
        let raw = self.raw_messages()?;
        let mut cut = None;
        for message in raw.iter().rev() {
            let calls: ToolCalls = serde_json::from_str(message.get())
                .map_err(|error| NotATranscript(error.to_string()))?;
            if calls.holds(call_id) {
                cut = Some(self.end_of(message));
                break;
            }
        }
        if let Some(end) = cut
            && end + 1 < self.text.len()
        {
            let mut text = Vec::with_capacity(end + 1);
            text.extend_from_slice(&self.text[..end]);
            text.push(b']');
            self.text = Bytes::from(text);
        }
        Ok(())
    }

    /// Each message's own text, borrowed from the stored one; nothing inside a message is parsed.
    fn raw_messages(&self) -> Result<Vec<&RawValue>, NotATranscript> {
        serde_json::from_slice(&self.text).map_err(|error| NotATranscript(error.to_string()))
    }

    /// The offset just past `message`, a slice of this transcript's text.
    fn end_of(&self, message: &RawValue) -> usize {
        let start = message.get().as_ptr() as usize - self.text.as_ptr() as usize;
        start + message.get().len()
    }
}

/// The only part of a message [`TranscriptText::truncate_to_call`] reads; serde skips the rest unparsed.
#[derive(Deserialize)]
struct ToolCalls<'a> {
    #[serde(default, borrow)]
    tool_calls: Option<Vec<CallId<'a>>>,
}

#[derive(Deserialize)]
struct CallId<'a> {
    #[serde(default, borrow)]
    id: Option<Cow<'a, str>>,
}

impl ToolCalls<'_> {
    fn holds(&self, call_id: &str) -> bool {
        self.tool_calls
            .iter()
            .flatten()
            .any(|call| call.id.as_deref() == Some(call_id))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_copied_transcript_has_the_same_text_in_a_buffer_of_its_own() {
        let shared = TranscriptText::of(&turn("c1"));
        let copied = shared.copied();
        assert_eq!(copied, shared);
        assert_eq!(copied.as_str(), shared.as_str());
        assert_ne!(
            copied.as_str().as_ptr(),
            shared.as_str().as_ptr(),
            "the copy holds nothing of the buffer it was read from"
        );
    }

    fn turn(call_id: &str) -> Vec<Value> {
        vec![
            json!({"role": "user", "content": "hi"}),
            json!({"role": "assistant", "content": null, "tool_calls": [
                {"id": call_id, "type": "function", "function": {"name": "x", "arguments": "{}"}}
            ]}),
        ]
    }

    #[test]
    fn the_messages_are_the_canonical_text_without_its_brackets() {
        let messages = turn("c1");
        let transcript = TranscriptText::of(&messages);
        let canonical = serde_json::to_string(&messages).unwrap();
        assert_eq!(
            transcript.messages(),
            &canonical.as_bytes()[1..canonical.len() - 1]
        );
        assert_eq!(transcript.values().unwrap(), messages);
    }

    #[test]
    fn a_jsonb_text_is_brought_to_the_canonical_form_when_marked() {
        let messages = turn("c1");
        let spaced = r#"[{"role": "user", "content": "hi"}, {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "x", "arguments": "{}"}}]}]"#;
        let read = TranscriptText::from_stored(Bytes::from(spaced.to_owned()), true).unwrap();
        assert_eq!(read, TranscriptText::of(&messages));
        let unmarked = TranscriptText::from_stored(Bytes::from(spaced.to_owned()), false).unwrap();
        assert_ne!(unmarked, read, "an unmarked text is kept byte for byte");
    }

    #[test]
    fn a_stored_text_that_is_not_an_array_is_refused() {
        for text in ["{}", "[{}", "\"x\"", "]", ""] {
            assert!(
                TranscriptText::from_stored(Bytes::from(text.to_owned()), false).is_err(),
                "{text}"
            );
        }
    }

    #[test]
    fn appending_gives_the_canonical_text_of_all_the_messages() {
        let first = turn("c1");
        let more = vec![
            json!({"role": "tool", "tool_call_id": "c1", "content": "done"}),
            json!({"role": "user", "content": "and then?"}),
        ];
        let appended = TranscriptText::of(&first).appended(&more);
        let all: Vec<Value> = first.into_iter().chain(more).collect();
        assert_eq!(appended, TranscriptText::canonical(&all));
    }

    #[test]
    fn truncating_keeps_the_messages_through_the_call_and_drops_later_turns() {
        let first = turn("c1");
        let mut all = first.clone();
        all.push(json!({"role": "tool", "tool_call_id": "c1", "content": "done"}));
        all.extend(turn("c2"));
        let mut transcript = TranscriptText::of(&all);
        transcript.truncate_to_call("c1").unwrap();
        assert_eq!(transcript, TranscriptText::of(&first));

        let mut latest = TranscriptText::of(&all);
        latest.truncate_to_call("c2").unwrap();
        assert_eq!(
            latest,
            TranscriptText::of(&all),
            "the last turn is kept whole"
        );

        let mut unknown = TranscriptText::of(&all);
        unknown.truncate_to_call("nope").unwrap();
        assert_eq!(unknown, TranscriptText::of(&all));
    }

    #[test]
    fn an_escaped_call_id_is_found_too() {
        let messages = turn("c\"1");
        let mut all = messages.clone();
        all.extend(turn("c2"));
        let mut transcript = TranscriptText::of(&all);
        transcript.truncate_to_call("c\"1").unwrap();
        assert_eq!(transcript, TranscriptText::of(&messages));
    }
}
