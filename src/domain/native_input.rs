//! The resumed model input of a run in its own format (docs/design.md §14): the registered members and list as the loop
//! sent them, then the results in that format's shape, as pieces of JSON text.
//!
//! Nothing the loop sent is parsed here: the stored texts are spliced in as they are, like the OpenAI chat
//! transcript, so a deny costs what its results cost whatever the format. The results are written from
//! structs whose fields are in the order the answer shows them, so the same results always give the same bytes.

use bytes::Bytes;
use serde::Serialize;

use super::model_format::ModelInputFormat;
use super::native_turn::{is_given_gemini_id, members};
use super::results::ToolResult;
use super::transcript_text::TranscriptText;

/// `{"type":"tool_result",…}`: one block of the user message that answers an Anthropic turn.
#[derive(Serialize)]
struct AnthropicResult<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    tool_use_id: &'a str,
    content: &'a str,
    is_error: bool,
}

/// `{"type":"function_call_output",…}`: one Responses input item per call.
#[derive(Serialize)]
struct FunctionCallOutput<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    call_id: &'a str,
    output: &'a str,
}

/// `{"functionResponse":{…}}`: one part of the user content that answers a Gemini turn.
#[derive(Serialize)]
struct GeminiPart<'a> {
    #[serde(rename = "functionResponse")]
    function_response: FunctionResponse<'a>,
}

#[derive(Serialize)]
struct FunctionResponse<'a> {
    /// Only where the call had an id of its own (a call without one was given `call_{n}` by the service).
    #[serde(skip_serializing_if = "Option::is_none")]
    id: Option<&'a str>,
    name: &'a str,
    response: GeminiResponse<'a>,
}

/// `{"output": content}`, or `{"error": content}` for a result that is an error.
#[derive(Serialize)]
enum GeminiResponse<'a> {
    #[serde(rename = "output")]
    Output(&'a str),
    #[serde(rename = "error")]
    Error(&'a str),
}

/// The entries that answer a turn in `format`, comma-separated, without brackets: what follows the turn in the list.
/// OpenAI chat's tool messages are `model_input`'s own.
pub fn results_text(format: ModelInputFormat, results: &[ToolResult]) -> Vec<u8> {
    let mut text = Vec::with_capacity(results.iter().map(|r| r.content.len() + 96).sum());
    let (open, close): (&[u8], &[u8]) = match format {
        ModelInputFormat::Anthropic => (br#"{"role":"user","content":["#, b"]}"),
        ModelInputFormat::Gemini => (br#"{"role":"user","parts":["#, b"]}"),
        ModelInputFormat::OpenAiResponses | ModelInputFormat::OpenAiChat => (b"", b""),
    };
    text.extend_from_slice(open);
    for (index, result) in results.iter().enumerate() {
        if index > 0 {
            text.push(b',');
        }
        // Structs of strings and booleans always serialize.
        let written = match format {
            ModelInputFormat::Anthropic => serde_json::to_writer(
                &mut text,
                &AnthropicResult {
                    kind: "tool_result",
                    tool_use_id: &result.call_id,
                    content: &result.content,
                    is_error: result.is_error,
                },
            ),
            ModelInputFormat::Gemini => serde_json::to_writer(
                &mut text,
                &GeminiPart {
                    function_response: FunctionResponse {
                        id: (!is_given_gemini_id(&result.call_id))
                            .then_some(result.call_id.as_str()),
                        name: &result.tool,
                        response: if result.is_error {
                            GeminiResponse::Error(&result.content)
                        } else {
                            GeminiResponse::Output(&result.content)
                        },
                    },
                },
            ),
            ModelInputFormat::OpenAiResponses | ModelInputFormat::OpenAiChat => {
                serde_json::to_writer(
                    &mut text,
                    &FunctionCallOutput {
                        kind: "function_call_output",
                        call_id: &result.call_id,
                        output: &result.content,
                    },
                )
            }
        };
        written.expect("a struct of strings always serializes");
    }
    text.extend_from_slice(close);
    text
}

/// The model input of a native run in its own format, as pieces: `{"format":…,"system":…,"messages":[` (with the
/// format's member names), the stored list's entries, the results, `]}`.
pub fn render_text(transcript: &TranscriptText, results: &[ToolResult]) -> Vec<Bytes> {
    let format = transcript.format();
    let (list, system) = members(format);
    let mut head = Vec::with_capacity(64);
    head.extend_from_slice(br#"{"format":""#);
    head.extend_from_slice(format.as_str().as_bytes());
    head.extend_from_slice(b"\",");
    let mut pieces = Vec::with_capacity(7);
    if let Some(text) = transcript.system() {
        head.push(b'"');
        head.extend_from_slice(system.as_bytes());
        head.extend_from_slice(b"\":");
        pieces.push(Bytes::from(head));
        pieces.push(text.clone());
        head = b",".to_vec();
    }
    head.push(b'"');
    head.extend_from_slice(list.as_bytes());
    head.extend_from_slice(b"\":[");
    pieces.push(Bytes::from(head));
    pieces.push(transcript.messages());
    let answers = Bytes::from(results_text(format, results));
    if !transcript.is_empty() && !answers.is_empty() {
        pieces.push(Bytes::from_static(b","));
    }
    pieces.push(answers);
    pieces.push(Bytes::from_static(b"]}"));
    pieces
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::results::{denied, executed};
    use crate::domain::vocabulary::{DecidedBy::RunOwner, Effect};
    use serde_json::value::RawValue;
    use serde_json::{Value, json};

    fn results() -> Vec<ToolResult> {
        vec![
            denied("call_0", "update", Effect::Write, RunOwner, None),
            executed("fc-1", "read", "42 visits".into(), false),
        ]
    }

    fn stored(format: ModelInputFormat, list: &str, system: Option<&str>) -> TranscriptText {
        let list: Box<RawValue> = serde_json::from_str(list).unwrap();
        let system: Option<Box<RawValue>> = system.map(|text| serde_json::from_str(text).unwrap());
        TranscriptText::registered(format, &list, system.as_deref()).unwrap()
    }

    fn text(pieces: Vec<Bytes>) -> String {
        String::from_utf8(pieces.concat()).unwrap()
    }

    #[test]
    fn an_anthropic_input_is_the_registered_text_then_one_user_message_of_tool_results() {
        let list = r#"[{"role":"assistant","content":[{"type":"tool_use","id":"call_0","name":"update","input":{"w":1.50}},{"type":"tool_use","id":"fc-1","name":"read","input":{}}]}]"#;
        let transcript = stored(
            ModelInputFormat::Anthropic,
            list,
            Some(r#"[{"type":"text","text":"s","cache_control":{"type":"ephemeral"}}]"#),
        );
        let out = text(render_text(&transcript, &results()));
        assert!(out.starts_with(r#"{"format":"anthropic","system":[{"type":"text","text":"s","cache_control":{"type":"ephemeral"}}],"messages":[{"role":"assistant""#));
        assert!(
            out.contains(r#""input":{"w":1.50}"#),
            "number forms are kept: {out}"
        );
        let value: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(
            value["messages"][1],
            json!({"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "call_0", "content": results()[0].content, "is_error": true},
                {"type": "tool_result", "tool_use_id": "fc-1", "content": "42 visits", "is_error": false},
            ]})
        );
    }

    #[test]
    fn a_responses_input_appends_one_function_call_output_item_per_call() {
        let transcript = stored(
            ModelInputFormat::OpenAiResponses,
            r#"[{"role":"user","content":"go"}]"#,
            None,
        );
        let value: Value =
            serde_json::from_str(&text(render_text(&transcript, &results()))).unwrap();
        assert!(value.get("instructions").is_none());
        assert_eq!(
            value["input"][2],
            json!({"type": "function_call_output", "call_id": "fc-1", "output": "42 visits"})
        );
    }

    #[test]
    fn a_gemini_input_answers_in_one_user_content_with_ids_only_where_the_call_had_one() {
        let transcript = stored(
            ModelInputFormat::Gemini,
            r#"[{"role":"model","parts":[]}]"#,
            Some(r#"{"parts":[{"text":"s"}]}"#),
        );
        let value: Value =
            serde_json::from_str(&text(render_text(&transcript, &results()))).unwrap();
        assert_eq!(
            value["system_instruction"],
            json!({"parts": [{"text": "s"}]})
        );
        assert_eq!(
            value["contents"][1],
            json!({"role": "user", "parts": [
                {"functionResponse": {"name": "update", "response": {"error": results()[0].content}}},
                {"functionResponse": {"id": "fc-1", "name": "read", "response": {"output": "42 visits"}}},
            ]})
        );
    }

    #[test]
    fn the_stored_list_is_spliced_in_without_being_copied() {
        let transcript = stored(
            ModelInputFormat::Anthropic,
            r#"[{"role":"user","content":"x"}]"#,
            None,
        );
        let pieces = render_text(&transcript, &results());
        assert!(
            pieces
                .iter()
                .any(|piece| piece.as_ptr() == transcript.messages().as_ptr())
        );
    }
}
