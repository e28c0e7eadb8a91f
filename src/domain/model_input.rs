//! The resumed model input (docs/design.md §7): the transcript plus one result per pending call, in four formats.
//!
//! A run answers in the format it was registered in, its stored text passed through unchanged (`openai-chat` here,
//! the provider formats in `native_input`). An OpenAI chat run in `anthropic`, `openai-responses` or `gemini` is a
//! translation of its messages; content with no counterpart in the target format (audio, files) is left out, as
//! before runs had formats of their own. All formats carry the same results, in the turn's order.

use std::collections::HashMap;

use serde::Serialize;
use serde_json::{Map, Value, json};

use bytes::Bytes;

pub use super::model_format::{ModelInputFormat, RenderError};
use super::native_input;
use super::provider_names::refuse_unfit_names;
use super::results::ToolResult;
use super::steps::{Call, Output, Part, Step, anthropic, gemini, responses};
use super::transcript_text::TranscriptText;
use super::translate;

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
        let messages = transcript.values()?;
        // A name the run may hold (§3) but the target's provider refuses (`provider_names`): refused, not sent.
        refuse_unfit_names(called_names(&messages), format)?;
        let tree = render(format, &messages, results, earlier_results);
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

/// The names of the tools the assistant messages call, in order: what a translation writes as function names.
fn called_names(transcript: &[Value]) -> impl Iterator<Item = &str> {
    transcript
        .iter()
        .filter(|message| role_of(message) == "assistant")
        .flat_map(tool_calls)
        .map(|call| str_at(call, "/function/name"))
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
