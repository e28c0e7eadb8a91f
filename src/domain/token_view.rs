//! What a decision token's reads show of a run's payloads (docs/design.md §13): the run as the inbox shows it, filtered
//! by the run's privacy level (§6). An API key's client sees its tenant's runs whole; a token is held by a browser,
//! so it sees payloads only where the level lets them out of the service at all: verbatim at `full`, redacted at
//! `redacted`, and none at `metadata` or `none`.

use serde_json::Value;

use super::redact::redact;
use super::vocabulary::PrivacyLevel;

/// Whether the level shows payloads (arguments, the transcript) to a token at all.
pub fn shows_payloads(level: PrivacyLevel) -> bool {
    matches!(level, PrivacyLevel::Full | PrivacyLevel::Redacted)
}

/// A pending call's arguments as a token sees them: `None` where the level shows no payload.
pub fn arguments(level: PrivacyLevel, arguments: &str) -> Option<String> {
    match level {
        PrivacyLevel::Full => Some(arguments.to_owned()),
        PrivacyLevel::Redacted => Some(redact(arguments)),
        PrivacyLevel::Metadata | PrivacyLevel::None => None,
    }
}

/// A model input (any format) as a token sees it: whole at `full`; at `redacted` every string in it redacted (the
/// texts of messages, arguments and results alike; names and ids have no secret shape and pass unchanged); `None`
/// where the level shows no payload.
pub fn model_input(level: PrivacyLevel, mut model_input: Value) -> Option<Value> {
    match level {
        PrivacyLevel::Full => Some(model_input),
        PrivacyLevel::Redacted => {
            redact_strings(&mut model_input);
            Some(model_input)
        }
        PrivacyLevel::Metadata | PrivacyLevel::None => None,
    }
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
    use serde_json::json;

    const SECRET: &str =
        r#"{"api_key":"sk-abcdefghijklmnopqrstuvwxyz0123456789","to":"ann@example.com"}"#;

    #[test]
    fn a_token_sees_arguments_verbatim_at_full_redacted_at_redacted_and_none_below() {
        assert_eq!(
            arguments(PrivacyLevel::Full, SECRET).as_deref(),
            Some(SECRET)
        );
        let redacted = arguments(PrivacyLevel::Redacted, SECRET).unwrap();
        assert!(!redacted.contains("sk-abcdefghij"), "{redacted}");
        assert!(!redacted.contains("ann@example.com"), "{redacted}");
        assert_eq!(arguments(PrivacyLevel::Metadata, SECRET), None);
        assert_eq!(arguments(PrivacyLevel::None, SECRET), None);
    }

    #[test]
    fn a_redacted_model_input_keeps_its_shape_and_masks_every_text_in_it() {
        let input = json!({"format": "openai-chat", "messages": [
            {"role": "user", "content": "mail ann@example.com"},
            {"role": "assistant", "tool_calls": [{"id": "call_1", "type": "function",
                "function": {"name": "send_mail", "arguments": SECRET}}]},
            {"role": "tool", "tool_call_id": "call_1", "content": [{"type": "text", "text": "sent to ann@example.com"}]},
        ]});
        let shown = model_input(PrivacyLevel::Redacted, input.clone()).unwrap();
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
            model_input(PrivacyLevel::Full, input.clone()),
            Some(input.clone())
        );
        assert_eq!(model_input(PrivacyLevel::Metadata, input.clone()), None);
        assert_eq!(model_input(PrivacyLevel::None, input), None);
    }
}
