//! A run registered in a provider's own format, asked for in another (`?format=`, docs/design.md §14): a translation,
//! given only where nothing of the transcript would be dropped.
//!
//! The transcript is read into the steps every format is written from (`model_input`), accepting only what has a
//! counterpart in all of them: text, tool calls and tool results, each with exactly the members the steps carry. The
//! first element that has none (a thinking block, a reasoning item, a thought signature, a `cache_control`, an item's
//! `id`) is named in the refusal, so the loop knows why its run answers only in its own format.
//!
//! One file, one job: a single `Reader` takes each format's entries into the same steps and names the first element
//! that has no counterpart, so the three readings refuse alike; its last hundred lines are its tests.

use std::borrow::Cow;

use serde_json::{Value, json};

use super::model_format::{ModelInputFormat, RenderError};
use super::native_turn::{canonical, function_call};
use super::provider_names::refuse_unfit_names;
use super::results::ToolResult;
use super::steps::{Call, Output, Part, Step, anthropic, call_names, gemini, responses};
use super::transcript_text::TranscriptText;

type Refusal = RenderError;

fn refuse<T>(place: String, what: &str, target: ModelInputFormat) -> Result<T, Refusal> {
    Err(RenderError::NotRepresentable(format!(
        "{place} ({what}) has no counterpart in {}; ask for the run's own format, {}",
        target.as_str(),
        "or another one once nothing of the kind is left in the transcript"
    )))
}

/// The model input of a native run in `target`, a format other than its own; `NotRepresentable` naming the first
/// element that would be lost.
pub fn render(
    target: ModelInputFormat,
    transcript: &TranscriptText,
    results: &[ToolResult],
) -> Result<Value, Refusal> {
    let list = transcript.values()?;
    let system: Option<Value> = match transcript.system_str() {
        Some(text) => Some(serde_json::from_str(text).map_err(|error| {
            RenderError::Corrupt(super::model_format::NotATranscript(error.to_string()))
        })?),
        None => None,
    };
    let source = transcript.format();
    let mut reader = Reader {
        target,
        steps: Vec::new(),
        last_calls: Vec::new(),
    };
    let system_text = match &system {
        Some(system) => Some(reader.system(source, system)?),
        None => None,
    };
    let pending: Vec<&str> = results
        .iter()
        .map(|result| result.call_id.as_str())
        .collect();
    for (index, entry) in list.iter().enumerate() {
        let last = index + 1 == list.len();
        match source {
            ModelInputFormat::Anthropic => reader.anthropic_message(index, entry)?,
            ModelInputFormat::OpenAiResponses => reader.responses_item(index, entry)?,
            ModelInputFormat::Gemini => {
                reader.gemini_content(index, entry, last.then_some(&pending[..]))?
            }
            ModelInputFormat::OpenAiChat => {}
        }
    }
    let mut steps = reader.steps;
    refuse_unfit_names(call_names(&steps), target)?;
    steps.extend(results.iter().map(|result| {
        Step::Output(Output {
            call_id: &result.call_id,
            content: result.content.clone(),
            is_error: Some(result.is_error),
        })
    }));
    let mut out = serde_json::Map::new();
    out.insert("format".into(), target.as_str().into());
    let (system_key, list_key, written) = match target {
        ModelInputFormat::OpenAiChat => ("", "messages", chat(system_text.as_deref(), &steps)),
        ModelInputFormat::Anthropic => ("system", "messages", anthropic(&steps)),
        ModelInputFormat::OpenAiResponses => ("instructions", "input", responses(&steps)),
        ModelInputFormat::Gemini => ("system_instruction", "contents", gemini(&steps)),
    };
    if let Some(text) = system_text.filter(|_| !system_key.is_empty()) {
        let value = match target {
            ModelInputFormat::Gemini => json!({"parts": [{"text": text}]}),
            _ => Value::from(text),
        };
        out.insert(system_key.into(), value);
    }
    out.insert(list_key.into(), written);
    Ok(Value::Object(out))
}

/// OpenAI chat messages: the system text first, an assistant's text and calls in one message, one tool message per
/// output.
fn chat(system: Option<&str>, steps: &[Step]) -> Value {
    let mut messages: Vec<Value> = system
        .map(|text| json!({"role": "system", "content": text}))
        .into_iter()
        .collect();
    for step in steps {
        match step {
            Step::User(parts) => {
                let content = match parts.as_slice() {
                    [Part::Text(text)] => Value::from(*text),
                    parts => parts
                        .iter()
                        .map(|part| match part {
                            Part::Text(text) => json!({"type": "text", "text": text}),
                            Part::ImageUrl(url) => {
                                json!({"type": "image_url", "image_url": {"url": url}})
                            }
                        })
                        .collect(),
                };
                messages.push(json!({"role": "user", "content": content}));
            }
            Step::AssistantText(text) => {
                let continues = messages.last().is_some_and(|last| {
                    last["role"] == "assistant" && last.get("tool_calls").is_none()
                });
                if continues {
                    let last = messages.last_mut().expect("checked");
                    let earlier = last["content"].take();
                    let mut parts = match earlier {
                        Value::String(earlier) => vec![json!({"type": "text", "text": earlier})],
                        Value::Array(parts) => parts,
                        _ => Vec::new(),
                    };
                    parts.push(json!({"type": "text", "text": text}));
                    last["content"] = Value::Array(parts);
                } else {
                    messages.push(json!({"role": "assistant", "content": text}));
                }
            }
            Step::Call(call) => {
                let entry = json!({"id": call.id, "type": "function", "function": {"name": call.name, "arguments": call.arguments}});
                match messages.last_mut() {
                    Some(last) if last["role"] == "assistant" => match last.get_mut("tool_calls") {
                        Some(Value::Array(calls)) => calls.push(entry),
                        _ => {
                            last["tool_calls"] = json!([entry]);
                        }
                    },
                    _ => messages
                        .push(json!({"role": "assistant", "content": null, "tool_calls": [entry]})),
                }
            }
            Step::Output(output) => {
                messages.push(json!({"role": "tool", "tool_call_id": output.call_id, "content": output.content}));
            }
        }
    }
    Value::Array(messages)
}

/// Reads a native list into steps, strictly.
struct Reader<'a> {
    target: ModelInputFormat,
    steps: Vec<Step<'a>>,
    /// The ids of the calls of the last model content read (Gemini pairs a response without an id by position).
    last_calls: Vec<&'a str>,
}

/// Whether `value` is an object holding no member outside `allowed`; otherwise the first one that is.
fn extra_member<'v>(value: &'v Value, allowed: &[&str]) -> Option<&'v str> {
    value
        .as_object()?
        .keys()
        .map(String::as_str)
        .find(|key| !allowed.contains(key))
}

fn text_of(value: &Value) -> Option<&str> {
    value.as_str()
}

impl<'a> Reader<'a> {
    fn system(&self, source: ModelInputFormat, system: &Value) -> Result<String, Refusal> {
        let target = self.target;
        match (source, system) {
            (_, Value::String(text)) => Ok(text.clone()),
            (ModelInputFormat::Anthropic, Value::Array(blocks)) => {
                let mut texts = Vec::new();
                for (at, block) in blocks.iter().enumerate() {
                    if let Some(member) = extra_member(block, &["type", "text"]) {
                        return refuse(
                            format!("system[{at}].{member}"),
                            "a member of a system block",
                            target,
                        );
                    }
                    texts.push(block["text"].as_str().unwrap_or_default().to_owned());
                }
                Ok(texts.join("\n\n"))
            }
            (ModelInputFormat::Gemini, Value::Object(_)) => {
                if let Some(member) = extra_member(system, &["parts", "role"]) {
                    return refuse(
                        format!("system_instruction.{member}"),
                        "a member of the system instruction",
                        target,
                    );
                }
                let parts = system["parts"]
                    .as_array()
                    .map(Vec::as_slice)
                    .unwrap_or_default();
                let mut texts = Vec::new();
                for (at, part) in parts.iter().enumerate() {
                    match (
                        extra_member(part, &["text"]),
                        part.get("text").and_then(text_of),
                    ) {
                        (None, Some(text)) => texts.push(text.to_owned()),
                        _ => {
                            return refuse(
                                format!("system_instruction.parts[{at}]"),
                                "a part that is not plain text",
                                target,
                            );
                        }
                    }
                }
                Ok(texts.join("\n\n"))
            }
            _ => refuse(
                "the system member".into(),
                "a system of another shape",
                target,
            ),
        }
    }

    fn anthropic_message(&mut self, index: usize, message: &'a Value) -> Result<(), Refusal> {
        let target = self.target;
        if let Some(member) = extra_member(message, &["role", "content"]) {
            return refuse(
                format!("messages[{index}].{member}"),
                "a member of a message",
                target,
            );
        }
        let assistant = message["role"] == "assistant";
        let blocks = match &message["content"] {
            Value::String(text) => {
                self.text(assistant, text);
                return Ok(());
            }
            Value::Array(blocks) => blocks,
            _ => return Ok(()),
        };
        for (at, block) in blocks.iter().enumerate() {
            let place = format!("messages[{index}].content[{at}]");
            let kind = block["type"].as_str().unwrap_or_default();
            match kind {
                "text" if extra_member(block, &["type", "text"]).is_none() => {
                    self.text(assistant, block["text"].as_str().unwrap_or_default());
                }
                "tool_use"
                    if assistant
                        && extra_member(block, &["type", "id", "name", "input"]).is_none() =>
                {
                    self.steps.push(Step::Call(Call {
                        id: block["id"].as_str().unwrap_or_default(),
                        name: block["name"].as_str().unwrap_or_default(),
                        arguments: Cow::Owned(canonical(&block["input"])),
                    }));
                }
                "tool_result"
                    if !assistant
                        && extra_member(block, &["type", "tool_use_id", "content", "is_error"])
                            .is_none() =>
                {
                    let content = match &block["content"] {
                        Value::String(text) => text.clone(),
                        Value::Null => String::new(),
                        Value::Array(parts)
                            if parts.len() == 1
                                && extra_member(&parts[0], &["type", "text"]).is_none()
                                && parts[0]["type"] == "text" =>
                        {
                            parts[0]["text"].as_str().unwrap_or_default().to_owned()
                        }
                        _ => {
                            return refuse(
                                place,
                                "a tool_result whose content is not one text",
                                target,
                            );
                        }
                    };
                    self.steps.push(Step::Output(Output {
                        call_id: block["tool_use_id"].as_str().unwrap_or_default(),
                        content,
                        is_error: block["is_error"].as_bool(),
                    }));
                }
                _ => return refuse(place, &describe(kind, "block"), target),
            }
        }
        Ok(())
    }

    fn responses_item(&mut self, index: usize, item: &'a Value) -> Result<(), Refusal> {
        let target = self.target;
        let place = format!("input[{index}]");
        let kind = item
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or("message");
        match kind {
            "message" => {
                if let Some(member) = extra_member(item, &["type", "role", "content"]) {
                    return refuse(
                        format!("{place}.{member}"),
                        "a member of a message item",
                        target,
                    );
                }
                let role = item["role"].as_str().unwrap_or_default();
                let assistant = match role {
                    "user" => false,
                    "assistant" => true,
                    _ => return refuse(place, &format!("a {role} message"), target),
                };
                let text_kind = if assistant {
                    "output_text"
                } else {
                    "input_text"
                };
                match &item["content"] {
                    Value::String(text) => self.text(assistant, text),
                    Value::Array(parts) => {
                        for (at, part) in parts.iter().enumerate() {
                            if part["type"] != text_kind
                                || extra_member(part, &["type", "text"]).is_some()
                            {
                                return refuse(
                                    format!("{place}.content[{at}]"),
                                    "a part that is not plain text",
                                    target,
                                );
                            }
                            self.text(assistant, part["text"].as_str().unwrap_or_default());
                        }
                    }
                    _ => return refuse(place, "a message without text", target),
                }
            }
            "function_call"
                if extra_member(item, &["type", "call_id", "name", "arguments"]).is_none() =>
            {
                self.steps.push(Step::Call(Call {
                    id: item["call_id"].as_str().unwrap_or_default(),
                    name: item["name"].as_str().unwrap_or_default(),
                    arguments: Cow::Borrowed(item["arguments"].as_str().unwrap_or_default()),
                }));
            }
            "function_call_output"
                if extra_member(item, &["type", "call_id", "output"]).is_none()
                    && item["output"].is_string() =>
            {
                self.steps.push(Step::Output(Output {
                    call_id: item["call_id"].as_str().unwrap_or_default(),
                    content: item["output"].as_str().unwrap_or_default().to_owned(),
                    is_error: None,
                }));
            }
            "function_call" | "function_call_output" => {
                let member =
                    extra_member(item, &["type", "call_id", "name", "arguments", "output"]);
                let at = member.map_or(place.clone(), |member| format!("{place}.{member}"));
                return refuse(at, &format!("a member of a {kind} item"), target);
            }
            _ => return refuse(place, &describe(kind, "item"), target),
        }
        Ok(())
    }

    /// `pending`: for the last content, the ids the service gave its calls, in order.
    fn gemini_content(
        &mut self,
        index: usize,
        content: &'a Value,
        pending: Option<&[&'a str]>,
    ) -> Result<(), Refusal> {
        let target = self.target;
        if let Some(member) = extra_member(content, &["role", "parts"]) {
            return refuse(
                format!("contents[{index}].{member}"),
                "a member of a content",
                target,
            );
        }
        let model = content["role"] == "model";
        let parts = content["parts"]
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or_default();
        let mut calls = Vec::new();
        let mut responses = 0;
        for (at, part) in parts.iter().enumerate() {
            let place = format!("contents[{index}].parts[{at}]");
            if let Some(text) = part.get("text").and_then(text_of) {
                if let Some(member) = extra_member(part, &["text"]) {
                    return refuse(
                        format!("{place}.{member}"),
                        "a member of a text part",
                        target,
                    );
                }
                self.text(model, text);
            } else if let Some(call) = function_call(part).filter(|_| model) {
                if let Some(member) = extra_member(part, &["functionCall", "function_call"]) {
                    return refuse(
                        format!("{place}.{member}"),
                        "a member of a functionCall part",
                        target,
                    );
                }
                let id = match (call.get("id").and_then(Value::as_str), pending) {
                    (Some(id), _) => id,
                    (None, Some(pending)) => pending.get(calls.len()).copied().unwrap_or_default(),
                    (None, None) => {
                        return refuse(
                            place,
                            "a functionCall without an id, which the other formats pair with its result by id",
                            target,
                        );
                    }
                };
                calls.push(id);
                let args = call.get("args").cloned().unwrap_or_else(|| json!({}));
                self.steps.push(Step::Call(Call {
                    id,
                    name: call["name"].as_str().unwrap_or_default(),
                    arguments: Cow::Owned(canonical(&args)),
                }));
            } else if let Some(response) = part
                .get("functionResponse")
                .or_else(|| part.get("function_response"))
                .filter(|_| !model)
            {
                let result = response
                    .get("response")
                    .and_then(|r| r.as_object())
                    .filter(|r| r.len() == 1);
                let (key, text) = match result.and_then(|r| r.iter().next()) {
                    Some((key, Value::String(text))) if key == "output" || key == "error" => {
                        (key.as_str(), text)
                    }
                    _ => {
                        return refuse(
                            place,
                            "a functionResponse whose response is not one output or error text",
                            target,
                        );
                    }
                };
                let id = match response.get("id").and_then(Value::as_str) {
                    Some(id) => id,
                    None => match self.last_calls.get(responses) {
                        Some(id) => *id,
                        None => {
                            return refuse(
                                place,
                                "a functionResponse without an id and without its call",
                                target,
                            );
                        }
                    },
                };
                responses += 1;
                self.steps.push(Step::Output(Output {
                    call_id: id,
                    content: text.clone(),
                    is_error: Some(key == "error"),
                }));
            } else {
                let what = part
                    .as_object()
                    .and_then(|part| part.keys().next())
                    .map_or("a part".to_owned(), |key| format!("a {key} part"));
                return refuse(place, &what, target);
            }
        }
        if model {
            self.last_calls = calls;
        }
        Ok(())
    }

    fn text(&mut self, assistant: bool, text: &'a str) {
        if text.is_empty() {
            return;
        }
        if assistant {
            self.steps.push(Step::AssistantText(text.to_owned()));
        } else {
            self.steps.push(Step::User(vec![Part::Text(text)]));
        }
    }
}

fn describe(kind: &str, noun: &str) -> String {
    if kind.is_empty() {
        format!("a {noun} without a type")
    } else {
        format!("a {kind} {noun}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::results::executed;
    use serde_json::value::RawValue;

    fn stored(format: ModelInputFormat, list: &str, system: Option<&str>) -> TranscriptText {
        let list: Box<RawValue> = serde_json::from_str(list).unwrap();
        let system: Option<Box<RawValue>> = system.map(|text| serde_json::from_str(text).unwrap());
        TranscriptText::registered(format, &list, system.as_deref()).unwrap()
    }

    #[test]
    fn a_plain_anthropic_run_translates_to_openai_chat() {
        let transcript = stored(
            ModelInputFormat::Anthropic,
            r#"[{"role":"user","content":"go"},{"role":"assistant","content":[{"type":"text","text":"ok"},{"type":"tool_use","id":"t1","name":"x","input":{"b":1,"a":2}}]}]"#,
            Some(r#""be brief""#),
        );
        let results = [executed("t1", "x", "done".into(), false)];
        let out = render(ModelInputFormat::OpenAiChat, &transcript, &results).unwrap();
        assert_eq!(
            out,
            json!({"format": "openai-chat", "messages": [
                {"role": "system", "content": "be brief"},
                {"role": "user", "content": "go"},
                {"role": "assistant", "content": "ok", "tool_calls": [
                    {"id": "t1", "type": "function", "function": {"name": "x", "arguments": "{\"a\":2,\"b\":1}"}},
                ]},
                {"role": "tool", "tool_call_id": "t1", "content": "done"},
            ]})
        );
    }

    #[test]
    fn a_thinking_block_asked_as_openai_chat_is_not_representable_and_named() {
        let transcript = stored(
            ModelInputFormat::Anthropic,
            r#"[{"role":"user","content":"go"},{"role":"assistant","content":[{"type":"thinking","thinking":"…","signature":"s"},{"type":"tool_use","id":"t1","name":"x","input":{}}]}]"#,
            None,
        );
        let error = render(ModelInputFormat::OpenAiChat, &transcript, &[]).unwrap_err();
        assert!(
            error.to_string().starts_with(
                "messages[1].content[0] (a thinking block) has no counterpart in openai-chat"
            ),
            "{error}"
        );
    }

    #[test]
    fn a_reasoning_item_and_a_thought_signature_are_named_too() {
        let transcript = stored(
            ModelInputFormat::OpenAiResponses,
            r#"[{"role":"user","content":"go"},{"type":"reasoning","id":"rs","summary":[]},{"type":"function_call","call_id":"c","name":"x","arguments":"{}"}]"#,
            None,
        );
        let error = render(ModelInputFormat::Anthropic, &transcript, &[]).unwrap_err();
        assert!(
            error.to_string().starts_with("input[1] (a reasoning item)"),
            "{error}"
        );
        let transcript = stored(
            ModelInputFormat::Gemini,
            r#"[{"role":"user","parts":[{"text":"go"}]},{"role":"model","parts":[{"functionCall":{"name":"x","args":{}},"thoughtSignature":"sig"}]}]"#,
            None,
        );
        let error = render(ModelInputFormat::OpenAiChat, &transcript, &[]).unwrap_err();
        assert!(
            error
                .to_string()
                .starts_with("contents[1].parts[0].thoughtSignature"),
            "{error}"
        );
    }

    #[test]
    fn a_plain_gemini_run_translates_with_its_pending_calls_paired_by_position() {
        let transcript = stored(
            ModelInputFormat::Gemini,
            r#"[{"role":"user","parts":[{"text":"go"}]},{"role":"model","parts":[{"functionCall":{"name":"x","args":{"a":1}}}]}]"#,
            Some(r#"{"parts":[{"text":"sys"}]}"#),
        );
        let results = [executed("call_0", "x", "done".into(), false)];
        let out = render(ModelInputFormat::OpenAiResponses, &transcript, &results).unwrap();
        assert_eq!(
            out,
            json!({"format": "openai-responses", "instructions": "sys", "input": [
                {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "go"}]},
                {"type": "function_call", "call_id": "call_0", "name": "x", "arguments": "{\"a\":1}"},
                {"type": "function_call_output", "call_id": "call_0", "output": "done"},
            ]})
        );
    }
}
