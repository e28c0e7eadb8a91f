//! A conversation as steps (user words, assistant text, tool calls, tool outputs), read once from a transcript and
//! its results, and written in each provider format: read by `model_input` from OpenAI chat messages and by
//! `translate` from a native transcript, so both write the other formats the same way.

use std::collections::HashMap;

use serde_json::{Value, json};

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

/// The names of the tools the steps call, in order: what a translation writes as function names.
pub(super) fn call_names<'s>(steps: &'s [Step]) -> impl Iterator<Item = &'s str> {
    steps.iter().filter_map(|step| match step {
        Step::Call(call) => Some(call.name),
        _ => None,
    })
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
