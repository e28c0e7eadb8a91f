"""A local stand-in for the three providers' APIs, which checks each provider's continuation rules (docs/design.md §14).

The providers' own SDK clients (anthropic, openai, google-genai) are pointed at it; each request it receives is
checked against the rules the provider enforces when a tool turn is continued, and against what the loop had
registered (`Expectation`). A request that breaks a rule is answered 400 with the problems, so the SDK raises; one
that keeps them is answered a minimal valid response of that provider, so the SDK returns normally. That response
is itself a next tool turn (a thinking block and a tool_use; a reasoning item and a function_call; a signed
functionCall), so a loop can append it with `POST /turns`.

The rules checked:
- Anthropic: every assistant message with tool_use has its thinking/redacted_thinking blocks first (with thinking
  enabled, it must open with one) and unchanged (thinking text and `signature`, or `data`, byte-equal to what was
  registered); every tool_use is answered in order by the tool_result blocks that open the next user message;
  `is_error: true` exactly where the result is an error; the results' texts are the expected ones.
- OpenAI Responses: every function_call is preceded, within the model output it belongs to, by a reasoning item,
  whose `encrypted_content` is unchanged; every function_call is answered by one function_call_output with its
  `call_id`, after it; the outputs' texts are the expected ones.
- Gemini: every functionCall part that had a `thoughtSignature` keeps it (the same bytes: the SDK re-encodes base64
  in its URL-safe alphabet), and the first functionCall of each model turn has one; every functionCall is answered
  in order by a functionResponse in the following user content, with its `id` where the call had one and none
  where it had none; `response` is `{"output": …}`, or `{"error": …}` for an error result, with the expected text.
- All: the registered transcript (and system text) comes back as a prefix, unchanged as JSON values.
"""

from __future__ import annotations

import base64
import binascii
import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Expectation:
    """What the next request must hold: the registered transcript (as parsed JSON values), the system member, and
    the results of the last turn in order, as (call id, tool, content, is_error)."""

    format: str
    transcript: list
    system: Any
    results: list[tuple[str, str, str, bool]]


@dataclass
class Seen:
    """What the stand-in saw of one request."""

    path: str
    body: dict
    problems: list[str] = field(default_factory=list)


# --- Anthropic ---------------------------------------------------------------------------------------------------

THINKING = ("thinking", "redacted_thinking")


def anthropic_problems(body: dict, expect: Expectation) -> list[str]:
    messages = body.get("messages")
    if not isinstance(messages, list):
        return ["messages is not a list"]
    problems = []
    if expect.system is not None and body.get("system") != expect.system:
        problems.append("system differs from the registered system")
    problems += _prefix(messages, expect.transcript, "messages")
    thinking_on = isinstance(body.get("thinking"), dict) and body["thinking"].get("type") == "enabled"
    for i, message in enumerate(messages):
        blocks = message.get("content") if isinstance(message.get("content"), list) else []
        uses = [b for b in blocks if b.get("type") == "tool_use"]
        if message.get("role") != "assistant" or not uses:
            continue
        kinds = [b.get("type") for b in blocks]
        leading = 0
        while leading < len(kinds) and kinds[leading] in THINKING:
            leading += 1
        if any(kind in THINKING for kind in kinds[leading:]):
            problems.append(f"messages[{i}]: a thinking block after another block (thinking blocks come first)")
        if thinking_on and leading == 0:
            problems.append(f"messages[{i}]: thinking is enabled but the assistant message with tool_use does "
                            "not open with a thinking block")
        for j, block in enumerate(blocks):
            if block.get("type") == "thinking" and not block.get("signature"):
                problems.append(f"messages[{i}].content[{j}]: thinking block without its signature")
        if i < len(expect.transcript):
            problems += _same_thinking(blocks, expect.transcript[i].get("content"), f"messages[{i}]")
        answer = messages[i + 1] if i + 1 < len(messages) else None
        if answer is None or answer.get("role") != "user" or not isinstance(answer.get("content"), list):
            problems.append(f"messages[{i}]: tool_use not answered by a user message with blocks")
            continue
        results = answer["content"][: len(uses)]
        got = [(r.get("type"), r.get("tool_use_id")) for r in results]
        want = [("tool_result", u.get("id")) for u in uses]
        if got != want:
            problems.append(f"messages[{i + 1}]: expected tool_result blocks {[w[1] for w in want]} first and in "
                            f"order, got {got}")
    last = messages[-1] if messages else {}
    blocks = last.get("content") if isinstance(last.get("content"), list) else []
    got = [(b.get("tool_use_id"), b.get("content"), b.get("is_error", False)) for b in blocks
           if b.get("type") == "tool_result"]
    want = [(call, content, is_error) for call, _, content, is_error in expect.results]
    problems += _results(got, want, "the last user message's tool_result blocks")
    return problems


def _same_thinking(blocks: list, registered: Any, where: str) -> list[str]:
    """The thinking and redacted_thinking blocks, in order, byte-equal to the registered ones."""
    if not isinstance(registered, list):
        return []
    pick = lambda bs: [b for b in bs if isinstance(b, dict) and b.get("type") in THINKING]  # noqa: E731
    sent, kept = pick(blocks), pick(registered)
    if len(sent) != len(kept):
        return [f"{where}: {len(sent)} thinking blocks sent, {len(kept)} registered"]
    problems = []
    for k, (a, b) in enumerate(zip(sent, kept)):
        for key in ("type", "thinking", "signature", "data"):
            if a.get(key) != b.get(key):
                problems.append(f"{where}: thinking block {k}: {key} differs from the registered one")
    return problems


# --- OpenAI Responses --------------------------------------------------------------------------------------------

OUTPUT_ITEMS = ("reasoning", "function_call")


def _is_model_output(item: dict) -> bool:
    return item.get("type") in OUTPUT_ITEMS or (item.get("type") == "message" and item.get("role") == "assistant")


def responses_problems(body: dict, expect: Expectation) -> list[str]:
    items = body.get("input")
    if not isinstance(items, list):
        return ["input is not a list"]
    problems = []
    if expect.system is not None and body.get("instructions") != expect.system:
        problems.append("instructions differ from the registered instructions")
    problems += _prefix(items, expect.transcript, "input")
    registered_reasoning = {
        item.get("id"): item.get("encrypted_content")
        for item in expect.transcript if isinstance(item, dict) and item.get("type") == "reasoning"
    }
    outputs: dict[str, list[int]] = {}
    for k, item in enumerate(items):
        if item.get("type") == "function_call_output":
            outputs.setdefault(item.get("call_id"), []).append(k)
    calls = set()
    for k, item in enumerate(items):
        kind = item.get("type")
        if kind == "reasoning" and item.get("id") in registered_reasoning:
            if item.get("encrypted_content") != registered_reasoning[item.get("id")]:
                problems.append(f"input[{k}]: reasoning item {item.get('id')}: encrypted_content differs")
        if kind != "function_call":
            continue
        call_id = item.get("call_id")
        calls.add(call_id)
        back = k - 1
        while back >= 0 and _is_model_output(items[back]) and items[back].get("type") != "reasoning":
            back -= 1
        if back < 0 or items[back].get("type") != "reasoning":
            problems.append(f"input[{k}]: function_call {call_id} without the reasoning item before it")
        answered = [o for o in outputs.get(call_id, []) if o > k]
        if len(outputs.get(call_id, [])) != 1 or len(answered) != 1:
            problems.append(f"input[{k}]: function_call {call_id} answered by {len(answered)} "
                            f"function_call_output items after it ({len(outputs.get(call_id, []))} in all)")
    for call_id, at in outputs.items():
        if call_id not in calls:
            problems.append(f"input[{at[0]}]: function_call_output for {call_id}, which no function_call made")
    tail = items[len(expect.transcript):]
    got = [(i.get("call_id"), i.get("output"), None) for i in tail if i.get("type") == "function_call_output"]
    want = [(call, content, None) for call, _, content, _ in expect.results]
    problems += _results(got, want, "the function_call_output items after the transcript")
    return problems


# --- Gemini ------------------------------------------------------------------------------------------------------


def _signature(part: dict) -> bytes | None:
    """A part's thoughtSignature as bytes (either base64 alphabet), or None."""
    value = part.get("thoughtSignature", part.get("thought_signature"))
    if value is None:
        return None
    try:
        return base64.b64decode(value.replace("-", "+").replace("_", "/") + "=" * (-len(value) % 4), validate=True)
    except (binascii.Error, AttributeError):
        return b"<not base64>"


def gemini_problems(body: dict, expect: Expectation) -> list[str]:
    contents = body.get("contents")
    if not isinstance(contents, list):
        return ["contents is not a list"]
    problems = []
    if expect.system is not None and body.get("systemInstruction", {}).get("parts") != expect.system.get("parts"):
        problems.append("systemInstruction differs from the registered system_instruction")
    # Signatures compared as bytes, so the transcript prefix is compared with them normalised.
    norm = lambda cs: [  # noqa: E731
        {**c, "parts": [{**p, **({"thoughtSignature": _signature(p)} if _signature(p) is not None else {})}
                        for p in c.get("parts", [])]} for c in cs]
    problems += _prefix(norm(contents), norm(expect.transcript), "contents")
    for i, content in enumerate(contents):
        parts = content.get("parts") if isinstance(content.get("parts"), list) else []
        calls = [p for p in parts if "functionCall" in p]
        if content.get("role") != "model" or not calls:
            continue
        if _signature(calls[0]) is None:
            problems.append(f"contents[{i}]: the first functionCall part has no thoughtSignature")
        if i < len(expect.transcript):
            kept = [p for p in expect.transcript[i].get("parts", []) if "functionCall" in p]
            for j, (sent, registered) in enumerate(zip(calls, kept)):
                if _signature(registered) is not None and _signature(sent) != _signature(registered):
                    problems.append(f"contents[{i}]: functionCall {j} ({registered['functionCall'].get('name')}): "
                                    "thoughtSignature lost or changed")
        answer = contents[i + 1] if i + 1 < len(contents) else None
        responses = [p["functionResponse"] for p in (answer or {}).get("parts", []) if "functionResponse" in p]
        if answer is None or answer.get("role") != "user":
            problems.append(f"contents[{i}]: functionCall parts not answered by a user content")
            continue
        want = [(c["functionCall"].get("name"), c["functionCall"].get("id")) for c in calls]
        got = [(r.get("name"), r.get("id")) for r in responses]
        if got != want:
            problems.append(f"contents[{i + 1}]: functionResponse parts {got}, expected {want} (id only where the "
                            "call had one)")
    last = contents[-1] if contents else {}
    responses = [p["functionResponse"] for p in last.get("parts", []) if "functionResponse" in p]
    got = [(r.get("name"), r.get("response")) for r in responses]
    want = [(tool, {"error" if is_error else "output": content}) for _, tool, content, is_error in expect.results]
    problems += _results(got, want, "the last user content's functionResponse parts")
    return problems


# --- shared ------------------------------------------------------------------------------------------------------


def _prefix(sent: list, registered: list, name: str) -> list[str]:
    if len(sent) < len(registered):
        return [f"{name}: {len(sent)} entries sent, the registered transcript has {len(registered)}"]
    return [f"{name}[{i}] differs from the registered entry" for i, (a, b) in enumerate(zip(sent, registered))
            if a != b]


def _results(got: list, want: list, where: str) -> list[str]:
    if got == want:
        return []
    problems = [f"{where}: {len(got)} results, expected {len(want)}"] if len(got) != len(want) else []
    for k, (a, b) in enumerate(zip(got, want)):
        if a != b:
            problems.append(f"{where}: result {k} is {a!r}, expected {b!r}")
    return problems


CHECKS = {"anthropic": anthropic_problems, "openai-responses": responses_problems, "gemini": gemini_problems}

# The next tool turn each provider answers with: what a loop appends with POST /turns.
NEXT_TOOL = "update_page_metadata"
NEXT_ARGS = {"path": "/terrace", "meta_description": "Terrace open when sunny."}
NEXT_SIGNATURE = "EqsBCkYIBxABGAIiQNext7urnSignatureAbCdEfGhIjKlMnOpQrStUvWxYz0123456789+/AbCdEfGhIjKlMnOpQ=="
NEXT_ENCRYPTED = "gAAAAABpQ2Vtb3JlYXNvbmluZy10aHJlZS1uZXh0LXR1cm4tMDEyMzQ1Njc4OWFiY2RlZg=="
NEXT_THOUGHT_SIGNATURE = "Cm8BVtaNKs+wbmV4dC10dXJuLXNpZ25hdHVyZS8rMDEyMzQ1Njc4OWFiY2RlZg=="


def _reply(path: str) -> dict:
    if path.endswith("/messages"):
        return {
            "id": "msg_standin", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
            "content": [
                {"type": "thinking", "thinking": "The terrace page needs the note too.", "signature": NEXT_SIGNATURE},
                {"type": "tool_use", "id": "toolu_02Next", "name": NEXT_TOOL, "input": NEXT_ARGS},
            ],
            "stop_reason": "tool_use", "stop_sequence": None, "usage": {"input_tokens": 10, "output_tokens": 10},
        }
    if path.endswith("/responses"):
        return {
            "id": "resp_standin", "object": "response", "created_at": 1767225600, "status": "completed",
            "model": "gpt-5", "parallel_tool_calls": True, "tool_choice": "auto", "tools": [],
            "output": [
                {"type": "reasoning", "id": "rs_next", "summary": [], "encrypted_content": NEXT_ENCRYPTED},
                {"type": "function_call", "id": "fc_next", "call_id": "call_next", "name": NEXT_TOOL,
                 "arguments": json.dumps(NEXT_ARGS), "status": "completed"},
            ],
            "usage": {"input_tokens": 10, "output_tokens": 10, "total_tokens": 20,
                      "input_tokens_details": {"cached_tokens": 0}, "output_tokens_details": {"reasoning_tokens": 5}},
        }
    return {
        "candidates": [{
            "content": {"role": "model", "parts": [
                {"text": "The terrace page needs the note too.", "thought": True},
                {"functionCall": {"id": "gc_next", "name": NEXT_TOOL, "args": NEXT_ARGS},
                 "thoughtSignature": NEXT_THOUGHT_SIGNATURE},
            ]},
            "finishReason": "STOP", "index": 0,
        }],
        "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 10, "totalTokenCount": 20},
        "modelVersion": "gemini-2.5-pro",
    }


def _format_of(path: str) -> str | None:
    if path.endswith("/messages"):
        return "anthropic"
    if path.endswith("/responses"):
        return "openai-responses"
    if path.endswith(":generateContent"):
        return "gemini"
    return None


class StandIn:
    """The stand-in server on a free loopback port. Set `expect` before each SDK call; `seen` holds the requests."""

    def __init__(self) -> None:
        self.expect: Expectation | None = None
        self.seen: list[Seen] = []
        standin = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                raw = self.rfile.read(int(self.headers.get("content-length", "0")))
                path = self.path.split("?", 1)[0]
                format = _format_of(path)
                try:
                    body = json.loads(raw)
                except ValueError:
                    body = {}
                seen = Seen(path, body)
                standin.seen.append(seen)
                expect = standin.expect
                if format is None or expect is None or expect.format != format:
                    seen.problems = [f"unexpected request to {path} (expected {expect and expect.format})"]
                else:
                    try:
                        seen.problems = CHECKS[format](body, expect)
                    except Exception as error:  # a check that crashes refuses the request
                        seen.problems = [f"the check raised {type(error).__name__}: {error}"]
                if seen.problems:
                    self._answer(400, {"error": {"type": "invalid_request_error", "code": 400, "status":
                                                 "INVALID_ARGUMENT", "message": "; ".join(seen.problems)}})
                else:
                    self._answer(200, _reply(path))

            def _answer(self, status: int, payload: dict) -> None:
                out = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self.server.shutdown()
