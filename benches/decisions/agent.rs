//! The transcripts of the `straightforward` and `langgraph` phases: an agent's conversation of a chosen number of
//! messages ending with a turn of two pending calls (the write tool and the read tool), its assistant answers
//! lengthened with reasoning until the transcript reaches a chosen size, as a real agent's are (41 messages of
//! about 35 KB in issue 43's example; 3 messages for the short end).

use approval_resume::domain::results::denial_text;
use approval_resume::vocabulary::{DecidedBy, Effect};
use serde_json::{Value, json};

use crate::transcript;

/// The two sizes the issue names: (messages, bytes of the messages array at least; 0: as written).
pub const SIZES: [(usize, usize); 2] = [(41, 35_000), (3, 0)];

/// Calls of the pending turn.
pub const CALLS: usize = 2;

/// `messages` messages with `CALLS` pending calls, whose JSON is at least `bytes` long: the reasoning is spread
/// over the assistant's answers (the pending turn and the system prompt stay as `transcript` writes them).
pub fn messages(messages: usize, bytes: usize) -> Vec<Value> {
    let mut out = transcript::transcript(messages, CALLS, "r");
    let answers: Vec<usize> = (0..out.len() - 1)
        .filter(|&i| out[i]["role"] == "assistant" && out[i]["content"].is_string())
        .collect();
    let sentence = "The user wants a shorter meta description; I read the page first, keep the opening hours \
exact, stay under 155 characters and keep the contact address, because search engines cut the rest. ";
    let mut round = 0;
    while !answers.is_empty() && length(&out) < bytes {
        let i = answers[round % answers.len()];
        let text = format!(
            "{}{sentence}",
            out[i]["content"].as_str().unwrap_or_default()
        );
        out[i]["content"] = Value::from(text);
        round += 1;
    }
    out
}

/// The run's `messages` member as registered (and as the floor stores it).
pub fn json(messages: &[Value]) -> String {
    serde_json::to_string(messages).expect("JSON values serialize")
}

fn length(messages: &[Value]) -> usize {
    json(messages).len()
}

/// The ids and tools of the pending calls, in order.
pub fn pending_calls(messages: &[Value]) -> Vec<(String, String)> {
    messages
        .last()
        .and_then(|turn| turn["tool_calls"].as_array())
        .map(|calls| {
            calls
                .iter()
                .map(|call| {
                    (
                        call["id"].as_str().unwrap_or_default().to_owned(),
                        call["function"]["name"]
                            .as_str()
                            .unwrap_or_default()
                            .to_owned(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

/// What a deny by the run's owner appends: one tool message per pending call, with the service's own denial text
/// (so the floor and LangGraph append the same bytes as the service).
pub fn denials(messages: &[Value]) -> Vec<Value> {
    pending_calls(messages)
        .iter()
        .map(|(id, tool)| {
            let effect = if tool == transcript::WRITE_TOOL {
                Effect::Write
            } else {
                Effect::Read
            };
            let content = denial_text(tool, effect, DecidedBy::RunOwner, None);
            json!({"role": "tool", "tool_call_id": id, "content": content})
        })
        .collect()
}
