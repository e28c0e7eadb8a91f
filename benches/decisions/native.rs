//! Registrations of the `native` phase (docs/design.md §14): an Anthropic run with extended thinking and an OpenAI chat
//! run of the same conversation and the same size, so that a deny of each can be compared.
//!
//! Both hold rounds of a question, an assistant turn that reasons and calls the read tool, its result and an
//! answer, then the pending turn with one call of the write tool, like `Shape::TYPICAL`. In the Anthropic run each
//! assistant turn opens with a signed `thinking` block (the pending one also with a `redacted_thinking` block); in
//! the chat run the same reasoning is the assistant's text. The chat run's system prompt is padded so that both
//! registration bodies have exactly the same length.

use serde_json::{Value, json};

use crate::transcript::{READ_TOOL, WRITE_TOOL};

const SYSTEM: &str = "You are the site assistant of a content management system. You may read pages and propose \
changes to their metadata; every change waits for the approval of a backend user.";
const QUESTION: &str =
    "Please look at the page about our opening hours and make the meta description shorter.";
const RESULT: &str = "{\"title\":\"Opening hours\",\"path\":\"/about/hours\",\"meta_description\":\"We are open \
Monday to Friday from 9 to 18 and on Saturday from 10 to 14. On public holidays the office stays closed.\",\
\"language\":\"en\"}";
const ANSWER: &str = "I have read the page. The current meta description is 212 characters long; search engines \
show about 155. I suggest the shorter version below.";
const PENDING_ARGUMENTS: &str = "{\"path\":\"/about/hours\",\"meta_description\":\"Open Mon-Fri 9-18, Sat 10-14; \
closed on public holidays. Contact: office@example.org\",\"priority\":1.50}";

/// About 1.2 KB of reasoning per assistant turn, as extended thinking writes it.
fn thinking(round: usize) -> String {
    let sentence = "The user wants a shorter meta description; I should read the page first, keep the opening \
hours exact, stay under 155 characters and keep the contact address, because search engines cut the rest. ";
    format!("Round {round}. {}", sentence.repeat(5))
}

/// A signature of the length Anthropic's are (base64 of about 300 bytes), distinct per round.
fn signature(round: usize) -> String {
    let alphabet = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    (0..400)
        .map(|i| alphabet[(i * 7 + round * 13) % 64] as char)
        .collect()
}

/// The Anthropic registration's members after `id` and `owner_uid`, of at least `bytes` bytes.
pub fn anthropic(bytes: usize, tag: &str) -> String {
    let mut messages: Vec<Value> = Vec::new();
    let mut round = 0;
    let text = |messages: &Vec<Value>| members_anthropic(messages, tag);
    while text(&messages).len() < bytes {
        let id = format!("toolu_{tag}_e{round}");
        messages.push(json!({"role": "user", "content": QUESTION}));
        messages.push(json!({"role": "assistant", "content": [
            {"type": "thinking", "thinking": thinking(round), "signature": signature(round)},
            {"type": "tool_use", "id": id, "name": READ_TOOL, "input": {"path": "/about/hours"}},
        ]}));
        messages.push(json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": id, "content": RESULT},
        ]}));
        messages.push(json!({"role": "assistant", "content": [{"type": "text", "text": ANSWER}]}));
        round += 1;
    }
    text(&messages)
}

fn members_anthropic(rounds: &[Value], tag: &str) -> String {
    let mut messages = rounds.to_vec();
    messages.push(json!({"role": "user", "content": QUESTION}));
    let pending = format!(
        "{{\"role\":\"assistant\",\"content\":[{{\"type\":\"thinking\",\"thinking\":{},\"signature\":\"{}\"}},\
         {{\"type\":\"redacted_thinking\",\"data\":\"{}\"}},\
         {{\"type\":\"tool_use\",\"id\":\"call_{tag}_0\",\"name\":\"{WRITE_TOOL}\",\"input\":{PENDING_ARGUMENTS}}}]}}",
        Value::from(thinking(usize::MAX)),
        signature(997),
        signature(998),
    );
    let earlier = serde_json::to_string(&messages).expect("JSON values serialize");
    format!(
        "\"format\":\"anthropic\",\"system\":{},\"messages\":{},{pending}]",
        Value::from(SYSTEM),
        &earlier[..earlier.len() - 1]
    )
}

/// The OpenAI chat registration's members of the same conversation, exactly `bytes` bytes long (`bytes` must be at
/// least what the rounds that fit take; the system prompt is padded up to it).
pub fn chat(bytes: usize, tag: &str) -> String {
    let mut rounds: Vec<Value> = Vec::new();
    let mut round = 0;
    loop {
        let mut next = rounds.clone();
        let id = format!("call_{tag}_e{round}");
        next.push(json!({"role": "user", "content": QUESTION}));
        next.push(json!({"role": "assistant", "content": thinking(round), "tool_calls": [
            {"id": id, "type": "function", "function": {"name": READ_TOOL, "arguments": "{\"path\":\"/about/hours\"}"}}
        ]}));
        next.push(json!({"role": "tool", "tool_call_id": id, "content": RESULT}));
        next.push(json!({"role": "assistant", "content": ANSWER}));
        if members_chat(&next, tag, "").len() > bytes {
            break;
        }
        rounds = next;
        round += 1;
    }
    let short = members_chat(&rounds, tag, "").len();
    let padding = " Keep answers short.".repeat(bytes.saturating_sub(short) / 20 + 1);
    let padded = members_chat(&rounds, tag, &padding[..bytes.saturating_sub(short)]);
    assert_eq!(
        padded.len(),
        bytes,
        "the chat run is padded to the Anthropic run's size"
    );
    padded
}

fn members_chat(rounds: &[Value], tag: &str, padding: &str) -> String {
    let mut messages = vec![json!({"role": "system", "content": format!("{SYSTEM}{padding}")})];
    messages.extend(rounds.iter().cloned());
    messages.push(json!({"role": "user", "content": QUESTION}));
    messages.push(
        json!({"role": "assistant", "content": null, "tool_calls": [{
            "id": format!("call_{tag}_0"), "type": "function",
            "function": {"name": WRITE_TOOL, "arguments": PENDING_ARGUMENTS},
        }]}),
    );
    format!(
        "\"format\":\"openai-chat\",\"messages\":{}",
        serde_json::to_string(&messages).expect("JSON values serialize")
    )
}
