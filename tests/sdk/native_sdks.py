#!/usr/bin/env python3
"""Native transcripts through the providers' own SDKs (docs/design.md §14), against the real binary and Postgres.

    python tests/sdk/native_sdks.py [--binary target/debug/approval-resume] [--admin-url postgres://…/postgres]
    python tests/sdk/native_sdks.py --base-url http://127.0.0.1:PORT --key ar_…   (a service already running,
        whose TOOLS_CONFIG points the three tools at --executor-port)

Without --base-url it makes a private database, a client key (`clients add`), a loopback tool executor and starts
the binary on a free loopback port; all of it is removed on exit. For each format of tests/sdk/native_fixtures.py
(anthropic, openai-responses, gemini) it registers runs and

- denies one (by the owner, reason `variant`), approves one through the executor, and decides one per call
  (approve, approve with edited arguments, deny with reason `skip`), and on the denied run appends the next turn
  the provider answered (`POST /turns`) and denies again;
- checks each decision's `results[]` against docs/design.md §3's exact texts, and that the resumed input
  (`GET /v1/runs/{id}/model-input`, the run's own format) holds the registered members' bytes unchanged;
- hands that input to the provider's SDK client (`anthropic.Anthropic().messages.create`,
  `openai.OpenAI().responses.create`, `google.genai.Client().models.generate_content`) pointed at the stand-in of
  tests/sdk/standin.py, which checks the provider's continuation rules and answers like the provider.

Negative self-tests send broken copies of resumed inputs (a dropped signature, a reasoning item, a
thoughtSignature…) through the same SDKs and require the stand-in to refuse each, naming the rule; and a resumed
text with a number re-serialized must fail the bytes check. One line per check; the last line is
`N passed, M failed`; the exit status is 1 if any failed.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Callable

import anthropic
import openai
from google import genai
from google.genai import types as genai_types

sys.path.insert(0, str(Path(__file__).resolve().parent))
from native_fixtures import TOOLS, Fixture, own, pending_calls, shared  # noqa: E402
from standin import NEXT_TOOL, Expectation, StandIn  # noqa: E402

OWNER = 7
FORMATS = ("anthropic", "openai-responses", "gemini")
SYSTEM_MEMBER = {"anthropic": "system", "openai-responses": "instructions", "gemini": "system_instruction"}

# --- docs/design.md §3's texts -------------------------------------------------------------------------------------

WHO = {
    "run_owner": "by the user who started this run, the person you are talking to",
    "other_user": "by another backend user, not the person you are talking to",
    "unknown": "by the human reviewer",
}
ADVICE = {
    "run_owner": "Tell them that they declined the approval themselves, not the system or an operator, and ask "
                 "whether the change should be proposed again.",
    "other_user": "Tell the user that another backend user declined the approval; do not describe it as a system error.",
    "unknown": "Tell the user that a human reviewer declined the approval; do not describe it as a system error.",
}
ADVICE_WITH_REASON = {
    ("run_owner", "variant"): "Tell them that they declined this version themselves, not the system or an operator, "
                              "and propose a different version of this change.",
    ("run_owner", "skip"): "Tell them that they declined the approval themselves, not the system or an operator, and "
                           "do not propose this change again.",
}
SHARED_FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "native"


def denied_text(tool: str, token: str, reason: str | None, effect: str | None) -> str:
    """§3: the reason is rendered only on a call of a `write` tool."""
    reason = reason if effect == "write" else None
    head = f"Error: approval_denied (decided_by: {token}" + (f", reason: {reason}" if reason else "") + ")."
    advice = ADVICE_WITH_REASON[(token, reason)] if reason else ADVICE[token]
    return f'{head} The approval for tool "{tool}" was declined {WHO[token]}. Nothing was executed. {advice}'


def executed_text(tool: str, arguments: dict) -> tuple[str, bool]:
    """What the loopback executor answers for a call: tools named fail_* fail with is_error (a tool's own error)."""
    return f"{tool} ran with {len(arguments)} argument(s).", tool.startswith("fail_")


def edit_note(token: str, arguments: str) -> str:
    return (f"Note: approval_edited (decided_by: {token}). The arguments of this call were changed before it was "
            f"approved, {WHO[token]}; it ran with these arguments instead of the ones you proposed: {arguments}")


# --- the loopback executor ---------------------------------------------------------------------------------------


class Executor:
    """A tool executor on a free loopback port (the service's contract, as examples/echo_executor.rs answers it)."""

    def __init__(self, tools: list[dict], port: int = 0) -> None:
        self.tools = tools
        self.calls: list[dict] = []
        executor = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                call = json.loads(self.rfile.read(int(self.headers.get("content-length", "0"))))
                executor.calls.append(call)
                content, is_error = executed_text(call["tool"], call["arguments"])
                out = json.dumps({"content": content, "is_error": is_error}).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def tools_config(self) -> str:
        return "".join(
            f'[tools.{t["name"]}]\nurl = "http://127.0.0.1:{self.port}/tools/{t["name"]}"\neffect = "{t["effect"]}"\n'
            for t in self.tools
        )


# --- the service -------------------------------------------------------------------------------------------------


class Service:
    """The real binary on a fresh database, or one already running (--base-url)."""

    def __init__(self, args: argparse.Namespace, executor: Executor) -> None:
        self.process: subprocess.Popen | None = None
        self.admin_url = args.admin_url
        self.database: str | None = None
        self.work = tempfile.TemporaryDirectory(prefix="sdk-native-")
        if args.base_url:
            self.base_url, self.key = args.base_url.rstrip("/"), args.key
            return
        self.database = f"approval_resume_sdk_{os.getpid()}"
        subprocess.run(["psql", self.admin_url, "-qAtc", f'create database "{self.database}"'], check=True)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("DATABASE_", "LISTEN_", "PRIVACY_",
                                                                         "TOOLS_", "LOG_", "ENCRYPTION_"))}
        env.update(DATABASE_URL=f"{self.admin_url.rsplit('/', 1)[0]}/{self.database}", LOG_FORMAT="json")
        scopes = ["users:write", "runs:write", "runs:read", "decisions:write"]
        added = subprocess.run([args.binary, "clients", "add", "sdk-native", *sum((["--scope", s] for s in scopes), [])],
                               env=env, capture_output=True, text=True, check=True)
        self.key = added.stdout.strip()
        tools = Path(self.work.name) / "tools.toml"
        tools.write_text(executor.tools_config())
        log_path = Path(self.work.name) / "service.log"
        env.update(LISTEN_ADDR="127.0.0.1:0", TOOLS_CONFIG=str(tools), SHUTDOWN_GRACE_SECS="5")
        self.log = open(log_path, "w")
        self.process = subprocess.Popen([args.binary, "serve"], env=env, stdout=subprocess.DEVNULL,
                                        stderr=self.log, stdin=subprocess.DEVNULL)
        for _ in range(200):
            found = re.search(r'"address":"([^"]+)"', log_path.read_text())
            if found:
                self.base_url = f"http://{found.group(1)}"
                break
            if self.process.poll() is not None:
                raise RuntimeError(f"the service exited: {log_path.read_text()}")
            time.sleep(0.05)
        else:
            raise RuntimeError(f"the service did not say where it listens: {log_path.read_text()}")
        self.log_path = log_path

    def request(self, method: str, path: str, body: str | None = None) -> tuple[int, bytes]:
        request = urllib.request.Request(
            self.base_url + path, method=method, data=body.encode() if body is not None else None,
            headers={"Authorization": f"Bearer {self.key}", "Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=30) as answer:
                return answer.status, answer.read()
        except urllib.error.HTTPError as error:
            return error.code, error.read()

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            self.process.wait(timeout=15)
        if self.database:
            subprocess.run(["psql", self.admin_url, "-qAtc", f'drop database if exists "{self.database}" with (force)'],
                           check=False, capture_output=True)
        self.work.cleanup()

    def panicked(self) -> bool:
        return self.process is not None and "panicked" in self.log_path.read_text()


# --- the checks --------------------------------------------------------------------------------------------------


class Report:
    def __init__(self) -> None:
        self.passed = self.failed = 0

    def check(self, ok: bool, name: str, notes: list[str] | None = None) -> bool:
        self.passed, self.failed = self.passed + ok, self.failed + (not ok)
        notes = notes or []
        shown = notes[:4] + ([f"… {len(notes) - 4} more"] if len(notes) > 4 else [])
        print(f"{'PASS' if ok else 'FAIL'}  {name}" + (f" -- {'; '.join(shown)}" if shown else ""), flush=True)
        return ok


def registration(fixture: Fixture, run_id: str) -> str:
    """The body of POST /v1/runs, written as text around the fixture's member texts (never re-serialized)."""
    parts = [f'"id":"{run_id}"', f'"owner_uid":{OWNER}', f'"format":"{fixture.format}"']
    parts += [f'"{name}":{text}' for name, text in fixture.texts.items()]
    parts.append(f'"tools":{json.dumps(fixture.tools, separators=(",", ":"))}')
    return "{" + ",".join(parts) + "}"


def kept_whole(raw: str, texts: dict[str, str], transcript: str) -> list[str]:
    """The registered members' bytes in a resumed input's text: the system member whole, and the transcript's
    entries in order at the start of its array, followed by the results (the array's text without its `]`)."""
    problems = []
    for name, text in texts.items():
        wanted = text[:-1] + "," if name == transcript else text
        if wanted not in raw:
            problems.append(f"the registered {name} is not in the answer byte for byte")
    return problems


def sdk_send(format: str, standin: StandIn, model_input: dict) -> Any:
    """The resumed input, given to the provider's own SDK client pointed at the stand-in; the SDK's answer."""
    if format == "anthropic":
        client = anthropic.Anthropic(api_key="sk-ant-test", base_url=standin.url, max_retries=0)
        extra = {"system": model_input["system"]} if "system" in model_input else {}
        return client.messages.create(
            model="claude-sonnet-4-5", max_tokens=4096, thinking={"type": "enabled", "budget_tokens": 2048},
            messages=model_input["messages"], tools=[
                {"name": t["name"], "description": t["name"], "input_schema": {"type": "object"}} for t in TOOLS
            ] + [{"type": "web_search_20250305", "name": "web_search"}], **extra)
    if format == "openai-responses":
        client = openai.OpenAI(api_key="sk-test", base_url=standin.url + "/v1", max_retries=0)
        extra = {"instructions": model_input["instructions"]} if "instructions" in model_input else {}
        return client.responses.create(
            model="gpt-5", input=model_input["input"], store=False, include=["reasoning.encrypted_content"],
            tools=[{"type": "function", "name": t["name"], "parameters": {"type": "object"}, "strict": False}
                   for t in TOOLS], **extra)
    client = genai.Client(api_key="test-key", http_options=genai_types.HttpOptions(base_url=standin.url))
    config = genai_types.GenerateContentConfig(
        system_instruction=model_input.get("system_instruction"),
        tools=[genai_types.Tool(function_declarations=[
            genai_types.FunctionDeclaration(name=t["name"], description=t["name"]) for t in TOOLS])],
        automatic_function_calling=genai_types.AutomaticFunctionCallingConfig(disable=True))
    return client.models.generate_content(model="gemini-2.5-pro", contents=model_input["contents"], config=config)


def next_turn(format: str, reply: Any) -> str:
    """What a loop appends after the SDK's answer (the provider's next tool turn), as a POST /turns body."""
    if format == "anthropic":
        blocks = [block.model_dump(mode="json", exclude_none=True) for block in reply.content]
        return json.dumps({"messages": [{"role": "assistant", "content": blocks}]})
    if format == "openai-responses":
        return json.dumps({"input": [item.model_dump(mode="json", exclude_none=True) for item in reply.output]})
    content = reply.candidates[0].content.model_dump(mode="json", by_alias=True, exclude_none=True)
    return json.dumps({"contents": [content]})


def expected(format: str, model_input: dict, results: list[tuple[str, str, str, bool]], transcript: list) -> Expectation:
    system = model_input.get(SYSTEM_MEMBER[format])
    return Expectation(format, transcript, system, results)


def refused(sdk_error: Exception) -> bool:
    return isinstance(sdk_error, (anthropic.BadRequestError, openai.BadRequestError, genai.errors.ClientError))


class Suite:
    def __init__(self, service: Service, standin: StandIn, executor: Executor, report: Report) -> None:
        self.service, self.standin, self.executor, self.report = service, standin, executor, report
        self.denied_inputs: dict[str, dict] = {}

    def register(self, fixture: Fixture) -> tuple[str, str] | None:
        run_id, label = str(uuid.uuid4()), fixture.label
        status, body = self.service.request("POST", "/v1/runs", registration(fixture, run_id))
        ok = self.report.check(status == 201, f"{label}: registers in its own format",
                               [] if status == 201 else [f"{status} {body[:300]!r}"])
        if not ok:
            return None
        run = json.loads(body)
        calls = [(c.get("id"), c.get("name")) for c in run.get("turn", {}).get("pending_calls", [])]
        self.report.check(calls == fixture.calls, f"{label}: the waiting turn's calls, ids and tools (§14)",
                          [] if calls == fixture.calls else [f"got {calls}, expected {fixture.calls}"])
        self.report.check(run.get("format") == fixture.format, f"{label}: the run view says its format",
                          [] if run.get("format") == fixture.format else [f"format {run.get('format')!r}"])
        return run_id, run["turn"]["digest"]

    def decide(self, fixture: Fixture, label: str, run_id: str, body: dict,
               want: list[tuple[str, str, str, bool]]) -> dict | None:
        """Decides, checks results[] against `want` (call id, tool, content, is_error), reads the model input."""
        label, format = f"{fixture.label} {label}", fixture.format
        status, raw = self.service.request("POST", f"/v1/runs/{run_id}/decision", json.dumps(body))
        if not self.report.check(status == 200, f"{label}: decided", [] if status == 200 else
                                 [f"{status} {raw[:300]!r}"]):
            return None
        answer = json.loads(raw)
        got = [(r.get("call_id"), r.get("tool"), r.get("content"), r.get("is_error")) for r in answer["results"]]
        self.report.check(got == want, f"{label}: results in the turn's order with docs/design.md §3's exact texts",
                          [f"result {k}: got {a!r}, expected {b!r}" for k, (a, b) in enumerate(zip(got, want)) if a != b]
                          + ([f"{len(got)} results, expected {len(want)}"] if len(got) != len(want) else []))
        status, raw_input = self.service.request("GET", f"/v1/runs/{run_id}/model-input")
        if not self.report.check(status == 200, f"{label}: GET model-input", [] if status == 200 else
                                 [f"{status} {raw_input[:300]!r}"]):
            return None
        model_input = json.loads(raw_input)
        self.report.check(model_input == answer.get("model_input") and model_input.get("format") == format,
                          f"{label}: the decision's model_input is the stored one, in the run's format")
        return {"raw": raw_input.decode(), "input": model_input, "results": want}

    def through_sdk(self, fixture: Fixture, label: str, resumed: dict, transcript: list) -> Any:
        """The resumed input through the provider's SDK to the stand-in, which must take it."""
        format = fixture.format
        self.standin.expect = expected(format, resumed["input"], resumed["results"], transcript)
        before = len(self.standin.seen)
        try:
            reply = sdk_send(format, self.standin, resumed["input"])
            error = None
        except Exception as caught:
            reply, error = None, caught
        seen = self.standin.seen[before:]
        notes = ([f"the SDK raised {type(error).__name__}: {sdk_error(error)}"] if error else []) + \
                [p for s in seen for p in s.problems]
        self.report.check(error is None and len(seen) == 1 and not seen[0].problems,
                          f"{fixture.label} {label}: the {sdk_name(format)} SDK sends the resumed input and the "
                          "stand-in finds the provider's continuation rules kept", notes)
        return reply

    def denied(self, fixture: Fixture, token: str, reason: str | None) -> list[tuple[str, str, str, bool]]:
        return [(c, t, denied_text(t, token, reason, fixture.effect(t)), True) for c, t in fixture.calls]

    def scenario(self, fixture: Fixture, whole: bool) -> None:
        """Deny (and with `whole`: the second turn, approve, per call) one fixture, each resumed input through
        the provider's SDK."""
        registered = json.loads(fixture.texts[fixture.transcript])
        label = fixture.label

        # Deny by the owner with reason `variant`: rendered on the write tools only.
        made = self.register(fixture)
        if made:
            run_id, digest = made
            resumed = self.decide(fixture, "deny", run_id,
                                  {"approved": False, "decider_uid": OWNER, "turn_digest": digest, "reason": "variant"},
                                  self.denied(fixture, "run_owner", "variant"))
            if resumed:
                problems = kept_whole(resumed["raw"], fixture.texts, fixture.transcript)
                self.report.check(not problems, f"{label} deny: the resumed input holds every registered member "
                                  "byte for byte (order, 1.50, signatures), then the results", problems)
                if whole:
                    self.denied_inputs[fixture.format] = resumed
                reply = self.through_sdk(fixture, "deny", resumed, registered)
                status, raw = self.service.request("GET", f"/v1/runs/{run_id}/model-input?format=openai-chat")
                code = json.loads(raw).get("code") if raw.startswith(b"{") else None
                self.report.check(status == 422 and code == "format_not_representable",
                                  f"{label}: ?format=openai-chat is refused 422 format_not_representable (§14)",
                                  [] if status == 422 and code == "format_not_representable" else
                                  [f"{status} {raw[:200]!r}"])
                if reply is not None and whole:
                    self.second_turn(fixture, run_id, resumed, reply)

        # Approve the whole turn: the executor runs every call; fail_* answers is_error.
        made = self.register(fixture)
        if made:
            run_id, digest = made
            before = len(self.executor.calls)
            resumed = self.decide(fixture, "approve", run_id,
                                  {"approved": True, "decider_uid": OWNER, "turn_digest": digest},
                                  self.executed(fixture, registered))
            ran = [(c["call_id"], c["tool"]) for c in self.executor.calls[before:]]
            self.report.check(sorted(ran) == sorted(fixture.calls), f"{label} approve: the executor ran every call "
                              "once", [] if sorted(ran) == sorted(fixture.calls) else [f"ran {ran}"])
            if resumed:
                self.through_sdk(fixture, "approve", resumed, registered)

        if not whole:
            return
        # Per call: approve, approve with edited arguments, deny with reason `skip`.
        made = self.register(fixture)
        if made:
            run_id, digest = made
            edited = '{"path":"/terrace/menu"}'
            (c0, t0), (c1, t1), (c2, t2) = fixture.calls
            plain = self.executed(fixture, registered)
            content1, error1 = executed_text(t1, json.loads(edited))
            want = [plain[0], (c1, t1, f"{edit_note('run_owner', edited)}\n\n{content1}", error1),
                    (c2, t2, denied_text(t2, "run_owner", "skip", fixture.effect(t2)), True)]
            body = {"decider_uid": OWNER, "turn_digest": digest, "calls": [
                {"call_id": c0, "approved": True}, {"call_id": c1, "approved": True, "arguments": edited},
                {"call_id": c2, "approved": False, "reason": "skip"}]}
            resumed = self.decide(fixture, "per-call", run_id, body, want)
            if resumed:
                problems = kept_whole(resumed["raw"], fixture.texts, fixture.transcript)
                self.report.check(not problems, f"{label} per-call: the transcript is unchanged by the edit "
                                  "(the note goes in the result)", problems)
                self.through_sdk(fixture, "per-call", resumed, registered)

    def executed(self, fixture: Fixture, registered: list) -> list[tuple[str, str, str, bool]]:
        """Each call's expected result when the executor runs it with its arguments as the loop proposed them."""
        arguments = {call: args for call, _, args in proposed_arguments(fixture.format, registered)}
        return [(c, t, *executed_text(t, arguments[c])) for c, t in fixture.calls]

    def second_turn(self, fixture: Fixture, run_id: str, first: dict, reply: Any) -> None:
        """The provider's next tool turn (the stand-in's answer, as the SDK parsed it) appended with POST /turns,
        denied, and sent again: both tool turns must keep the provider's rules."""
        format = fixture.format
        status, raw = self.service.request("POST", f"/v1/runs/{run_id}/turns", next_turn(format, reply))
        if not self.report.check(status == 200, f"{fixture.label} second turn: POST /turns takes the provider's "
                                 "next turn as its SDK returned it", [] if status == 200 else
                                 [f"{status} {raw[:300]!r}"]):
            return
        run = json.loads(raw)
        [call] = run["turn"]["pending_calls"]
        appended = json.loads(next_turn(format, reply))[fixture.transcript]
        want = [(call["id"], NEXT_TOOL, denied_text(NEXT_TOOL, "run_owner", None, fixture.effect(NEXT_TOOL)), True)]
        resumed = self.decide(fixture, "second turn deny", run_id,
                              {"approved": False, "decider_uid": OWNER, "turn_digest": run["turn"]["digest"]}, want)
        if resumed:
            transcript = first["input"][fixture.transcript] + appended
            self.through_sdk(fixture, "second turn", resumed, transcript)

    def negative(self, format: str, description: str, breaks: Callable[[dict], None], rule: str) -> None:
        """A broken copy of the denied run's resumed input must be refused by the stand-in, naming `rule`."""
        name = f"{format}: the stand-in refuses a copy with {description}"
        resumed = self.denied_inputs.get(format)
        if resumed is None:
            self.report.check(False, name, ["no resumed input to break"])
            return
        broken = copy.deepcopy(resumed)
        try:
            breaks(broken["input"])
        except Exception as error:
            self.report.check(False, name, [f"the self-test raised {type(error).__name__}: {error}"])
            return
        fixture = own(format)
        registered = json.loads(fixture.texts[fixture.transcript])
        self.standin.expect = expected(format, resumed["input"], resumed["results"], registered)
        before = len(self.standin.seen)
        try:
            sdk_send(format, self.standin, broken["input"])
            error = None
        except Exception as caught:
            error = caught
        problems = [p for s in self.standin.seen[before:] for p in s.problems]
        named = any(rule in p for p in problems)
        self.report.check(error is not None and refused(error) and named, name,
                          ([] if named else [f"no problem names {rule!r}"]) + [p[:160] for p in problems]
                          + ([] if problems else ["the stand-in took it"]))


def sdk_error(error: Exception) -> str:
    """The SDK's error, short: its first line, and for a validation error each line that names the offending
    field's value (pydantic lists every union member it tried)."""
    lines = str(error).splitlines()
    told = [line.strip() for k, line in enumerate(lines) if "base64" in line or "bytes_invalid" in line
            for line in (lines[k - 1], line) if k > 0]
    return " / ".join(([lines[0]] if lines else []) + told[:2])[:500]


def sdk_name(format: str) -> str:
    return {"anthropic": "anthropic", "openai-responses": "openai", "gemini": "google-genai"}[format]


def proposed_arguments(format: str, registered: list) -> list[tuple[str, str, dict]]:
    """(call id, tool, arguments) of the waiting turn, read from the registered transcript."""
    last = registered[-1]
    if format == "anthropic":
        return [(b["id"], b["name"], b["input"]) for b in last["content"] if b.get("type") == "tool_use"]
    if format == "openai-responses":
        pending = {call for call, _ in pending_calls(format, registered)}
        return [(i["call_id"], i["name"], json.loads(i["arguments"])) for i in registered
                if i.get("type") == "function_call" and i["call_id"] in pending]
    parts = [p["functionCall"] for p in last["parts"] if "functionCall" in p]
    return [(p.get("id") or f"call_{k}", p["name"], p["args"]) for k, p in enumerate(parts)]


# --- negative self-tests -----------------------------------------------------------------------------------------


def _last_assistant(model_input: dict) -> dict:
    return [m for m in model_input["messages"] if m["role"] == "assistant"][-1]


def _results_message(model_input: dict) -> dict:
    return model_input["messages"][-1]


def _swap_first_two(blocks: list) -> None:
    blocks[0], blocks[1] = blocks[1], blocks[0]


def _drop_reasoning_before_pending(model_input: dict) -> None:
    items = model_input["input"]
    last = max(k for k, i in enumerate(items) if i.get("type") == "reasoning")
    del items[last]


def _pending_model_content(model_input: dict) -> dict:
    return [c for c in model_input["contents"] if c["role"] == "model"][-1]


def _last_responses(model_input: dict) -> list:
    return [p["functionResponse"] for p in model_input["contents"][-1]["parts"]]


NEGATIVE = [
    ("anthropic", "the pending turn's thinking signature dropped",
     lambda m: _last_assistant(m)["content"][0].pop("signature"), "signature"),
    ("anthropic", "a thinking block moved after the tool_use blocks",
     lambda m: _last_assistant(m)["content"].append(_last_assistant(m)["content"].pop(0)), "thinking block after"),
    ("anthropic", "the redacted_thinking block's data changed",
     lambda m: _last_assistant(m)["content"][1].update(data="EmwKAhgBEgy3va3pzix"), "data differs"),
    ("anthropic", "two tool_result blocks swapped",
     lambda m: _swap_first_two(_results_message(m)["content"]), "in order"),
    ("anthropic", "is_error dropped from a denied result",
     lambda m: _results_message(m)["content"][0].pop("is_error"), "result 0"),
    ("openai-responses", "the reasoning item before the pending calls dropped",
     _drop_reasoning_before_pending, "without the reasoning item"),
    ("openai-responses", "a reasoning item's encrypted_content changed",
     lambda m: next(i for i in m["input"] if i.get("type") == "reasoning").update(encrypted_content="gAAAA"),
     "encrypted_content differs"),
    ("openai-responses", "a function_call_output dropped",
     lambda m: m["input"].pop(), "answered by 0"),
    ("gemini", "the pending call's thoughtSignature dropped",
     lambda m: _pending_model_content(m)["parts"][1].pop("thoughtSignature"), "thoughtSignature"),
    ("gemini", "the id dropped from a functionResponse whose call had one",
     lambda m: _last_responses(m)[0].pop("id"), "id only where"),
    ("gemini", "an error result sent as output",
     lambda m: _last_responses(m)[0].update(response={"output": _last_responses(m)[0]["response"]["error"]}),
     "result 0"),
]


def bytes_self_test(suite: Suite, report: Report) -> None:
    """The bytes check must fail on an answer whose number was re-serialized (1.50 as 1.5)."""
    resumed = suite.denied_inputs.get("anthropic")
    name = "anthropic: the bytes check refuses an answer with 1.50 re-serialized as 1.5"
    if resumed is None or "1.50" not in resumed["raw"]:
        report.check(False, name, ["no resumed input holding 1.50"])
        return
    fixture = own("anthropic")
    problems = kept_whole(resumed["raw"].replace("1.50", "1.5"), fixture.texts, fixture.transcript)
    report.check(bool(problems), name, problems)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--binary", default="target/debug/approval-resume")
    parser.add_argument("--admin-url", default=os.environ.get("SDK_ADMIN_URL",
                                                              "postgres://postgres@127.0.0.1:5432/postgres"))
    parser.add_argument("--base-url")
    parser.add_argument("--key")
    parser.add_argument("--executor-port", type=int, default=0)
    args = parser.parse_args()

    report = Report()
    print(f"# anthropic {anthropic.__version__}, openai {openai.__version__}, google-genai {genai.__version__}")
    fixtures = [own(format) for format in FORMATS]
    others = shared(SHARED_FIXTURES)
    tools = {t["name"]: t for f in fixtures + others for t in f.tools}
    executor = Executor(list(tools.values()), args.executor_port)
    standin = StandIn()
    service = Service(args, executor)
    try:
        status, _ = service.request("PUT", f"/v1/users/{OWNER}", json.dumps(
            {"username": "ada", "is_admin": False, "can_approve_others": False, "disabled": False}))
        report.check(status == 200, "the owner is put", [] if status == 200 else [str(status)])
        suite = Suite(service, standin, executor, report)
        for fixture in fixtures:
            suite.scenario(fixture, whole=True)
        for fixture in others:
            suite.scenario(fixture, whole=False)
        for format, description, breaks, rule in NEGATIVE:
            suite.negative(format, description, breaks, rule)
        bytes_self_test(suite, report)
        report.check(not service.panicked(), "the service never panicked")
    finally:
        service.stop()
        standin.stop()
        executor.server.shutdown()
    print(f"{report.passed} passed, {report.failed} failed")
    return 1 if report.failed else 0


if __name__ == "__main__":
    sys.exit(main())
