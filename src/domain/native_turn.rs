//! The waiting turn of a transcript in a provider's own format (docs/design.md §14): which entries are the pending
//! calls, their ids and their arguments, and the checks a registered list must pass.
//!
//! Only what the service relies on is read: roles, the calls of the last turn, and ids. Everything else (thinking
//! blocks, reasoning items, thought signatures, members and types this service has never heard of) is left as the
//! loop sent it; the list is stored as its own text and never written again from a parsed tree.
//!
//! Arguments are JSON text, as for OpenAI chat: the OpenAI formats' string as the model produced it, and Anthropic's
//! `input` and Gemini's `args` (objects) in their RFC 8785 canonical form (`serde_json_canonicalizer`), so that the
//! digest, the executors and the edits see one text per meaning.
//!
//! One file for the three formats: each format's reading of its waiting turn (`anthropic_turn`, `responses_turn`,
//! `gemini_turn`) goes through the same refusals, call ids, tool names and canonical arguments defined here, and
//! side by side they stay alike; split by format, those shared rules would sit apart from every reader of them.

use std::collections::HashSet;

use serde_json::{Map, Value};

use super::exact_numbers::{self, Step};
use super::model_format::ModelInputFormat;
use super::transcript::{
    MAX_CALL_ID_LEN, PendingCall, TOOL_NAME_RULE, is_valid_call_id, is_valid_tool_name,
};

/// Why a native list was refused: what is wrong, and where (`messages[3].content[4]`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct NativeError(pub String);

fn refuse<T>(text: impl Into<String>) -> Result<T, NativeError> {
    Err(NativeError(text.into()))
}

/// The name of a format's list member, and of its system member.
pub fn members(format: ModelInputFormat) -> (&'static str, &'static str) {
    match format {
        ModelInputFormat::OpenAiChat => ("messages", "system"),
        ModelInputFormat::Anthropic => ("messages", "system"),
        ModelInputFormat::OpenAiResponses => ("input", "instructions"),
        ModelInputFormat::Gemini => ("contents", "system_instruction"),
    }
}

/// The prefix of the ids the service gives Gemini calls that have none (`call_0`, `call_1`, …).
const UNNAMED_CALL_PREFIX: &str = "call_";

/// Whether `id` is of the form the service gives a Gemini call without an id: `call_` and decimal digits.
pub fn is_given_gemini_id(id: &str) -> bool {
    id.strip_prefix(UNNAMED_CALL_PREFIX)
        .is_some_and(|digits| !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()))
}

/// Checks a native system member (`system`, `instructions`, `system_instruction`).
pub fn check_system(format: ModelInputFormat, system: &Value) -> Result<(), NativeError> {
    let (_, name) = members(format);
    if holds_nul(system) {
        return refuse(format!(
            "{name}: a text holds the character U+0000, which cannot be stored"
        ));
    }
    let fits = match format {
        ModelInputFormat::Anthropic => match system {
            Value::String(_) => true,
            Value::Array(blocks) => blocks
                .iter()
                .all(|block| str_of(block, "type") == Some("text")),
            _ => false,
        },
        ModelInputFormat::OpenAiResponses => system.is_string(),
        ModelInputFormat::Gemini => system.get("parts").is_some_and(Value::is_array),
        ModelInputFormat::OpenAiChat => false,
    };
    if fits {
        return Ok(());
    }
    let shape = match format {
        ModelInputFormat::Anthropic => "a string or an array of text blocks",
        ModelInputFormat::OpenAiResponses => "a string",
        _ => "a content object with \"parts\"",
    };
    refuse(format!("{name} must be {shape}"))
}

/// Checks a native list and returns the pending calls of its waiting turn, in order.
///
/// `first_entry` is the index of the list's first entry in the whole transcript (0 at registration; for a new turn,
/// the length of what is stored), so that errors name entries as the whole list counts them. `earlier_ids` are the
/// call ids used in the run so far, which no pending call may reuse; `earlier_calls` is how many calls the run's
/// earlier turns had, from which a Gemini call without an id is numbered (`call_{n}`, counting every pending call
/// of the run from 0, so that no id repeats within a run: the executors' `Idempotency-Key` is `{run_id}:{call_id}`).
/// `list_text` is the text `list` was read from, whose numbers' own digits decide what a double cannot hold.
pub fn validate(
    format: ModelInputFormat,
    list: &[Value],
    list_text: &str,
    earlier_ids: &HashSet<String>,
    earlier_calls: usize,
) -> Result<Vec<PendingCall>, NativeError> {
    let (name, _) = members(format);
    if list.is_empty() {
        return refuse(format!("{name} must not be empty"));
    }
    for (index, entry) in list.iter().enumerate() {
        if !entry.is_object() {
            return refuse(format!("{name}[{index}] must be a JSON object"));
        }
        if holds_nul(entry) {
            return refuse(format!(
                "{name}[{index}]: a text or member name holds the character U+0000, which cannot be stored"
            ));
        }
    }
    let mut numbers = ListNumbers {
        text: list_text,
        past_2_53: None,
    };
    let calls = match format {
        ModelInputFormat::Anthropic => anthropic_turn(list, &mut numbers)?,
        ModelInputFormat::OpenAiResponses => responses_turn(list)?,
        ModelInputFormat::Gemini => gemini_turn(list, earlier_calls, &mut numbers)?,
        ModelInputFormat::OpenAiChat => {
            return refuse("OpenAI chat messages are checked by domain::transcript");
        }
    };
    let mut seen = HashSet::new();
    for call in &calls {
        if earlier_ids.contains(&call.id) || !seen.insert(call.id.as_str()) {
            return refuse(format!(
                "call id {:?} is used more than once in this run",
                call.id
            ));
        }
    }
    Ok(calls)
}

/// Anthropic: the `tool_use` blocks of the last message, which is the assistant's. Server tool blocks
/// (`server_tool_use`, `web_search_tool_result`, …) are the provider's own doing, not calls waiting here.
fn anthropic_turn(
    messages: &[Value],
    numbers: &mut ListNumbers<'_>,
) -> Result<Vec<PendingCall>, NativeError> {
    for (index, message) in messages.iter().enumerate() {
        let role = str_of(message, "role");
        if !matches!(role, Some("user" | "assistant")) {
            return refuse(format!(
                "messages[{index}]: \"role\" must be \"user\" or \"assistant\""
            ));
        }
        match message.get("content") {
            Some(Value::String(_)) => {}
            Some(Value::Array(blocks)) => {
                for (at, block) in blocks.iter().enumerate() {
                    if str_of(block, "type").is_none() {
                        return refuse(format!(
                            "messages[{index}].content[{at}] needs a string \"type\""
                        ));
                    }
                }
            }
            _ => {
                return refuse(format!(
                    "messages[{index}]: \"content\" must be a string or an array of blocks"
                ));
            }
        }
    }
    let index = messages.len() - 1;
    let last = &messages[index];
    if str_of(last, "role") != Some("assistant") {
        return refuse(format!(
            "messages[{index}]: the last message must be the assistant's, with at least one tool_use block: it is the \
             turn that waits for approval"
        ));
    }
    let blocks = last
        .get("content")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    let mut calls = Vec::new();
    for (at, block) in blocks.iter().enumerate() {
        if str_of(block, "type") != Some("tool_use") {
            continue;
        }
        let place = format!("messages[{index}].content[{at}]");
        let id = call_id(block.get("id"), &format!("{place}: a tool_use block"), "id")?;
        let name = tool_name(block.get("name"), &place)?;
        let arguments = match block.get("input") {
            Some(input @ Value::Object(_)) => {
                let at = [
                    Step::Index(index),
                    Step::Member("content".into()),
                    Step::Index(at),
                    Step::Member("input".into()),
                ];
                canonical_arguments(input, &format!("{place}.input"), &at, numbers)?
            }
            _ => return refuse(format!("{place}: \"input\" must be a JSON object")),
        };
        calls.push(PendingCall {
            id,
            name,
            arguments,
        });
    }
    if calls.is_empty() {
        return refuse(format!(
            "messages[{index}]: the last message has no tool_use block, so no call waits for approval"
        ));
    }
    Ok(calls)
}

/// OpenAI Responses: the `function_call` items of the model's last output, the items after the last user message or
/// `function_call_output`. A message may come in the short form, without `type`.
fn responses_turn(items: &[Value]) -> Result<Vec<PendingCall>, NativeError> {
    let mut output_start = 0;
    for (index, item) in items.iter().enumerate() {
        let kind = match item.get("type") {
            None => "message",
            Some(Value::String(kind)) => kind.as_str(),
            Some(_) => return refuse(format!("input[{index}]: \"type\" must be a string")),
        };
        match kind {
            "message" => {
                let Some(role) = str_of(item, "role") else {
                    return refuse(format!("input[{index}]: a message needs a string \"role\""));
                };
                if role == "user" {
                    output_start = index + 1;
                }
            }
            "function_call_output" => output_start = index + 1,
            _ => {}
        }
    }
    let mut calls = Vec::new();
    for (index, item) in items.iter().enumerate().skip(output_start) {
        if str_of(item, "type") != Some("function_call") {
            continue;
        }
        let place = format!("input[{index}]");
        let id = call_id(
            item.get("call_id"),
            &format!("{place}: a function_call item"),
            "call_id",
        )?;
        let name = tool_name(item.get("name"), &place)?;
        let arguments = match item.get("arguments") {
            Some(Value::String(text))
                if matches!(serde_json::from_str(text), Ok(Value::Object(_))) =>
            {
                text.clone()
            }
            _ => {
                return refuse(format!(
                    "{place}: \"arguments\" must be a string holding a JSON object"
                ));
            }
        };
        calls.push(PendingCall {
            id,
            name,
            arguments,
        });
    }
    if calls.is_empty() {
        return refuse(format!(
            "input: no function_call item follows the last user message or function_call_output (input[{}]), so no \
             call waits for approval",
            output_start.saturating_sub(1)
        ));
    }
    Ok(calls)
}

/// Gemini: the `functionCall` parts of the last content, of role `model`. A call without an `id` is given
/// `call_{n}`; an `id` of that form is the service's, and refused from the loop, so the results can tell which
/// calls had an id of their own (only those get one back, §14).
fn gemini_turn(
    contents: &[Value],
    earlier_calls: usize,
    numbers: &mut ListNumbers<'_>,
) -> Result<Vec<PendingCall>, NativeError> {
    for (index, content) in contents.iter().enumerate() {
        if !content.get("parts").is_some_and(Value::is_array) {
            return refuse(format!("contents[{index}] needs an array \"parts\""));
        }
        if content
            .get("role")
            .is_some_and(|role| !matches!(role.as_str(), Some("user" | "model")))
        {
            return refuse(format!(
                "contents[{index}]: \"role\" must be \"user\" or \"model\""
            ));
        }
    }
    let index = contents.len() - 1;
    let last = &contents[index];
    if str_of(last, "role") != Some("model") {
        return refuse(format!(
            "contents[{index}]: the last content must be of role \"model\", with at least one functionCall part: it \
             is the turn that waits for approval"
        ));
    }
    let parts = last
        .get("parts")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    let mut calls = Vec::new();
    for (at, part) in parts.iter().enumerate() {
        let Some(call) = function_call(part) else {
            continue;
        };
        let place = format!("contents[{index}].parts[{at}]");
        if !call.is_object() {
            return refuse(format!("{place}: functionCall must be a JSON object"));
        }
        let name = tool_name(call.get("name"), &place)?;
        let id = match call.get("id") {
            None | Some(Value::Null) => {
                format!("{UNNAMED_CALL_PREFIX}{}", earlier_calls + calls.len())
            }
            given => {
                let id = call_id(given, &format!("{place}: a functionCall"), "id")?;
                if is_given_gemini_id(&id) {
                    return refuse(format!(
                        "{place}: functionCall id {id:?} has the form call_{{n}}, which the service gives calls \
                         without an id"
                    ));
                }
                id
            }
        };
        let arguments = match call.get("args") {
            None | Some(Value::Null) => "{}".to_owned(),
            Some(args @ Value::Object(_)) => {
                // The member `function_call` names only where `functionCall` is absent.
                let member = if part.get("functionCall").is_some() {
                    "functionCall"
                } else {
                    "function_call"
                };
                let at = [
                    Step::Index(index),
                    Step::Member("parts".into()),
                    Step::Index(at),
                    Step::Member(member.into()),
                    Step::Member("args".into()),
                ];
                canonical_arguments(args, &format!("{place}.args"), &at, numbers)?
            }
            Some(_) => {
                return refuse(format!(
                    "{place}: functionCall \"args\" must be a JSON object"
                ));
            }
        };
        calls.push(PendingCall {
            id,
            name,
            arguments,
        });
    }
    if calls.is_empty() {
        return refuse(format!(
            "contents[{index}]: the last content, of role \"model\", has no functionCall part, so no call waits for \
             approval"
        ));
    }
    Ok(calls)
}

/// A part's function call: `functionCall`, as the REST API writes it, or `function_call`, as the Python SDK's
/// models serialize it by default.
pub fn function_call(part: &Value) -> Option<&Value> {
    part.get("functionCall")
        .or_else(|| part.get("function_call"))
}

/// 2^52: a double this large may be a rounded text past 2^53 (serde_json's default parse of a long decimal may be
/// off by a unit in the last place), so the text is read; below it, no number can be.
const NEAR_2_53: f64 = 4_503_599_627_370_496.0;

/// The numbers past 2^53 of a list's text, found when first needed.
struct ListNumbers<'a> {
    text: &'a str,
    past_2_53: Option<Vec<Vec<Step>>>,
}

impl ListNumbers<'_> {
    /// The place, under `prefix` and written after it, of the first number past 2^53 there.
    fn first_under(&mut self, prefix: &[Step]) -> Option<String> {
        let text = self.text;
        self.past_2_53
            .get_or_insert_with(|| exact_numbers::past_2_53(text))
            .iter()
            .find_map(|steps| steps.strip_prefix(prefix))
            .map(exact_numbers::place)
    }
}

/// The canonical arguments of a call (at `at` in the list), refused where canonical form would change what the model
/// asked for: a number past 2^53 (an order id, say), however written, would be rounded in the digest, the approver's
/// view and the executor's call, while the transcript the model reads back keeps its own digits. The parsed tree only
/// says where to look: its numbers are doubles already, so the text's digits decide.
fn canonical_arguments(
    arguments: &Value,
    place: &str,
    at: &[Step],
    numbers: &mut ListNumbers<'_>,
) -> Result<String, NativeError> {
    if holds_number_near_2_53(arguments)
        && let Some(path) = numbers.first_under(at)
    {
        return refuse(format!(
            "{place}{path}: a number beyond 2^53 cannot be kept exactly in canonical JSON (RFC 8785); send it as \
             a string"
        ));
    }
    Ok(canonical(arguments))
}

/// Whether a number of `value` is 2^52 or more in magnitude, as parsed.
fn holds_number_near_2_53(value: &Value) -> bool {
    let mut stack = vec![value];
    while let Some(value) = stack.pop() {
        match value {
            Value::Number(number) if number.as_f64().is_some_and(|n| n.abs() >= NEAR_2_53) => {
                return true;
            }
            Value::Array(items) => stack.extend(items),
            Value::Object(members) => stack.extend(members.values()),
            _ => {}
        }
    }
    false
}

/// The RFC 8785 (JCS) text of an object: sorted keys, no spaces, numbers as ECMAScript writes them.
pub fn canonical(value: &Value) -> String {
    // Only a value whose numbers are not finite fails, and JSON text holds none.
    serde_json_canonicalizer::to_string(value).unwrap_or_else(|_| value.to_string())
}

/// Every call id a native list holds (earlier turns' calls included), to refuse a new turn that reuses one.
pub fn call_ids(format: ModelInputFormat, list: &[Value]) -> HashSet<String> {
    let mut ids = HashSet::new();
    for entry in list {
        match format {
            ModelInputFormat::Anthropic => {
                let blocks = entry
                    .get("content")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten();
                for block in blocks.filter(|block| str_of(block, "type") == Some("tool_use")) {
                    ids.extend(str_of(block, "id").map(str::to_owned));
                }
            }
            ModelInputFormat::OpenAiResponses => {
                if str_of(entry, "type") == Some("function_call") {
                    ids.extend(str_of(entry, "call_id").map(str::to_owned));
                }
            }
            ModelInputFormat::Gemini => {
                let parts = entry
                    .get("parts")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten();
                for call in parts.filter_map(function_call) {
                    ids.extend(str_of(call, "id").map(str::to_owned));
                }
            }
            ModelInputFormat::OpenAiChat => {}
        }
    }
    ids
}

fn call_id(id: Option<&Value>, what: &str, member: &str) -> Result<String, NativeError> {
    let Some(Value::String(id)) = id else {
        return refuse(format!("{what} needs a string \"{member}\""));
    };
    let length = id.chars().count();
    if length == 0 || length > MAX_CALL_ID_LEN {
        return refuse(format!(
            "{what}: \"{member}\" must have 1 to {MAX_CALL_ID_LEN} characters"
        ));
    }
    if !is_valid_call_id(id) {
        return refuse(format!(
            "{what}: \"{member}\" must not hold a space or a control character (U+0000 to U+0020, U+007F to U+009F)"
        ));
    }
    Ok(id.clone())
}

fn tool_name(name: Option<&Value>, place: &str) -> Result<String, NativeError> {
    match name {
        Some(Value::String(name)) if is_valid_tool_name(name) => Ok(name.clone()),
        Some(Value::String(name)) => refuse(format!(
            "{place}: tool name {name:?} must match {TOOL_NAME_RULE}"
        )),
        _ => refuse(format!("{place}: the call needs a string \"name\"")),
    }
}

fn str_of<'a>(value: &'a Value, key: &str) -> Option<&'a str> {
    value.get(key).and_then(Value::as_str)
}

/// Whether any string or member name holds U+0000, which Postgres stores in no text.
fn holds_nul(value: &Value) -> bool {
    match value {
        Value::String(text) => has_nul(text),
        Value::Array(items) => items.iter().any(holds_nul),
        Value::Object(members) => members_hold_nul(members),
        Value::Null | Value::Bool(_) | Value::Number(_) => false,
    }
}

fn members_hold_nul(members: &Map<String, Value>) -> bool {
    members
        .iter()
        .any(|(name, member)| has_nul(name) || holds_nul(member))
}

/// Whether a text holds U+0000: in UTF-8, the zero byte encodes nothing else, and `memchr` finds it vectorized.
fn has_nul(text: &str) -> bool {
    memchr::memchr(0, text.as_bytes()).is_some()
}

#[cfg(test)]
mod tests {
    use super::*;
    use ModelInputFormat::{Anthropic, Gemini, OpenAiResponses};
    use serde_json::json;

    fn none() -> HashSet<String> {
        HashSet::new()
    }

    /// The text a list is read from, as serde_json writes it.
    fn text(list: &[Value]) -> String {
        serde_json::to_string(list).unwrap()
    }

    #[test]
    fn an_integer_a_double_cannot_hold_is_refused_in_arguments_naming_where_it_is() {
        let messages = vec![
            json!({"role": "user", "content": "cancel order 9007199254740993"}),
            json!({"role": "assistant", "content": [
                {"type": "tool_use", "id": "toolu_1", "name": "cancel_order",
                 "input": {"orders": [{"id": 9007199254740993_u64}]}}
            ]}),
        ];
        let error = validate(Anthropic, &messages, &text(&messages), &none(), 0).unwrap_err();
        assert!(
            error
                .0
                .contains("messages[1].content[0].input.orders[0].id")
                && error.0.contains("2^53"),
            "{}",
            error.0
        );
        let contents = vec![
            json!({"role": "user", "parts": [{"text": "go"}]}),
            json!({"role": "model", "parts": [{"functionCall": {"name": "x", "args": {"n": -9007199254740993_i64}}}]}),
        ];
        let error = validate(Gemini, &contents, &text(&contents), &none(), 0).unwrap_err();
        assert!(error.0.contains(".args.n"), "{}", error.0);
    }

    #[test]
    fn a_number_past_2_53_written_as_a_fraction_an_exponent_or_past_u64_is_refused_by_its_digits() {
        for number in [
            "9007199254740993.0",
            "123456789012345678901234",
            "9.007199254740993e15",
            "-1e300",
        ] {
            let messages = format!(
                r#"[{{"role":"user","content":"go"}},{{"role":"assistant","content":[{{"type":"text","text":"ok"}},{{"type":"tool_use","id":"toolu_1","name":"x","input":{{"order":{{"id":{number}}}}}}}]}}]"#
            );
            let list: Vec<Value> = serde_json::from_str(&messages).unwrap();
            let error = validate(Anthropic, &list, &messages, &none(), 0).unwrap_err();
            assert!(
                error
                    .0
                    .starts_with("messages[1].content[1].input.order.id: a number beyond 2^53"),
                "{number}: {}",
                error.0
            );
            let contents = format!(
                r#"[{{"role":"user","parts":[{{"text":"go"}}]}},{{"role":"model","parts":[{{"function_call":{{"name":"x","args":{{"ids":[1,{number}]}}}}}}]}}]"#
            );
            let list: Vec<Value> = serde_json::from_str(&contents).unwrap();
            let error = validate(Gemini, &list, &contents, &none(), 0).unwrap_err();
            assert!(
                error.0.starts_with("contents[1].parts[0].args.ids[1]: "),
                "{number}: {}",
                error.0
            );
        }
        // 2^53 itself is kept, however written; a number past it elsewhere in the list is not the call's.
        let messages = r#"[{"role":"user","content":"go","n":9007199254740993},{"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"x","input":{"n":9007199254740992.0}}]}]"#;
        let list: Vec<Value> = serde_json::from_str(messages).unwrap();
        let calls = validate(Anthropic, &list, messages, &none(), 0).unwrap();
        assert_eq!(calls[0].arguments, r#"{"n":9007199254740992}"#);
    }

    #[test]
    fn an_integer_up_to_two_to_the_fifty_third_is_kept_in_canonical_arguments() {
        let messages = vec![
            json!({"role": "user", "content": "go"}),
            json!({"role": "assistant", "content": [
                {"type": "tool_use", "id": "toolu_1", "name": "x", "input": {"n": 9007199254740992_u64, "m": -3}}
            ]}),
        ];
        let calls = validate(Anthropic, &messages, &text(&messages), &none(), 0).unwrap();
        assert_eq!(calls[0].arguments, r#"{"m":-3,"n":9007199254740992}"#);
    }

    #[test]
    fn anthropic_pending_calls_are_the_tool_use_blocks_of_the_last_message_with_canonical_input() {
        let messages = vec![
            json!({"role": "user", "content": "go"}),
            json!({"role": "assistant", "content": [
                {"type": "thinking", "thinking": "…", "signature": "s"},
                {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"q": 1}},
                {"type": "tool_use", "id": "toolu_1", "name": "update", "input": {"z": 1.50, "a": [true, null]}},
                {"type": "tool_use", "id": "toolu_2", "name": "read", "input": {}},
            ]}),
        ];
        let calls = validate(Anthropic, &messages, &text(&messages), &none(), 0).unwrap();
        let ids: Vec<&str> = calls.iter().map(|call| call.id.as_str()).collect();
        assert_eq!(ids, ["toolu_1", "toolu_2"]);
        assert_eq!(calls[0].arguments, r#"{"a":[true,null],"z":1.5}"#);
    }

    #[test]
    fn a_tool_use_without_an_id_is_refused_naming_the_block() {
        let messages = vec![
            json!({"role": "assistant", "content": [{"type": "tool_use", "name": "x", "input": {}}]}),
        ];
        let error = validate(Anthropic, &messages, &text(&messages), &none(), 0).unwrap_err();
        assert_eq!(
            error.0,
            "messages[0].content[0]: a tool_use block needs a string \"id\""
        );
    }

    #[test]
    fn an_anthropic_transcript_ending_in_a_user_message_has_no_pending_turn() {
        let messages = vec![json!({"role": "user", "content": "hi"})];
        assert!(
            validate(Anthropic, &messages, &text(&messages), &none(), 0)
                .unwrap_err()
                .0
                .contains("last message")
        );
    }

    #[test]
    fn responses_pending_calls_follow_the_last_user_message_or_output() {
        let items = vec![
            json!({"role": "user", "content": "go"}),
            json!({"type": "function_call", "call_id": "c0", "name": "x", "arguments": "{}"}),
            json!({"type": "function_call_output", "call_id": "c0", "output": "ok"}),
            json!({"type": "reasoning", "id": "rs_1", "encrypted_content": "e", "summary": []}),
            json!({"type": "function_call", "call_id": "c1", "name": "x", "arguments": "{\"a\": 1.50}"}),
            json!({"type": "function_call", "call_id": "c2", "name": "y", "arguments": "{}"}),
        ];
        let calls = validate(OpenAiResponses, &items, &text(&items), &none(), 0).unwrap();
        let ids: Vec<&str> = calls.iter().map(|call| call.id.as_str()).collect();
        assert_eq!(ids, ["c1", "c2"]);
        assert_eq!(
            calls[0].arguments, "{\"a\": 1.50}",
            "the model's string, as it is"
        );
    }

    #[test]
    fn a_responses_input_without_a_call_after_the_user_message_is_refused() {
        let items = vec![
            json!({"type": "function_call", "call_id": "c0", "name": "x", "arguments": "{}"}),
            json!({"type": "message", "role": "user", "content": "stop"}),
        ];
        assert!(
            validate(OpenAiResponses, &items, &text(&items), &none(), 0)
                .unwrap_err()
                .0
                .contains("no function_call")
        );
    }

    #[test]
    fn gemini_calls_without_an_id_are_numbered_across_the_run() {
        let contents = vec![
            json!({"role": "user", "parts": [{"text": "go"}]}),
            json!({"role": "model", "parts": [
                {"text": "thinking", "thought": true},
                {"functionCall": {"name": "x", "args": {"b": 2, "a": 1.0}}, "thoughtSignature": "sig"},
                {"function_call": {"name": "y"}},
                {"functionCall": {"name": "z", "id": "fc-7", "args": {}}},
            ]}),
        ];
        let calls = validate(Gemini, &contents, &text(&contents), &none(), 3).unwrap();
        let ids: Vec<&str> = calls.iter().map(|call| call.id.as_str()).collect();
        assert_eq!(ids, ["call_3", "call_4", "fc-7"]);
        assert_eq!(calls[0].arguments, r#"{"a":1,"b":2}"#);
        assert_eq!(calls[1].arguments, "{}");
    }

    #[test]
    fn a_gemini_model_turn_without_a_function_call_is_refused() {
        let contents = vec![json!({"role": "model", "parts": [{"text": "done"}]})];
        let error = validate(Gemini, &contents, &text(&contents), &none(), 0).unwrap_err();
        assert!(
            error.0.starts_with("contents[0]: the last content"),
            "{}",
            error.0
        );
    }

    #[test]
    fn a_gemini_id_of_the_services_own_form_is_refused() {
        let contents = vec![
            json!({"role": "model", "parts": [{"functionCall": {"name": "x", "id": "call_1"}}]}),
        ];
        assert!(validate(Gemini, &contents, &text(&contents), &none(), 0).is_err());
        assert!(
            is_given_gemini_id("call_12")
                && !is_given_gemini_id("call_")
                && !is_given_gemini_id("call_1a")
        );
    }

    #[test]
    fn a_call_id_of_an_earlier_turn_is_refused() {
        let messages = vec![json!({"role": "assistant", "content": [
            {"type": "tool_use", "id": "toolu_1", "name": "x", "input": {}},
        ]})];
        let earlier = HashSet::from(["toolu_1".to_owned()]);
        assert!(
            validate(Anthropic, &messages, &text(&messages), &earlier, 1)
                .unwrap_err()
                .0
                .contains("more than once")
        );
    }

    #[test]
    fn system_members_take_their_formats_shapes() {
        assert!(check_system(Anthropic, &json!("s")).is_ok());
        assert!(
            check_system(
                Anthropic,
                &json!([{"type": "text", "text": "s", "cache_control": {}}])
            )
            .is_ok()
        );
        assert!(check_system(Anthropic, &json!([{"type": "image"}])).is_err());
        assert!(check_system(OpenAiResponses, &json!("s")).is_ok());
        assert!(check_system(OpenAiResponses, &json!(["s"])).is_err());
        assert!(check_system(Gemini, &json!({"parts": [{"text": "s"}]})).is_ok());
        assert!(check_system(Gemini, &json!("s")).is_err());
    }
}
