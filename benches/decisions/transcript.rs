//! Synthetic OpenAI-chat transcripts of a chosen length, ending with an assistant turn of a chosen number of calls.
//!
//! Shared by the load harness (`decisions`) and the micro-benchmarks (`core`), so both measure the same shapes.
//! Message sizes follow a plausible chat: a system prompt, short user questions, tool results of a few hundred
//! bytes. About 250 bytes per message on average, so 10,000 messages are about 2.5 MB of JSON.

use serde_json::{Value, json};

/// The tool that writes (a denial reason would be rendered on it) and the one that reads.
pub const WRITE_TOOL: &str = "update_page_metadata";
pub const READ_TOOL: &str = "read_page";

const SYSTEM: &str = "You are the site assistant of a content management system. You may read pages and propose \
changes to their metadata; every change waits for the approval of a backend user.";
const USER: &str =
    "Please look at the page about our opening hours and make the meta description shorter.";
const ASSISTANT: &str = "I have read the page. The current meta description is 212 characters long; search engines \
show about 155. I suggest the shorter version below.";
const TOOL_RESULT: &str = "{\"title\":\"Opening hours\",\"path\":\"/about/hours\",\"meta_description\":\"We are open \
Monday to Friday from 9 to 18 and on Saturday from 10 to 14. On public holidays the office stays closed.\",\
\"language\":\"en\"}";

/// `messages` messages (at least 2): a system prompt, then rounds of question, tool call, tool result and answer,
/// then the pending assistant turn with `calls` tool calls, alternating the write and the read tool.
/// `tag` makes the call ids of one run distinct from another's (ids need only be unique within a run).
pub fn transcript(messages: usize, calls: usize, tag: &str) -> Vec<Value> {
    assert!(
        messages >= 2,
        "a transcript needs a system prompt and a pending turn"
    );
    assert!(calls >= 1, "a pending turn needs at least one call");
    let mut out = Vec::with_capacity(messages);
    out.push(json!({"role": "system", "content": SYSTEM}));
    let fillers = messages - 2;
    for i in 0..fillers {
        let last = i + 1 == fillers;
        let message = match i % 4 {
            // An assistant call with no tool message after it would be an odd transcript: ask a question instead.
            1 if last => json!({"role": "user", "content": USER}),
            0 => json!({"role": "user", "content": USER}),
            1 => json!({"role": "assistant", "content": null, "tool_calls": [
                call(&format!("{tag}_e{i}"), READ_TOOL, "{\"path\":\"/about/hours\"}")
            ]}),
            2 => {
                json!({"role": "tool", "tool_call_id": format!("{tag}_e{}", i - 1), "content": TOOL_RESULT})
            }
            _ => json!({"role": "assistant", "content": ASSISTANT}),
        };
        out.push(message);
    }
    let pending: Vec<Value> = (0..calls)
        .map(|j| {
            if j % 2 == 0 {
                call(
                    &format!("call_{tag}_{j}"),
                    WRITE_TOOL,
                    "{\"path\":\"/about/hours\",\"meta_description\":\"Open Mon-Fri 9-18, Sat 10-14; closed on \
                     public holidays. Contact: office@example.org\"}",
                )
            } else {
                call(
                    &format!("call_{tag}_{j}"),
                    READ_TOOL,
                    "{\"path\":\"/about/hours\"}",
                )
            }
        })
        .collect();
    out.push(json!({"role": "assistant", "content": null, "tool_calls": pending}));
    out
}

fn call(id: &str, name: &str, arguments: &str) -> Value {
    json!({"id": id, "type": "function", "function": {"name": name, "arguments": arguments}})
}

/// The tools a run declares: the write tool as `write`, the read tool as `read`.
pub fn declared_tools() -> Value {
    json!([
        {"name": WRITE_TOOL, "effect": "write"},
        {"name": READ_TOOL, "effect": "read"},
    ])
}
