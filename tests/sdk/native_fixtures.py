"""Registrations in each provider's own format (docs/design.md §14), shaped as each provider documents its transcripts.

Each fixture is the text of the format's members, written out by hand as compact JSON, so that the check of the
resumed input can look for these exact bytes (member order, `1.50`) in what the service answers. Each ends with
the model's turn that waits: three calls, of a `write` tool, a `read` tool and a `write` tool whose executor in
tests/sdk/native_sdks.py answers `is_error: true`, so denials with and without the reason, executor errors and
per-call verdicts all meet every shape.

- anthropic: extended thinking with tool use (a `thinking` block with its `signature` opening each assistant
  message that calls tools), a `redacted_thinking` block, a server tool (`server_tool_use` and its
  `web_search_tool_result`, not pending calls), `cache_control` on the system text and a user text;
- openai-responses: a user message in the short form without `type`, `reasoning` items with `encrypted_content`
  before the function calls they led to, an assistant message between them, and three function calls;
- gemini: `thought` parts and `thoughtSignature` on the first `functionCall` part of each model turn (as Gemini
  signs parallel calls), one pending call with an `id` and two without (`call_1`, `call_2` by position).
"""

import json
from dataclasses import dataclass
from pathlib import Path

WRITE_TOOL, READ_TOOL, FAILING_TOOL = "update_page_metadata", "read_page", "fail_publish"
TOOLS = [
    {"name": WRITE_TOOL, "effect": "write"},
    {"name": READ_TOOL, "effect": "read"},
    {"name": FAILING_TOOL, "effect": "write"},
]

# Each: the members of the registration beside `format` (name -> compact JSON text), the pending calls as
# (call id, tool) in the turn's order, and which member holds the transcript.
ANTHROPIC = {
    "system": '[{"type":"text","text":"You edit the bakery\'s website.","cache_control":{"type":"ephemeral"}}]',
    "messages": (
        '[{"role":"user","content":[{"type":"text","text":"We open at 7 now. Update the meta description of '
        '/about/hours, look at the terrace page and publish the terrace note.","cache_control":{"type":"ephemeral"}}]},'
        '{"role":"assistant","content":[{"type":"thinking","thinking":"I should read the page before changing it.",'
        '"signature":"EqQBCkgIBxABGAIiQL1PVZq2yZ0VbzPpYOl0RnYpE1bX9YhZbq0Xr3XxLf0z+dN4mYj8kP5yq3HqA9bQpC6uZ2o0FzXq"},'
        '{"type":"tool_use","id":"toolu_01ReadHours","name":"read_page","input":{"path":"/about/hours"}}]},'
        '{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_01ReadHours",'
        '"content":"{\\"meta_description\\":\\"Open 9-18, Mon-Fri.\\"}"}]},'
        '{"role":"assistant","content":[{"type":"thinking","thinking":"The page says 9-18. The owner wants 7. I '
        'will check the weather for the terrace note first.",'
        '"signature":"ErUBCkYIBxABGAIiQHc6nF0a9m1zT3yE8k2bWq5uXv7L9pR0sDg4hJfYtC+e1QwZ3xN6oA8iU2KmBcVdLrHs/gPjOy0fT4aq"},'
        '{"type":"redacted_thinking","data":"EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpPkNRj2YsZ'
        'z7p0WFmKx9e4bQbGx8cJd0uCk1N2mT6fQ5vR8sA="},'
        '{"type":"server_tool_use","id":"srvtoolu_01Weather","name":"web_search","input":{"query":"Hamburg weather tomorrow"}},'
        '{"type":"web_search_tool_result","tool_use_id":"srvtoolu_01Weather","content":[{"type":"web_search_result",'
        '"url":"https://weather.example/hamburg","title":"Hamburg: sunny, 24 degrees",'
        '"encrypted_content":"EqgfCioIARgBIiQ3YTAwMjY1Mi1mZjM5LTQ1NGUtODgxNC1kNjNjNTk1ZWI3Y2Ea","page_age":"1 day ago"}]},'
        '{"type":"text","text":"I will update the description, read the terrace page and publish the note."},'
        '{"type":"tool_use","id":"toolu_01Update","name":"update_page_metadata","input":{"path":"/about/hours",'
        '"meta_description":"Open from 7, Mon-Fri.","priority":1.50}},'
        '{"type":"tool_use","id":"toolu_01Terrace","name":"read_page","input":{"path":"/terrace"}},'
        '{"type":"tool_use","id":"toolu_01Publish","name":"fail_publish","input":{"note":"Terrace open when sunny."}}]}]'
    ),
    "calls": [("toolu_01Update", WRITE_TOOL), ("toolu_01Terrace", READ_TOOL), ("toolu_01Publish", FAILING_TOOL)],
    "transcript": "messages",
}

RESPONSES = {
    "instructions": '"You edit the bakery\'s website."',
    "input": (
        '[{"role":"user","content":"We open at 7 now. Update the meta description of /about/hours, look at the '
        'terrace page and publish the terrace note."},'
        '{"type":"reasoning","id":"rs_01hours","summary":[{"type":"summary_text","text":"Read the page first."}],'
        '"encrypted_content":"gAAAAABpQ2Vtb3JlYXNvbmluZy1vbmUtYWJjZGVmZ2hpamtsbW5vcHFyc3R1dnd4eXo0NTY3ODk="},'
        '{"type":"function_call","id":"fc_01hours","call_id":"call_read_hours","name":"read_page",'
        '"arguments":"{\\"path\\":\\"/about/hours\\"}","status":"completed"},'
        '{"type":"function_call_output","call_id":"call_read_hours","output":"{\\"meta_description\\":\\"Open 9-18, Mon-Fri.\\"}"},'
        '{"type":"reasoning","id":"rs_02update","summary":[],'
        '"encrypted_content":"gAAAAABpQ2Vtb3JlYXNvbmluZy10d28tWllYV1ZVVFNSUVBPTk1MS0pJSEdGRURDQkE5ODc2NTQ="},'
        '{"type":"message","id":"msg_02update","role":"assistant","status":"completed","content":[{"type":"output_text",'
        '"text":"I will update the description, read the terrace page and publish the note.","annotations":[]}]},'
        '{"type":"function_call","id":"fc_02update","call_id":"call_update","name":"update_page_metadata",'
        '"arguments":"{\\"path\\":\\"/about/hours\\",\\"meta_description\\":\\"Open from 7, Mon-Fri.\\",\\"priority\\":1.50}",'
        '"status":"completed"},'
        '{"type":"function_call","id":"fc_03terrace","call_id":"call_terrace","name":"read_page",'
        '"arguments":"{\\"path\\":\\"/terrace\\"}","status":"completed"},'
        '{"type":"function_call","id":"fc_04publish","call_id":"call_publish","name":"fail_publish",'
        '"arguments":"{\\"note\\":\\"Terrace open when sunny.\\"}","status":"completed"}]'
    ),
    "calls": [("call_update", WRITE_TOOL), ("call_terrace", READ_TOOL), ("call_publish", FAILING_TOOL)],
    "transcript": "input",
}

GEMINI = {
    "system_instruction": '{"parts":[{"text":"You edit the bakery\'s website."}]}',
    "contents": (
        '[{"role":"user","parts":[{"text":"We open at 7 now. Update the meta description of /about/hours, look at '
        'the terrace page and publish the terrace note."}]},'
        '{"role":"model","parts":[{"text":"Reading the page before changing it.","thought":true},'
        '{"functionCall":{"name":"read_page","args":{"path":"/about/hours"}},'
        '"thoughtSignature":"CiQBVtaNKt+/Zm9vYmFyYmF6cXV4MTIzNDU2Nzg5MGFiY2RlZg=="}]},'
        '{"role":"user","parts":[{"functionResponse":{"name":"read_page","response":{"output":"{\\"meta_description\\":'
        '\\"Open 9-18, Mon-Fri.\\"}"}}}]},'
        '{"role":"model","parts":[{"text":"The page says 9-18; the owner wants 7.","thought":true},'
        '{"functionCall":{"id":"gc_update","name":"update_page_metadata","args":{"path":"/about/hours",'
        '"meta_description":"Open from 7, Mon-Fri.","priority":1.50}},'
        '"thoughtSignature":"Cm8BVtaNKs+wZXh0cmEvc2lnbmF0dXJlK2J5dGVzPT0xMjM0NTY3ODkwYWJjZGVmZ2hpams="},'
        '{"functionCall":{"name":"read_page","args":{"path":"/terrace"}}},'
        '{"functionCall":{"name":"fail_publish","args":{"note":"Terrace open when sunny."}}}]}]'
    ),
    "calls": [("gc_update", WRITE_TOOL), ("call_1", READ_TOOL), ("call_2", FAILING_TOOL)],
    "transcript": "contents",
}

FIXTURES = {"anthropic": ANTHROPIC, "openai-responses": RESPONSES, "gemini": GEMINI}
TRANSCRIPT = {"anthropic": "messages", "openai-responses": "input", "gemini": "contents"}


@dataclass
class Fixture:
    """A registration in one format: its members' texts (never re-serialized), the pending calls as (call id, tool)
    in the turn's order, and the tools it declares."""

    label: str
    format: str
    texts: dict[str, str]
    calls: list[tuple[str, str]]
    tools: list[dict]

    @property
    def transcript(self) -> str:
        return TRANSCRIPT[self.format]

    def effect(self, tool: str) -> str | None:
        return next((t["effect"] for t in self.tools if t["name"] == tool), None)


def own(format: str) -> Fixture:
    """The fixture of this file for a format."""
    fixture = FIXTURES[format]
    texts = {k: v for k, v in fixture.items() if k not in ("calls", "transcript")}
    return Fixture(format, format, texts, fixture["calls"], TOOLS)


def member_texts(body: str) -> dict[str, str]:
    """The top-level members of a JSON object's text, each as the exact text of its value: a scan with the standard
    library's decoder, which says where each value ends, so nothing is parsed and written again."""
    decoder = json.JSONDecoder()
    at, out = body.index("{") + 1, {}
    skip = lambda i: len(body) - len(body[i:].lstrip())  # noqa: E731
    while True:
        at = skip(at)
        if body[at] == "}":
            return out
        name, at = decoder.raw_decode(body, at)
        at = skip(at)
        assert body[at] == ":", f"':' expected at {at}"
        start = skip(at + 1)
        _, end = decoder.raw_decode(body, start)
        out[name] = body[start:end]
        at = skip(end)
        if body[at] == ",":
            at += 1


def pending_calls(format: str, transcript: list) -> list[tuple[str, str]]:
    """The waiting turn's calls as docs/design.md §14 reads them: the tool_use blocks of the last (assistant) message;
    the function_call items after the last user message or function_call_output; the functionCall parts of the
    last content, `call_{position}` where a part has no id."""
    if format == "anthropic":
        return [(b["id"], b["name"]) for b in transcript[-1]["content"] if b.get("type") == "tool_use"]
    if format == "openai-responses":
        last_input = max(k for k, i in enumerate(transcript)
                         if i.get("role") == "user" or i.get("type") == "function_call_output")
        return [(i["call_id"], i["name"]) for i in transcript[last_input + 1:] if i.get("type") == "function_call"]
    calls = [p["functionCall"] for p in transcript[-1]["parts"] if "functionCall" in p]
    return [(c.get("id") or f"call_{k}", c["name"]) for k, c in enumerate(calls)]


def shared(directory: Path) -> list[Fixture]:
    """The core's fixtures (tests/fixtures/native/, one registration body per file), where they exist."""
    out = []
    for format in TRANSCRIPT:
        path = directory / f"{format}.json"
        if not path.exists():
            continue
        texts = member_texts(path.read_text().strip())
        tools = json.loads(texts.pop("tools", "[]"))
        texts.pop("format", None)
        calls = pending_calls(format, json.loads(texts[TRANSCRIPT[format]]))
        out.append(Fixture(f"{format} ({path.parent.name}/{path.name})", format, texts, calls, tools))
    return out
