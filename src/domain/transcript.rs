//! Validation of a registered transcript and the pending calls of its last assistant turn, with the turn digest.
//!
//! Messages are OpenAI chat messages. Only the parts this service relies on are checked (roles, tool calls,
//! tool-call ids); anything else a provider adds to a message is kept as it came, so the model input round-trips.

use std::collections::HashSet;
use std::sync::LazyLock;

use regex::Regex;
use serde_json::Value;
use sha2::{Digest, Sha256};

/// The rule for tool names (docs/design.md §3): MCP's, which holds the model providers' narrower
/// `^[A-Za-z0-9_-]{1,64}$` and the gate's `{server}.{tool}`. Registration refuses any other name, so texts never need
/// escaping; a name outside the providers' rule is refused only where it would be written in a provider's format
/// other than the run's own (`provider_names`).
pub const TOOL_NAME_RULE: &str = "^[A-Za-z0-9_.-]{1,128}$";

static TOOL_NAME: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(TOOL_NAME_RULE).expect("the tool-name pattern compiles"));

/// The longest tool-call id accepted; providers use a few dozen characters.
pub const MAX_CALL_ID_LEN: usize = 256;

const ROLES: [&str; 5] = ["system", "developer", "user", "assistant", "tool"];

/// One tool call of the turn that waits for approval.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingCall {
    pub id: String,
    pub name: String,
    /// The JSON text the model produced, kept byte for byte: the digest is over this string.
    pub arguments: String,
}

/// Why a transcript was refused; the text is shown to the client as the problem's detail.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TranscriptError {
    #[error("messages must not be empty")]
    Empty,
    #[error("message {index}: {problem}")]
    Message { index: usize, problem: String },
    #[error(
        "the last message must be an assistant message with at least one tool call: it is the turn that waits for approval"
    )]
    NoPendingTurn,
    #[error("tool call id {0:?} is used more than once in this run")]
    DuplicateCallId(String),
}

/// Whether a call id holds only characters that pass unchanged in the executor's `Idempotency-Key` header: no
/// control character (U+0000 to U+001F, U+007F to U+009F), which no header value may hold, and no space, which a
/// receiver trims from the end of a header value. The spec's pattern is `^[^\x00-\x20\x7F-\x9F]+$`.
pub fn is_valid_call_id(id: &str) -> bool {
    !id.chars().any(|c| c.is_control() || c == ' ')
}

/// Returns true when a tool name matches [`TOOL_NAME_RULE`], `^[A-Za-z0-9_.-]{1,128}$`.
pub fn is_valid_tool_name(name: &str) -> bool {
    TOOL_NAME.is_match(name)
}

/// Checks every message and returns the pending calls of the last one.
///
/// `earlier_call_ids` are the ids already used in this run (earlier turns), which a new turn may not reuse:
/// the model input would otherwise pair a result with the wrong call.
pub fn validate(
    messages: &[Value],
    earlier_call_ids: &HashSet<String>,
) -> Result<Vec<PendingCall>, TranscriptError> {
    if messages.is_empty() {
        return Err(TranscriptError::Empty);
    }
    let mut seen: HashSet<String> = HashSet::new();
    let mut last_calls = Vec::new();
    for (index, message) in messages.iter().enumerate() {
        let calls = check_message(message)
            .map_err(|problem| TranscriptError::Message { index, problem })?;
        for call in &calls {
            if earlier_call_ids.contains(&call.id) || !seen.insert(call.id.clone()) {
                return Err(TranscriptError::DuplicateCallId(call.id.clone()));
            }
        }
        last_calls = calls;
    }
    let last = &messages[messages.len() - 1];
    if role_of(last) != Some("assistant") || last_calls.is_empty() {
        return Err(TranscriptError::NoPendingTurn);
    }
    Ok(last_calls)
}

/// Every tool-call id used anywhere in a transcript.
pub fn call_ids(messages: &[Value]) -> HashSet<String> {
    messages
        .iter()
        .filter_map(|message| message.get("tool_calls").and_then(Value::as_array))
        .flatten()
        .filter_map(|call| call.get("id").and_then(Value::as_str))
        .map(str::to_owned)
        .collect()
}

/// Lowercase hex SHA-256 of the canonical JSON of `[{"arguments", "id", "name"}, …]` (docs/design.md §2).
///
/// The canonical text is written field by field in sorted order rather than through a map, so it does not depend
/// on how serde_json happens to order keys. Strings are escaped as serde_json does (UTF-8 kept, control
/// characters as `\u00XX`), which is RFC 8785's escaping.
pub fn turn_digest(calls: &[PendingCall]) -> String {
    let mut canonical = String::from("[");
    for (i, call) in calls.iter().enumerate() {
        if i > 0 {
            canonical.push(',');
        }
        canonical.push_str("{\"arguments\":");
        canonical.push_str(&json_string(&call.arguments));
        canonical.push_str(",\"id\":");
        canonical.push_str(&json_string(&call.id));
        canonical.push_str(",\"name\":");
        canonical.push_str(&json_string(&call.name));
        canonical.push('}');
    }
    canonical.push(']');
    hex::encode(Sha256::digest(canonical.as_bytes()))
}

/// Whether `text` has the form of a [`turn_digest`] (64 lowercase hex digits), whichever turn it may name.
pub fn is_turn_digest(text: &str) -> bool {
    text.len() == 64 && text.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

fn json_string(text: &str) -> String {
    serde_json::to_string(text).expect("a string always serializes")
}

fn role_of(message: &Value) -> Option<&str> {
    message.get("role").and_then(Value::as_str)
}

fn check_message(message: &Value) -> Result<Vec<PendingCall>, String> {
    let object = message.as_object().ok_or("must be a JSON object")?;
    if holds_nul(message) {
        return Err(
            "a text or member name holds the character U+0000, which cannot be stored".into(),
        );
    }
    let role = role_of(message).ok_or("must have a string \"role\"")?;
    if !ROLES.contains(&role) {
        return Err(format!(
            "role {role:?} is not one of system, developer, user, assistant, tool"
        ));
    }
    match role {
        "tool" => {
            let id = object.get("tool_call_id").and_then(Value::as_str);
            if id.is_none_or(str::is_empty) {
                return Err("a tool message needs a non-empty string \"tool_call_id\"".into());
            }
            Ok(Vec::new())
        }
        "assistant" => match object.get("tool_calls") {
            None | Some(Value::Null) => Ok(Vec::new()),
            Some(Value::Array(calls)) => calls
                .iter()
                .enumerate()
                .map(|(i, call)| {
                    check_tool_call(call).map_err(|problem| format!("tool_calls[{i}]: {problem}"))
                })
                .collect(),
            Some(_) => Err("\"tool_calls\" must be an array".into()),
        },
        _ if object.contains_key("tool_calls") => {
            Err(format!("a {role} message cannot have \"tool_calls\""))
        }
        _ => Ok(Vec::new()),
    }
}

/// Whether any string or member name in `value` holds U+0000: Postgres stores no such text, in `jsonb` or `text`.
/// The HTTP layer bounds the nesting of a body (127 levels), and with it this recursion.
fn holds_nul(value: &Value) -> bool {
    match value {
        Value::String(text) => text.contains('\0'),
        Value::Array(items) => items.iter().any(holds_nul),
        Value::Object(members) => members
            .iter()
            .any(|(name, member)| name.contains('\0') || holds_nul(member)),
        Value::Null | Value::Bool(_) | Value::Number(_) => false,
    }
}

fn check_tool_call(call: &Value) -> Result<PendingCall, String> {
    let id = call
        .get("id")
        .and_then(Value::as_str)
        .ok_or("needs a string \"id\"")?;
    // Characters, not bytes, as the spec's maxLength counts them.
    let length = id.chars().count();
    if length == 0 || length > MAX_CALL_ID_LEN {
        return Err(format!(
            "\"id\" must have 1 to {MAX_CALL_ID_LEN} characters"
        ));
    }
    if !is_valid_call_id(id) {
        return Err(
            "\"id\" must not hold a space or a control character (U+0000 to U+0020, U+007F to U+009F)".into(),
        );
    }
    if call.get("type").is_some_and(|kind| kind != "function") {
        return Err("\"type\" must be \"function\"".into());
    }
    let function = call.get("function").ok_or("needs a \"function\" object")?;
    let name = function
        .get("name")
        .and_then(Value::as_str)
        .ok_or("\"function.name\" must be a string")?;
    if !is_valid_tool_name(name) {
        return Err(format!("tool name {name:?} must match {TOOL_NAME_RULE}"));
    }
    let arguments = function
        .get("arguments")
        .and_then(Value::as_str)
        .ok_or("\"function.arguments\" must be a string holding a JSON object")?;
    match serde_json::from_str::<Value>(arguments) {
        Ok(Value::Object(_)) => {}
        _ => return Err("\"function.arguments\" must be a string holding a JSON object".into()),
    }
    Ok(PendingCall {
        id: id.to_owned(),
        name: name.to_owned(),
        arguments: arguments.to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn turn(calls: Value) -> Vec<Value> {
        vec![
            json!({"role": "user", "content": "set the meta description"}),
            json!({"role": "assistant", "content": null, "tool_calls": calls}),
        ]
    }

    #[test]
    fn only_64_lowercase_hex_digits_have_the_form_of_a_turn_digest() {
        let digest = turn_digest(&[]);
        assert!(is_turn_digest(&digest));
        for text in [
            "null",
            "",
            "abc",
            &digest[1..],
            &digest.to_uppercase(),
            &format!("{digest}0"),
        ] {
            assert!(!is_turn_digest(text), "{text:?}");
        }
    }

    fn call(id: &str, name: &str, arguments: &str) -> Value {
        json!({"id": id, "type": "function", "function": {"name": name, "arguments": arguments}})
    }

    #[test]
    fn the_digest_of_the_design_example_is_the_published_value() {
        let calls = vec![PendingCall {
            id: "call_1".into(),
            name: "x".into(),
            arguments: "{\"a\": 1}".into(),
        }];
        assert_eq!(
            turn_digest(&calls),
            "f3e51cfe10310ecf575b434e7e3f57607a4d5486849fcac084e7c86b27f8527b"
        );
    }

    #[test]
    fn the_digest_changes_when_the_arguments_change_by_one_byte() {
        let a = PendingCall {
            id: "c".into(),
            name: "x".into(),
            arguments: "{\"a\":1}".into(),
        };
        let b = PendingCall {
            arguments: "{\"a\":2}".into(),
            ..a.clone()
        };
        assert_ne!(turn_digest(&[a]), turn_digest(&[b]));
    }

    #[test]
    fn the_digest_depends_on_the_order_of_the_calls() {
        let a = PendingCall {
            id: "a".into(),
            name: "x".into(),
            arguments: "{}".into(),
        };
        let b = PendingCall {
            id: "b".into(),
            ..a.clone()
        };
        assert_ne!(turn_digest(&[a.clone(), b.clone()]), turn_digest(&[b, a]));
    }

    #[test]
    fn a_valid_turn_yields_its_calls_in_order() {
        let messages = turn(json!([
            call("c1", "read_page", "{}"),
            call("c2", "update_page", "{\"t\":1}")
        ]));
        let calls = validate(&messages, &HashSet::new()).unwrap();
        let ids: Vec<_> = calls.iter().map(|c| c.id.as_str()).collect();
        assert_eq!(ids, ["c1", "c2"]);
        assert_eq!(calls[1].arguments, "{\"t\":1}");
    }

    #[test]
    fn a_transcript_not_ending_in_tool_calls_is_refused() {
        let messages = vec![json!({"role": "user", "content": "hi"})];
        assert_eq!(
            validate(&messages, &HashSet::new()),
            Err(TranscriptError::NoPendingTurn)
        );
        let empty_calls = turn(json!([]));
        assert_eq!(
            validate(&empty_calls, &HashSet::new()),
            Err(TranscriptError::NoPendingTurn)
        );
    }

    #[test]
    fn an_empty_transcript_is_refused() {
        assert_eq!(validate(&[], &HashSet::new()), Err(TranscriptError::Empty));
    }

    #[test]
    fn a_repeated_call_id_is_refused() {
        let messages = turn(json!([call("c1", "x", "{}"), call("c1", "y", "{}")]));
        assert_eq!(
            validate(&messages, &HashSet::new()),
            Err(TranscriptError::DuplicateCallId("c1".into()))
        );
    }

    #[test]
    fn a_call_id_of_an_earlier_turn_is_refused() {
        let messages = turn(json!([call("c1", "x", "{}")]));
        let earlier = HashSet::from(["c1".to_owned()]);
        assert_eq!(
            validate(&messages, &earlier),
            Err(TranscriptError::DuplicateCallId("c1".into()))
        );
    }

    #[test]
    fn a_tool_name_outside_the_rule_is_refused() {
        for name in [
            "",
            "has space",
            "quote\"",
            &"x".repeat(129),
            "ümlaut",
            "a/b",
            "a:b",
        ] {
            let messages = turn(json!([call("c1", name, "{}")]));
            assert!(
                matches!(
                    validate(&messages, &HashSet::new()),
                    Err(TranscriptError::Message { index: 1, .. })
                ),
                "{name:?} was accepted"
            );
        }
        assert!(is_valid_tool_name(&"x".repeat(128)));
    }

    #[test]
    fn a_dotted_name_of_up_to_128_characters_is_a_tool_name_and_nothing_longer_or_spaced_is() {
        let dotted = format!("github.{}", "x".repeat(93));
        assert_eq!(dotted.len(), 100);
        assert!(is_valid_tool_name(&dotted));
        assert!(is_valid_tool_name("github.create_issue"));
        assert!(is_valid_tool_name(&"x".repeat(128)));
        assert!(!is_valid_tool_name(&"x".repeat(129)));
        assert!(!is_valid_tool_name("github create_issue"));
        assert!(!is_valid_tool_name("github/create_issue"));
        let messages = turn(json!([call("c1", "github.create_issue", "{}")]));
        assert!(validate(&messages, &HashSet::new()).is_ok());
    }

    #[test]
    fn arguments_that_are_not_a_json_object_string_are_refused() {
        for arguments in [
            json!({"a": 1}),
            json!("not json"),
            json!("[1]"),
            json!(null),
        ] {
            let messages = turn(
                json!([{"id": "c1", "type": "function", "function": {"name": "x", "arguments": arguments}}]),
            );
            assert!(
                validate(&messages, &HashSet::new()).is_err(),
                "{arguments} was accepted"
            );
        }
    }

    #[test]
    fn an_unknown_role_or_a_tool_message_without_its_call_id_is_refused() {
        let mut messages = turn(json!([call("c1", "x", "{}")]));
        messages.insert(0, json!({"role": "robot", "content": "beep"}));
        assert!(matches!(
            validate(&messages, &HashSet::new()),
            Err(TranscriptError::Message { index: 0, .. })
        ));
        messages[0] = json!({"role": "tool", "content": "result"});
        assert!(matches!(
            validate(&messages, &HashSet::new()),
            Err(TranscriptError::Message { index: 0, .. })
        ));
    }

    #[test]
    fn fields_the_service_does_not_use_are_kept_as_they_came() {
        let mut messages = turn(json!([call("c1", "x", "{}")]));
        messages[0]["name"] = json!("alice");
        assert!(validate(&messages, &HashSet::new()).is_ok());
    }

    #[test]
    fn a_nul_character_anywhere_in_a_message_is_refused() {
        let cases = [
            json!({"role": "user", "content": "a\u{0}b"}),
            json!({"role": "user", "content": [{"type": "text", "text": "\u{0}"}]}),
            json!({"role": "user", "content": "x", "na\u{0}me": 1}),
        ];
        for message in cases {
            let mut messages = turn(json!([call("c1", "x", "{}")]));
            messages.insert(0, message.clone());
            assert!(
                matches!(
                    validate(&messages, &HashSet::new()),
                    Err(TranscriptError::Message { index: 0, .. })
                ),
                "{message} was accepted"
            );
        }
        let messages = turn(json!([call("c\u{0}", "x", "{}")]));
        assert!(validate(&messages, &HashSet::new()).is_err());
    }

    #[test]
    fn a_call_id_with_a_control_character_or_a_space_is_refused() {
        for id in ["c\n1", "c\r", "\tc", "c\u{7f}", "c\u{85}", "c 1", "c "] {
            let messages = turn(json!([call(id, "x", "{}")]));
            assert!(
                validate(&messages, &HashSet::new()).is_err(),
                "{id:?} was accepted"
            );
        }
        for id in ["call_1", "toolu_01A-b.c:d", "é€"] {
            assert!(is_valid_call_id(id), "{id:?} was refused");
        }
    }

    #[test]
    fn a_call_id_is_measured_in_characters() {
        let messages = turn(json!([call(&"é".repeat(MAX_CALL_ID_LEN), "x", "{}")]));
        assert!(validate(&messages, &HashSet::new()).is_ok());
        let messages = turn(json!([call(&"é".repeat(MAX_CALL_ID_LEN + 1), "x", "{}")]));
        assert!(validate(&messages, &HashSet::new()).is_err());
    }

    #[test]
    fn every_call_id_of_a_transcript_is_collected() {
        let messages = turn(json!([call("c1", "x", "{}"), call("c2", "x", "{}")]));
        assert_eq!(
            call_ids(&messages),
            HashSet::from(["c1".to_owned(), "c2".to_owned()])
        );
    }
}

#[cfg(test)]
mod properties {
    use proptest::prelude::*;

    use super::*;

    fn any_call() -> impl Strategy<Value = PendingCall> {
        ("[a-z0-9_]{1,12}", "[A-Za-z0-9_.-]{1,128}", "\\PC{0,40}").prop_map(|(id, name, text)| {
            PendingCall {
                id,
                name,
                arguments: serde_json::json!({ "text": text }).to_string(),
            }
        })
    }

    proptest! {
        /// The digest is a function of the calls alone: the same calls through a JSON round trip hash the same.
        #[test]
        fn the_digest_is_stable_across_a_json_round_trip(calls in proptest::collection::vec(any_call(), 1..6)) {
            let messages: Vec<serde_json::Value> = vec![serde_json::json!({
                "role": "assistant",
                "tool_calls": calls.iter().map(|call| serde_json::json!({
                    "id": call.id, "type": "function",
                    "function": {"name": call.name, "arguments": call.arguments},
                })).collect::<Vec<_>>(),
            })];
            let text = serde_json::to_string(&messages).unwrap();
            let parsed: Vec<serde_json::Value> = serde_json::from_str(&text).unwrap();
            let mut unique = HashSet::new();
            prop_assume!(calls.iter().all(|call| unique.insert(call.id.clone())));
            let read_back = validate(&parsed, &HashSet::new()).unwrap();
            prop_assert_eq!(turn_digest(&read_back), turn_digest(&calls));
        }

        /// Any change to any field of any call changes the digest.
        #[test]
        fn changing_any_field_of_a_call_changes_the_digest(
            calls in proptest::collection::vec(any_call(), 1..6),
            which in any::<prop::sample::Index>(),
            field in 0..3usize,
        ) {
            let mut changed = calls.clone();
            let call = &mut changed[which.index(calls.len())];
            match field {
                0 => call.id.push('x'),
                1 => call.name.push('x'),
                _ => call.arguments.push(' '),
            }
            prop_assert_ne!(turn_digest(&calls), turn_digest(&changed));
        }
    }
}
