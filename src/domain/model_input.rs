//! The resumed model input (docs/design.md §7): the transcript plus one result per pending call, in four formats.
//!
//! A run answers in the format it was registered in, its stored text passed through unchanged (`openai-chat` here,
//! the provider formats in `native_input`). An OpenAI chat run in `anthropic`, `openai-responses` or `gemini` is a
//! translation of its messages; content with no counterpart in the target format (audio, files) is left out, as
//! before runs had formats of their own. All formats carry the same results, in the turn's order.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use bytes::Bytes;

use super::native_input;
use super::results::ToolResult;
use super::transcript_text::{NotATranscript, TranscriptText};
use super::translate;

/// The shape of the resumed model input; `openai-chat` is what the loop registered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub enum ModelInputFormat {
    #[default]
    #[serde(rename = "openai-chat")]
    OpenAiChat,
    #[serde(rename = "anthropic")]
    Anthropic,
    #[serde(rename = "openai-responses")]
    OpenAiResponses,
    #[serde(rename = "gemini")]
    Gemini,
}

impl ModelInputFormat {
    pub const ALL: [ModelInputFormat; 4] = [
        ModelInputFormat::OpenAiChat,
        ModelInputFormat::Anthropic,
        ModelInputFormat::OpenAiResponses,
        ModelInputFormat::Gemini,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ModelInputFormat::OpenAiChat => "openai-chat",
            ModelInputFormat::Anthropic => "anthropic",
            ModelInputFormat::OpenAiResponses => "openai-responses",
            ModelInputFormat::Gemini => "gemini",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|format| format.as_str() == s)
    }
}

/// The text of the tool messages of a turn's results, comma-separated and without brackets (see [`tool_messages`]).
pub fn tool_messages_entries(results: &[ToolResult]) -> Vec<u8> {
    tool_messages_text(results)
}

/// The tool messages (OpenAI chat) for a turn's results, in order: {"role":"tool","tool_call_id":…,"content":…}
pub fn tool_messages(results: &[ToolResult]) -> Vec<Value> {
    results
        .iter()
        .map(|result| {
            serde_json::to_value(ToolMessage::of(result)).expect("a struct of strings is a value")
        })
        .collect()
}

/// One tool message, the one shape of [`tool_messages`] and [`tool_messages_text`]. The fields are in the order an
/// object `Value` keeps its keys (sorted), so the text written from it is byte for byte what its tree serializes to.
#[derive(Serialize)]
struct ToolMessage<'a> {
    content: &'a str,
    role: &'static str,
    tool_call_id: &'a str,
}

impl<'a> ToolMessage<'a> {
    fn of(result: &'a ToolResult) -> Self {
        ToolMessage {
            content: &result.content,
            role: "tool",
            tool_call_id: &result.call_id,
        }
    }
}

/// The text of [`tool_messages`] as the elements of an array, comma-separated and without the brackets: what a
/// decision's answer appends to the stored transcript's messages.
fn tool_messages_text(results: &[ToolResult]) -> Vec<u8> {
    let mut text = Vec::with_capacity(results.iter().map(|r| r.content.len() + 64).sum());
    for (index, result) in results.iter().enumerate() {
        if index > 0 {
            text.push(b',');
        }
        serde_json::to_writer(&mut text, &ToolMessage::of(result))
            .expect("a struct of strings always serializes");
    }
    text
}

/// The whole model input of an OpenAI chat run: `transcript` is the validated OpenAI-chat transcript through the
/// assistant turn whose calls `results` answer (earlier turns' tool messages already inside it). `earlier_results`
/// are the results this service wrote for earlier turns: OpenAI chat does not carry `is_error`, so formats that do
/// take it from there.
pub fn render(
    format: ModelInputFormat,
    transcript: &[Value],
    results: &[ToolResult],
    earlier_results: &[ToolResult],
) -> Value {
    let read = || steps(transcript, results, earlier_results);
    let system = system_text(transcript);
    let (system_key, system, list_key, list) = match format {
        ModelInputFormat::OpenAiChat => {
            let mut messages = transcript.to_vec();
            messages.extend(tool_messages(results));
            return json!({"format": format.as_str(), "messages": messages});
        }
        ModelInputFormat::Anthropic => (
            "system",
            system.map(Value::from),
            "messages",
            anthropic(&read()),
        ),
        ModelInputFormat::OpenAiResponses => (
            "instructions",
            system.map(Value::from),
            "input",
            responses(&read()),
        ),
        ModelInputFormat::Gemini => (
            "system_instruction",
            system.map(|text| json!({"parts": [{"text": text}]})),
            "contents",
            gemini(&read()),
        ),
    };
    let mut out = Map::new();
    out.insert("format".into(), format.as_str().into());
    if let Some(system) = system {
        out.insert(system_key.into(), system);
    }
    out.insert(list_key.into(), list);
    Value::Object(out)
}

/// The head of an `openai-chat` model input, up to its first message: the text [`render`] writes for it.
const CHAT_HEAD: &[u8] = br#"{"format":"openai-chat","messages":["#;

/// Why a model input could not be rendered.
#[derive(Debug, thiserror::Error)]
pub enum RenderError {
    #[error(transparent)]
    Corrupt(#[from] NotATranscript),
    /// The transcript holds something the asked format has no counterpart for (docs/design.md §14).
    #[error("{0}")]
    NotRepresentable(String),
}

/// The model input as pieces of JSON text, to be sent one after another. In the run's own format the stored texts
/// are pieces of it, spliced in as they are and never parsed, so the answer costs what its results cost, whatever
/// the transcript's length (`openai-chat` here, the others in `native_input`). An OpenAI chat run in another format
/// is a translation of its parsed messages ([`render`]); a native run in another format is one only where nothing
/// would be dropped (`translate`).
pub fn render_text(
    format: ModelInputFormat,
    transcript: &TranscriptText,
    results: &[ToolResult],
    earlier_results: &[ToolResult],
) -> Result<Vec<Bytes>, RenderError> {
    if transcript.format() != ModelInputFormat::OpenAiChat {
        if format == transcript.format() {
            return Ok(native_input::render_text(transcript, results));
        }
        let tree = translate::render(format, transcript, results)?;
        let text = serde_json::to_vec(&tree).expect("a JSON value always serializes");
        return Ok(vec![Bytes::from(text)]);
    }
    if format != ModelInputFormat::OpenAiChat {
        let tree = render(format, &transcript.values()?, results, earlier_results);
        let text = serde_json::to_vec(&tree).expect("a JSON value always serializes");
        return Ok(vec![Bytes::from(text)]);
    }
    let tools = Bytes::from(tool_messages_text(results));
    let mut pieces = vec![Bytes::from_static(CHAT_HEAD), transcript.messages()];
    if !transcript.is_empty() && !tools.is_empty() {
        pieces.push(Bytes::from_static(b","));
    }
    pieces.push(tools);
    pieces.push(Bytes::from_static(b"]}"));
    Ok(pieces)
}

/// One step of the conversation, read once from the transcript and the results, then written in each format.
pub(super) enum Step<'a> {
    User(Vec<Part<'a>>),
    AssistantText(String),
    Call(Call<'a>),
    Output(Output<'a>),
}

pub(super) struct Call<'a> {
    pub(super) id: &'a str,
    pub(super) name: &'a str,
    /// The JSON text the model produced (for a translated native run, its arguments as §14 defines them).
    pub(super) arguments: std::borrow::Cow<'a, str>,
}

/// A tool's answer. `is_error` is known for results this service wrote; for tool messages the loop registered itself
/// it is unknown (OpenAI chat does not record it), and guessing it from the text would tell the model something
/// nobody said.
pub(super) struct Output<'a> {
    pub(super) call_id: &'a str,
    pub(super) content: String,
    pub(super) is_error: Option<bool>,
}

pub(super) enum Part<'a> {
    Text(&'a str),
    ImageUrl(&'a str),
}

/// The steps in order; system and developer messages are left to `system_text`, empty texts are dropped.
fn steps<'a>(
    transcript: &'a [Value],
    results: &'a [ToolResult],
    earlier_results: &[ToolResult],
) -> Vec<Step<'a>> {
    let known_errors: HashMap<&str, bool> = earlier_results
        .iter()
        .map(|result| (result.call_id.as_str(), result.is_error))
        .collect();
    let mut steps = Vec::new();
    for message in transcript {
        match role_of(message) {
            "user" => {
                let parts = user_parts(message);
                if !parts.is_empty() {
                    steps.push(Step::User(parts));
                }
            }
            "assistant" => {
                let text = text_of(message);
                if !text.is_empty() {
                    steps.push(Step::AssistantText(text));
                }
                steps.extend(tool_calls(message).map(|call| {
                    Step::Call(Call {
                        id: str_at(call, "/id"),
                        name: str_at(call, "/function/name"),
                        arguments: str_at(call, "/function/arguments").into(),
                    })
                }));
            }
            "tool" => {
                let call_id = str_at(message, "/tool_call_id");
                steps.push(Step::Output(Output {
                    call_id,
                    content: text_of(message),
                    is_error: known_errors.get(call_id).copied(),
                }))
            }
            _ => {}
        }
    }
    steps.extend(results.iter().map(|result| {
        Step::Output(Output {
            call_id: &result.call_id,
            content: result.content.clone(),
            is_error: Some(result.is_error),
        })
    }));
    steps
}

/// Anthropic messages. Roles must alternate there, so consecutive steps of one role become one message: a turn's
/// tool results (with the user's next words, if any) land in a single user message.
pub(super) fn anthropic(steps: &[Step]) -> Value {
    let mut messages: Vec<(&str, Vec<Value>)> = Vec::new();
    for step in steps {
        let (role, blocks) = match step {
            Step::User(parts) => ("user", parts.iter().map(anthropic_part).collect()),
            Step::AssistantText(text) => ("assistant", vec![json!({"type": "text", "text": text})]),
            Step::Call(call) => {
                // Validated transcripts always hold an object here; anything else becomes `{}` rather than a panic.
                let input = match serde_json::from_str(&call.arguments) {
                    Ok(object @ Value::Object(_)) => object,
                    _ => json!({}),
                };
                let block =
                    json!({"type": "tool_use", "id": call.id, "name": call.name, "input": input});
                ("assistant", vec![block])
            }
            Step::Output(output) => {
                let mut block = json!({
                    "type": "tool_result", "tool_use_id": output.call_id, "content": output.content,
                });
                if let Some(is_error) = output.is_error {
                    block["is_error"] = is_error.into();
                }
                ("user", vec![block])
            }
        };
        match messages.last_mut() {
            Some((last, content)) if *last == role => content.extend(blocks),
            _ => messages.push((role, blocks)),
        }
    }
    let message = |(role, content)| json!({"role": role, "content": content});
    messages.into_iter().map(message).collect()
}

fn anthropic_part(part: &Part) -> Value {
    match part {
        Part::Text(text) => json!({"type": "text", "text": text}),
        Part::ImageUrl(url) => {
            // A data URL travels inline as base64; any other URL is fetched by the provider.
            let source = match url
                .strip_prefix("data:")
                .and_then(|rest| rest.split_once(";base64,"))
            {
                Some((media_type, data)) => {
                    json!({"type": "base64", "media_type": media_type, "data": data})
                }
                None => json!({"type": "url", "url": url}),
            };
            json!({"type": "image", "source": source})
        }
    }
}

/// OpenAI Responses input items; a call's `arguments` stay the JSON string the model produced.
pub(super) fn responses(steps: &[Step]) -> Value {
    let item = |step: &Step| match step {
        Step::User(parts) => {
            let content: Vec<Value> = parts.iter().map(responses_part).collect();
            json!({"type": "message", "role": "user", "content": content})
        }
        // An earlier assistant text goes back as plain string content: the SDK's input message type
        // (EasyInputMessageParam) takes a string for the assistant, while `output_text` parts belong to output
        // messages, which need an id and a status this service never had.
        Step::AssistantText(text) => {
            json!({"type": "message", "role": "assistant", "content": text})
        }
        Step::Call(call) => json!({
            "type": "function_call", "call_id": call.id, "name": call.name, "arguments": call.arguments,
        }),
        Step::Output(output) => json!({
            "type": "function_call_output", "call_id": output.call_id, "output": output.content,
        }),
    };
    steps.iter().map(item).collect()
}

fn responses_part(part: &Part) -> Value {
    match part {
        Part::Text(text) => json!({"type": "input_text", "text": text}),
        Part::ImageUrl(url) => json!({"type": "input_image", "image_url": url}),
    }
}

/// Gemini contents. Roles alternate, as in [`anthropic`]: a turn's calls are one `model` content, and its results
/// one `user` content of `functionResponse` parts, each naming its call's function.
pub(super) fn gemini(steps: &[Step]) -> Value {
    let names: HashMap<&str, &str> = steps
        .iter()
        .filter_map(|step| match step {
            Step::Call(call) => Some((call.id, call.name)),
            _ => None,
        })
        .collect();
    let mut contents: Vec<(&str, Vec<Value>)> = Vec::new();
    for step in steps {
        let (role, parts) = match step {
            Step::User(parts) => ("user", parts.iter().map(gemini_part).collect()),
            Step::AssistantText(text) => ("model", vec![json!({"text": text})]),
            Step::Call(call) => {
                let args = match serde_json::from_str(&call.arguments) {
                    Ok(object @ Value::Object(_)) => object,
                    _ => json!({}),
                };
                let part =
                    json!({"functionCall": {"id": call.id, "name": call.name, "args": args}});
                ("model", vec![part])
            }
            Step::Output(output) => {
                let key = if output.is_error == Some(true) {
                    "error"
                } else {
                    "output"
                };
                let name = names.get(output.call_id).copied().unwrap_or_default();
                let part = json!({"functionResponse": {
                    "id": output.call_id, "name": name, "response": {key: output.content},
                }});
                ("user", vec![part])
            }
        };
        match contents.last_mut() {
            Some((last, content)) if *last == role => content.extend(parts),
            _ => contents.push((role, parts)),
        }
    }
    let content = |(role, parts)| json!({"role": role, "parts": parts});
    contents.into_iter().map(content).collect()
}

fn gemini_part(part: &Part) -> Value {
    match part {
        Part::Text(text) => json!({"text": text}),
        Part::ImageUrl(url) => match url
            .strip_prefix("data:")
            .and_then(|rest| rest.split_once(";base64,"))
        {
            Some((mime_type, data)) => json!({"inlineData": {"mimeType": mime_type, "data": data}}),
            None => json!({"fileData": {"fileUri": url}}),
        },
    }
}

/// A user message's content: a string is one text part; parts with no counterpart elsewhere (audio, files) go.
fn user_parts(message: &Value) -> Vec<Part<'_>> {
    let mut parts: Vec<Part> = match message.get("content") {
        Some(Value::String(text)) => vec![Part::Text(text)],
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|part| match str_at(part, "/type") {
                "text" => Some(Part::Text(str_at(part, "/text"))),
                "image_url" => image_url(part).map(Part::ImageUrl),
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    };
    parts.retain(|part| !matches!(part, Part::Text("")));
    parts
}

/// `image_url` is `{"url": …}` in current OpenAI chat and a bare string in older clients.
fn image_url(part: &Value) -> Option<&str> {
    let image = part.get("image_url")?;
    image.get("url").unwrap_or(image).as_str()
}

/// The system and developer texts, joined by blank lines; `None` when there are none.
fn system_text(transcript: &[Value]) -> Option<String> {
    let texts: Vec<String> = transcript
        .iter()
        .filter(|message| matches!(role_of(message), "system" | "developer"))
        .map(text_of)
        .filter(|text| !text.is_empty())
        .collect();
    (!texts.is_empty()).then(|| texts.join("\n\n"))
}

/// A message's text: its string content, or its text parts joined by newlines.
fn text_of(message: &Value) -> String {
    match message.get("content") {
        Some(Value::String(text)) => text.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .filter(|part| str_at(part, "/type") == "text")
            .map(|part| str_at(part, "/text"))
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

fn tool_calls(message: &Value) -> impl Iterator<Item = &Value> {
    let calls = message.get("tool_calls").and_then(Value::as_array);
    calls.into_iter().flatten()
}

fn role_of(message: &Value) -> &str {
    str_at(message, "/role")
}

fn str_at<'a>(value: &'a Value, pointer: &str) -> &'a str {
    value
        .pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::results::{denied, executed};
    use crate::domain::vocabulary::{DecidedBy::RunOwner, Effect};
    use ModelInputFormat::{Anthropic, OpenAiChat, OpenAiResponses};
    use proptest::prelude::*;

    fn call(id: &str, name: &str, arguments: &str) -> Value {
        json!({"id": id, "type": "function", "function": {"name": name, "arguments": arguments}})
    }

    /// Two turns: the first already answered inside the transcript, the second waiting for `results()`.
    fn transcript() -> Vec<Value> {
        vec![
            json!({"role": "system", "content": "You edit pages."}),
            json!({"role": "developer", "content": [{"type": "text", "text": "Be brief."}]}),
            json!({"role": "user", "content": "Tidy the home page."}),
            json!({"role": "assistant", "content": null, "tool_calls": [call("call_a", "read_page", r#"{"page": "home"}"#)]}),
            json!({"role": "tool", "tool_call_id": "call_a", "content": "Title: Home"}),
            json!({"role": "assistant", "content": "Two changes.", "tool_calls": [
                call("call_1", "update_title", r#"{"title": "Welcome"}"#),
                call("call_2", "read_stats", "{}"),
            ]}),
        ]
    }

    /// One denied call (an error) and one that ran.
    fn results() -> Vec<ToolResult> {
        vec![
            denied("call_1", "update_title", Effect::Write, RunOwner, None),
            executed("call_2", "read_stats", "42 visits".into(), false),
        ]
    }

    #[test]
    fn the_text_rendering_is_byte_for_byte_the_rendered_tree_in_every_format() {
        let stored = TranscriptText::of(&transcript());
        for format in ModelInputFormat::ALL {
            let pieces = render_text(format, &stored, &results(), &[]).unwrap();
            let text: Vec<u8> = pieces.concat();
            let tree = render(format, &transcript(), &results(), &[]);
            assert_eq!(
                String::from_utf8(text).unwrap(),
                serde_json::to_string(&tree).unwrap(),
                "{}",
                format.as_str()
            );
        }
    }

    #[test]
    fn tool_messages_written_without_a_tree_escape_their_text_as_the_tree_does() {
        let awkward = [
            "quote \" backslash \\ newline \n tab \t",
            "control \u{1} and \u{1f} and delete \u{7f}",
            "non-ASCII: ü, 漢字, 🦀, and the separators \u{2028}\u{2029}",
            "",
        ];
        let results: Vec<ToolResult> = awkward
            .iter()
            .enumerate()
            .map(|(i, content)| {
                executed(&format!("call_\"{i}"), "t", (*content).into(), i % 2 == 0)
            })
            .collect();
        let tree = serde_json::to_string(&tool_messages(&results)).unwrap();
        let text = String::from_utf8(tool_messages_text(&results)).unwrap();
        assert_eq!(format!("[{text}]"), tree);
        assert!(tool_messages_text(&[]).is_empty());
    }

    #[test]
    fn a_chat_rendering_splices_the_stored_text_without_copying_it() {
        let stored = TranscriptText::of(&transcript());
        let pieces = render_text(OpenAiChat, &stored, &results(), &[]).unwrap();
        assert!(
            pieces
                .iter()
                .any(|piece| piece.as_ptr() == stored.messages().as_ptr()),
            "one piece is the stored text itself"
        );
    }

    fn denial() -> String {
        results()[0].content.clone()
    }

    /// The call ids answered as results, in the order the output carries them.
    fn answered(output: &Value) -> Vec<&str> {
        let list = output
            .get("messages")
            .or(output.get("input"))
            .or(output.get("contents"));
        let entries = list.and_then(Value::as_array).expect("a list").iter();
        let nested = entries.flat_map(|e| {
            let inner = e["content"].as_array().or(e["parts"].as_array());
            std::iter::once(e).chain(inner.into_iter().flatten())
        });
        let ids = nested.filter_map(|e| match (e["role"].as_str(), e["type"].as_str()) {
            (Some("tool"), _) => e["tool_call_id"].as_str(),
            (_, Some("tool_result")) => e["tool_use_id"].as_str(),
            (_, Some("function_call_output")) => e["call_id"].as_str(),
            _ => e["functionResponse"]["id"].as_str(),
        });
        ids.collect()
    }

    #[test]
    fn the_openai_chat_input_is_the_transcript_then_one_tool_message_per_result() {
        let mut messages = transcript();
        messages.push(json!({"role": "tool", "tool_call_id": "call_1", "content": denial()}));
        messages.push(json!({"role": "tool", "tool_call_id": "call_2", "content": "42 visits"}));
        let expected = json!({"format": "openai-chat", "messages": messages});
        assert_eq!(render(OpenAiChat, &transcript(), &results(), &[]), expected);
    }

    #[test]
    fn the_anthropic_input_keeps_the_system_apart_and_answers_the_turn_in_one_user_message() {
        let expected = json!({"format": "anthropic", "system": "You edit pages.\n\nBe brief.", "messages": [
            {"role": "user", "content": [{"type": "text", "text": "Tidy the home page."}]},
            {"role": "assistant", "content": [
                {"type": "tool_use", "id": "call_a", "name": "read_page", "input": {"page": "home"}},
            ]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "call_a", "content": "Title: Home"}]},
            {"role": "assistant", "content": [
                {"type": "text", "text": "Two changes."},
                {"type": "tool_use", "id": "call_1", "name": "update_title", "input": {"title": "Welcome"}},
                {"type": "tool_use", "id": "call_2", "name": "read_stats", "input": {}},
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "call_1", "content": denial(), "is_error": true},
                {"type": "tool_result", "tool_use_id": "call_2", "content": "42 visits", "is_error": false},
            ]},
        ]});
        assert_eq!(render(Anthropic, &transcript(), &results(), &[]), expected);
    }

    #[test]
    fn the_responses_input_uses_function_call_items_and_keeps_the_system_apart() {
        let expected = json!({"format": "openai-responses", "instructions": "You edit pages.\n\nBe brief.", "input": [
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Tidy the home page."}]},
            {"type": "function_call", "call_id": "call_a", "name": "read_page", "arguments": r#"{"page": "home"}"#},
            {"type": "function_call_output", "call_id": "call_a", "output": "Title: Home"},
            {"type": "message", "role": "assistant", "content": "Two changes."},
            {"type": "function_call", "call_id": "call_1", "name": "update_title", "arguments": r#"{"title": "Welcome"}"#},
            {"type": "function_call", "call_id": "call_2", "name": "read_stats", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "call_1", "output": denial()},
            {"type": "function_call_output", "call_id": "call_2", "output": "42 visits"},
        ]});
        assert_eq!(
            render(OpenAiResponses, &transcript(), &results(), &[]),
            expected
        );
    }

    #[test]
    fn call_ids_and_order_are_the_same_in_every_format() {
        for format in ModelInputFormat::ALL {
            let output = render(format, &transcript(), &results(), &[]);
            let ids = answered(&output);
            assert_eq!(ids, ["call_a", "call_1", "call_2"], "{format:?}");
        }
    }

    #[test]
    fn anthropic_tool_use_input_is_the_arguments_parsed_to_an_object() {
        let output = render(Anthropic, &transcript(), &results(), &[]);
        let input = &output["messages"][3]["content"][1]["input"];
        assert_eq!(*input, json!({"title": "Welcome"}));
    }

    #[test]
    fn the_next_user_words_join_the_earlier_tool_results_in_one_anthropic_message() {
        let mut messages = transcript();
        messages.insert(5, json!({"role": "user", "content": "Also the title."}));
        let output = render(Anthropic, &messages, &results(), &[]);
        let expected = json!([
            {"type": "tool_result", "tool_use_id": "call_a", "content": "Title: Home"},
            {"type": "text", "text": "Also the title."},
        ]);
        assert_eq!(
            output["messages"][2]["content"], expected,
            "no is_error on an earlier turn"
        );
        assert_eq!(output["messages"][3]["role"], "assistant");
    }

    #[test]
    fn an_earlier_turn_resumed_here_keeps_its_error_flag_in_anthropic() {
        let earlier = [ToolResult {
            call_id: "call_a".into(),
            tool: "read_page".into(),
            outcome: crate::domain::vocabulary::Outcome::Denied,
            is_error: true,
            content: "Title: Home".into(),
            edited: false,
        }];
        let output = render(Anthropic, &transcript(), &results(), &earlier);
        assert_eq!(output["messages"][2]["content"][0]["is_error"], json!(true));
    }

    #[test]
    fn a_transcript_without_system_messages_has_no_system_key() {
        let no_system = &transcript()[2..];
        let anthropic = render(Anthropic, no_system, &results(), &[]);
        let responses = render(OpenAiResponses, no_system, &results(), &[]);
        assert!(anthropic.get("system").is_none() && responses.get("instructions").is_none());
    }

    #[test]
    fn user_images_become_image_blocks_where_possible() {
        let mut messages = transcript();
        messages[2] = json!({"role": "user", "content": [
            {"type": "text", "text": "This one?"},
            {"type": "image_url", "image_url": {"url": "https://x.test/a.png"}},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBOR"}},
            {"type": "input_audio", "input_audio": {"data": "UklG", "format": "wav"}},
        ]});
        let expected = json!([
            {"type": "text", "text": "This one?"},
            {"type": "image", "source": {"type": "url", "url": "https://x.test/a.png"}},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBOR"}},
        ]);
        assert_eq!(
            render(Anthropic, &messages, &results(), &[])["messages"][0]["content"],
            expected
        );
        let expected = json!({"type": "input_image", "image_url": "https://x.test/a.png"});
        let responses = render(OpenAiResponses, &messages, &results(), &[]);
        assert_eq!(responses["input"][0]["content"][1], expected);
    }

    #[test]
    fn every_format_name_parses_back_and_serializes_as_itself() {
        for format in ModelInputFormat::ALL {
            assert_eq!(ModelInputFormat::parse(format.as_str()), Some(format));
            assert_eq!(serde_json::to_value(format).unwrap(), format.as_str());
        }
        assert_eq!(ModelInputFormat::default(), OpenAiChat);
        assert_eq!(ModelInputFormat::parse("claude"), None);
    }

    proptest! {
        #[test]
        fn every_format_answers_each_call_exactly_once_in_order(
            ids in prop::collection::hash_set("[A-Za-z0-9_-]{1,24}", 1..12)
                .prop_map(|ids| ids.into_iter().collect::<Vec<String>>())
                .prop_shuffle(),
        ) {
            let calls: Vec<Value> = ids.iter().map(|id| call(id, "x", "{}")).collect();
            let messages = vec![
                json!({"role": "user", "content": "go"}),
                json!({"role": "assistant", "content": null, "tool_calls": calls}),
            ];
            let results: Vec<ToolResult> = ids.iter().map(|id| executed(id, "x", format!("done {id}"), false)).collect();
            for format in ModelInputFormat::ALL {
                let output = render(format, &messages, &results, &[]);
                prop_assert_eq!(answered(&output), ids.iter().map(String::as_str).collect::<Vec<_>>());
            }
        }
    }
}
