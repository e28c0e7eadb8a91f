#!/usr/bin/env python3
"""Validates the golden model inputs (tests/golden/model_input.*.json) against the providers' own request types.

The golden files are written by the Rust test `tests/api/formats.rs` from what the service renders (docs/design.md §7).
Each is checked in two layers:

* pydantic: `TypeAdapter` over the SDK's TypedDicts (openai, anthropic). pydantic is lenient here: it ignores
  unknown keys of a TypedDict, and it validates `Iterable[...]` fields lazily, so this script drains every such
  iterator to make the nested blocks count.
* strict: a walk of every dict in the payload against the TypedDict it must be (union members picked by their
  `type`/`role` literal), refusing keys the TypedDict does not declare and requiring its required keys. The SDKs
  write their annotations as strings (PEP 563), and on Python 3.11 `__required_keys__` then misses the
  `Required[...]` markers, so required keys are read from the resolved annotations as well.

A negative self-test then breaks copies of the payloads on purpose; a broken payload that is accepted counts as a
failure. One line per check; the last line is `N passed, M failed`; the exit status is 1 if any failed.
"""

from __future__ import annotations

import collections.abc
import copy
import functools
import json
import sys
import types
import typing
from pathlib import Path
from typing import Any, Callable, Literal, Union

import typing_extensions
from pydantic import BaseModel, TypeAdapter, ValidationError

import anthropic
import openai
from anthropic.types import MessageParam
from anthropic.types.message_create_params import MessageCreateParamsNonStreaming
from openai.types.chat import ChatCompletionMessageParam
from openai.types.chat.completion_create_params import CompletionCreateParamsNonStreaming
from openai.types.responses import ResponseInputParam
from openai.types.responses.response_create_params import ResponseCreateParamsNonStreaming

GOLDEN = Path(__file__).resolve().parent.parent / "golden"
FORMATS = ("openai-chat", "anthropic", "openai-responses")

# Wrappers that say something about a key, not about its value.
_QUALIFIERS = {
    getattr(module, name)
    for module in (typing, typing_extensions)
    for name in ("Required", "NotRequired", "ReadOnly")
    if hasattr(module, name)
}
_ANNOTATED = {typing.Annotated, typing_extensions.Annotated}
_UNIONS = {Union, types.UnionType}
_LITERALS = {Literal, typing_extensions.Literal}
_SEQUENCES = {list, tuple, collections.abc.Iterable, collections.abc.Sequence, collections.abc.Collection}
_MAPPINGS = {dict, collections.abc.Mapping}


# --- strict walk -------------------------------------------------------------------------------------------------


def _qualifier(tp: Any) -> str | None:
    """`Required` or `NotRequired` when the annotation says so at its top (under `Annotated`), else None."""
    while True:
        origin = typing_extensions.get_origin(tp)
        if origin in _ANNOTATED:
            tp = typing_extensions.get_args(tp)[0]
        elif origin in _QUALIFIERS:
            name = getattr(origin, "_name", None) or getattr(origin, "__name__", "")
            if name in ("Required", "NotRequired"):
                return name
            tp = typing_extensions.get_args(tp)[0]
        else:
            return None


def _bare(tp: Any) -> Any:
    """The type without `Annotated`, `Required`, `NotRequired`, `ReadOnly`."""
    while typing_extensions.get_origin(tp) in _ANNOTATED | _QUALIFIERS:
        tp = typing_extensions.get_args(tp)[0]
    return tp


@functools.cache
def _fields(td: type) -> tuple[dict[str, Any], frozenset[str]]:
    """A TypedDict's resolved annotations and its required keys."""
    hints = typing_extensions.get_type_hints(td, include_extras=True)
    marked = {key: _qualifier(tp) for key, tp in hints.items()}
    required = set(getattr(td, "__required_keys__", ())) | {k for k, q in marked.items() if q == "Required"}
    required -= {k for k, q in marked.items() if q == "NotRequired"}
    return hints, frozenset(required)


def _name(tp: Any) -> str:
    return getattr(tp, "__name__", None) or repr(tp)


def _union_members(tp: Any) -> list[Any]:
    members = []
    for member in typing_extensions.get_args(tp):
        member = _bare(member)
        if typing_extensions.get_origin(member) in _UNIONS:
            members.extend(_union_members(member))
        else:
            members.append(member)
    return members


def _is_record(tp: Any) -> bool:
    """A type whose values are JSON objects with declared keys."""
    return typing_extensions.is_typeddict(tp) or (isinstance(tp, type) and issubclass(tp, BaseModel))


def _declared(tp: Any) -> dict[str, Any]:
    if typing_extensions.is_typeddict(tp):
        return _fields(tp)[0]
    return {field.alias or name: field.annotation for name, field in tp.model_fields.items()}


def _admits(tp: Any, key: str, value: Any) -> bool:
    """Whether a union member can carry `key: value` (its discriminator), judged by the key's literal type."""
    if not _is_record(tp):
        return typing_extensions.get_origin(tp) in _MAPPINGS
    annotation = _declared(tp).get(key)
    if annotation is None:
        return False
    return not check(value, annotation, "")


def check(value: Any, tp: Any, path: str) -> list[str]:
    """Every way `value` departs from `tp`; empty when it fits exactly."""
    tp = _bare(tp)
    origin = typing_extensions.get_origin(tp)
    args = typing_extensions.get_args(tp)
    if tp is Any or tp is object:
        return []
    if tp is None or tp is type(None):
        return [] if value is None else [f"{path}: expected null, got {value!r}"]
    if origin in _UNIONS:
        return _check_union(value, _union_members(tp), path)
    if origin in _LITERALS:
        if any(value == arg and type(value) is type(arg) for arg in args):
            return []
        return [f"{path}: expected one of {list(args)}, got {value!r}"]
    if typing_extensions.is_typeddict(tp) or (isinstance(tp, type) and issubclass(tp, BaseModel)):
        return _check_record(value, tp, path)
    if origin in _MAPPINGS:
        if not isinstance(value, dict):
            return [f"{path}: expected an object, got {type(value).__name__}"]
        item = args[1] if len(args) == 2 else Any
        return [problem for key, v in value.items() for problem in check(v, item, f"{path}.{key}")]
    if origin in _SEQUENCES or _name(origin) == "SequenceNotStr":
        if not isinstance(value, list):
            return [f"{path}: expected an array, got {type(value).__name__}"]
        item = args[0] if args else Any
        return [problem for i, v in enumerate(value) for problem in check(v, item, f"{path}[{i}]")]
    scalars: dict[Any, Callable[[Any], bool]] = {
        str: lambda v: isinstance(v, str),
        bool: lambda v: isinstance(v, bool),
        int: lambda v: isinstance(v, int) and not isinstance(v, bool),
        float: lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    }
    if tp in scalars:
        return [] if scalars[tp](value) else [f"{path}: expected {tp.__name__}, got {value!r}"]
    # Anything else (a protocol, a file type) has no JSON form to hold the payload to: it never fits a JSON value.
    return [f"{path}: no JSON value fits {_name(tp)}"]


def _kind(tp: Any) -> str:
    """The JSON kind a type's values have: object, array or scalar."""
    if _is_record(tp) or typing_extensions.get_origin(tp) in _MAPPINGS:
        return "object"
    origin = typing_extensions.get_origin(tp)
    if origin in _SEQUENCES or _name(origin) == "SequenceNotStr":
        return "array"
    return "scalar"


def _check_union(value: Any, members: list[Any], path: str) -> list[str]:
    """Fits when one member fits. Members of the value's JSON kind are tried, objects narrowed by `type`, then
    `role`, so a failure is reported against the members the value meant to be, not against all of them."""
    kind = "object" if isinstance(value, dict) else "array" if isinstance(value, list) else "scalar"
    candidates = [m for m in members if _kind(m) == kind]
    if not candidates:
        return [f"{path}: {type(value).__name__} fits no member of the union"]
    if kind == "object":
        for key in ("type", "role"):
            if key in value:
                narrowed = [m for m in candidates if _admits(m, key, value[key])]
                if not narrowed:
                    return [f"{path}: no member of the union takes {key}={value[key]!r}"]
                candidates = narrowed
    found = []
    for member in candidates:
        problems = check(value, member, path)
        if not problems:
            return []
        found.append((member, problems))
    if len(found) > 3:  # a wide union of scalars or unnarrowed objects: the closest member says the most
        found = [min(found, key=lambda pair: len(pair[1]))]
    said = lambda member: f" (as {_name(member)})" if _is_record(member) else ""  # noqa: E731
    return [f"{p}{said(member)}" for member, problems in found for p in problems]


def _check_record(value: Any, tp: Any, path: str) -> list[str]:
    if not isinstance(value, dict):
        return [f"{path}: expected an object ({_name(tp)}), got {type(value).__name__}"]
    if typing_extensions.is_typeddict(tp):
        declared, required = _fields(tp)
    else:
        declared = _declared(tp)
        fields = tp.model_fields.items()
        required = frozenset(field.alias or name for name, field in fields if field.is_required())
    problems = [f"{path}: key {key!r} is not in {_name(tp)}" for key in value if key not in declared]
    problems += [f"{path}: required key {key!r} of {_name(tp)} is missing" for key in sorted(required - set(value))]
    for key, v in value.items():
        if key in declared:
            problems += check(v, declared[key], f"{path}.{key}")
    return problems


# --- pydantic ----------------------------------------------------------------------------------------------------


def _drain(value: Any) -> None:
    """Consumes pydantic's lazy iterators (from `Iterable[...]` fields), so their items are validated too."""
    if isinstance(value, dict):
        for v in value.values():
            _drain(v)
    elif isinstance(value, (list, tuple)):
        for v in value:
            _drain(v)
    elif isinstance(value, collections.abc.Iterator):
        for v in value:
            _drain(v)


@functools.cache
def _adapter(tp: Any) -> TypeAdapter:
    return TypeAdapter(tp)


def pydantic_problems(value: Any, tp: Any) -> list[str]:
    try:
        _drain(_adapter(tp).validate_python(value))
    except ValidationError as error:
        # Union branches appear in `loc` as their whole member list; a short name keeps the line readable.
        short = lambda part: str(part) if len(str(part)) <= 40 else str(part).split("[", 1)[0] + "[…]"  # noqa: E731
        return [f"{'.'.join(map(short, e['loc']))}: {e['msg']}" for e in error.errors()]
    return []


# --- the checks --------------------------------------------------------------------------------------------------

MODEL = {"openai-chat": "gpt-4.1", "anthropic": "claude-sonnet-4-5", "openai-responses": "gpt-4.1"}
PROVIDER_KEYS = {
    "openai-chat": {"messages"},
    "anthropic": {"system", "messages"},
    "openai-responses": {"instructions", "input"},
}


def request_of(format: str, payload: dict) -> dict:
    """The full create-request body: the payload without our `format` envelope key, plus the model (and max_tokens)."""
    body = {key: value for key, value in payload.items() if key != "format"}
    body["model"] = MODEL[format]
    if format == "anthropic":
        body["max_tokens"] = 1024
    return body


def layers(format: str, payload: dict) -> list[tuple[str, Callable[[], list[str]]]]:
    """The checks of one payload, each a name and a thunk returning its problems."""
    body = request_of(format, payload)
    envelope = lambda: (  # noqa: E731
        [f"format is {payload.get('format')!r}"] * (payload.get("format") != format)
        + [f"unexpected top-level key {k!r}" for k in sorted(set(payload) - PROVIDER_KEYS[format] - {"format"})]
    )
    if format == "openai-chat":
        messages = payload.get("messages")
        return [
            ("envelope", envelope),
            ("pydantic messages: list[ChatCompletionMessageParam]",
             lambda: pydantic_problems(messages, list[ChatCompletionMessageParam])),
            ("strict messages: list[ChatCompletionMessageParam]",
             lambda: check(messages, list[ChatCompletionMessageParam], "messages")),
            ("pydantic request: CompletionCreateParamsNonStreaming",
             lambda: pydantic_problems(body, CompletionCreateParamsNonStreaming)),
            ("strict request: CompletionCreateParamsNonStreaming",
             lambda: check(body, CompletionCreateParamsNonStreaming, "request")),
            ("protocol: every tool call answered by a tool message, in order", lambda: chat_protocol(messages)),
        ]
    if format == "anthropic":
        messages = payload.get("messages")
        return [
            ("envelope", envelope),
            ("system is a str", lambda: check(payload.get("system"), str, "system")),
            ("pydantic messages: list[MessageParam]", lambda: pydantic_problems(messages, list[MessageParam])),
            ("strict messages: list[MessageParam]", lambda: check(messages, list[MessageParam], "messages")),
            ("pydantic request: MessageCreateParamsNonStreaming",
             lambda: pydantic_problems(body, MessageCreateParamsNonStreaming)),
            ("strict request: MessageCreateParamsNonStreaming",
             lambda: check(body, MessageCreateParamsNonStreaming, "request")),
            ("protocol: roles alternate, tool_use answered by tool_result first in the next user message",
             lambda: anthropic_protocol(messages)),
        ]
    items = payload.get("input")
    return [
        ("envelope", envelope),
        ("instructions is a str", lambda: check(payload.get("instructions"), str, "instructions")),
        ("pydantic input: ResponseInputParam", lambda: pydantic_problems(items, ResponseInputParam)),
        ("strict input: ResponseInputParam", lambda: check(items, ResponseInputParam, "input")),
        ("pydantic request: ResponseCreateParamsNonStreaming",
         lambda: pydantic_problems(body, ResponseCreateParamsNonStreaming)),
        ("strict request: ResponseCreateParamsNonStreaming",
         lambda: check(body, ResponseCreateParamsNonStreaming, "request")),
        ("protocol: every function_call answered by one function_call_output", lambda: responses_protocol(items)),
    ]


def chat_protocol(messages: Any) -> list[str]:
    problems, waiting = [], []
    for i, message in enumerate(messages if isinstance(messages, list) else []):
        role = message.get("role")
        if role == "tool":
            if not waiting or message.get("tool_call_id") != waiting[0]:
                problems.append(f"messages[{i}]: tool message for {message.get('tool_call_id')!r}, expected {waiting[:1]}")
            waiting = waiting[1:]
        else:
            if waiting:
                problems.append(f"messages[{i}]: {role} message while calls {waiting} are unanswered")
            waiting = [call.get("id") for call in message.get("tool_calls") or []]
    return problems + ([f"calls {waiting} are never answered"] if waiting else [])


def anthropic_protocol(messages: Any) -> list[str]:
    problems, previous_role, waiting = [], None, []
    for i, message in enumerate(messages if isinstance(messages, list) else []):
        role, content = message.get("role"), message.get("content")
        blocks = content if isinstance(content, list) else []
        if i == 0 and role != "user":
            problems.append("messages[0]: the first message must be from the user")
        if role == previous_role:
            problems.append(f"messages[{i}]: two {role} messages in a row")
        if role == "user":
            answered = [b.get("tool_use_id") for b in blocks if b.get("type") == "tool_result"]
            leading = [b.get("tool_use_id") for b in blocks[: len(answered)]]
            if answered != waiting:
                problems.append(f"messages[{i}]: tool_result ids {answered}, expected {waiting}")
            if leading != answered:
                problems.append(f"messages[{i}]: tool_result blocks must come before any other block")
            waiting = []
        elif role == "assistant":
            waiting = [b.get("id") for b in blocks if b.get("type") == "tool_use"]
        previous_role = role
    return problems


def responses_protocol(items: Any) -> list[str]:
    items = items if isinstance(items, list) else []
    calls = [item.get("call_id") for item in items if item.get("type") == "function_call"]
    outputs = [item.get("call_id") for item in items if item.get("type") == "function_call_output"]
    problems = [] if calls == outputs else [f"function_call ids {calls} but outputs {outputs}"]
    seen: set = set()
    for i, item in enumerate(items):
        if item.get("type") == "function_call":
            seen.add(item.get("call_id"))
        elif item.get("type") == "function_call_output" and item.get("call_id") not in seen:
            problems.append(f"input[{i}]: output for {item.get('call_id')!r} before its call")
    return problems


# --- negative self-test ------------------------------------------------------------------------------------------


def _first(entries: list, match: Callable[[dict], bool]) -> dict:
    for entry in entries:
        if match(entry):
            return entry
        for block in entry.get("content") if isinstance(entry.get("content"), list) else []:
            if isinstance(block, dict) and match(block):
                return block
    raise LookupError("the golden payload has no entry to break")


def _broken(format: str, description: str, breaks: Callable[[dict], None], must_reject: set[str]):
    return format, description, breaks, must_reject


def _is(kind: str) -> Callable[[dict], bool]:
    return lambda entry: entry.get("type") == kind or entry.get("role") == kind


# Each case: which payload, what is broken, how, and which layers must refuse it. pydantic ignores unknown keys,
# so for those only the strict layer is held to it.
BROKEN = [
    _broken("anthropic", "tool_result without tool_use_id",
            lambda p: _first(p["messages"], _is("tool_result")).pop("tool_use_id"), {"pydantic", "strict"}),
    _broken("anthropic", "tool_use input as a JSON string",
            lambda p: _first(p["messages"], _is("tool_use")).update(input='{"page": 12}'), {"pydantic", "strict"}),
    _broken("anthropic", "tool_result is_error as a string",
            lambda p: _first(p["messages"], _is("tool_result")).update(is_error="true"), {"strict"}),
    _broken("anthropic", "unknown key on a tool_result",
            lambda p: _first(p["messages"], _is("tool_result")).update(outcome="denied"), {"strict"}),
    _broken("anthropic", "system as an object",
            lambda p: p.update(system={"text": "x"}), {"pydantic", "strict"}),
    _broken("openai-responses", "unknown key on a function_call item",
            lambda p: _first(p["input"], _is("function_call")).update(tool_name="x"), {"strict"}),
    _broken("openai-responses", "function_call arguments as an object",
            lambda p: _first(p["input"], _is("function_call")).update(arguments={"page": 12}),
            {"pydantic", "strict"}),
    _broken("openai-responses", "function_call_output without output",
            lambda p: _first(p["input"], _is("function_call_output")).pop("output"), {"pydantic", "strict"}),
    _broken("openai-responses", "input_text part as type text",
            lambda p: _first(p["input"], _is("input_text")).update(type="text"), {"pydantic", "strict"}),
    _broken("openai-chat", "tool message without tool_call_id",
            lambda p: _first(p["messages"], _is("tool")).pop("tool_call_id"), {"pydantic", "strict"}),
    _broken("openai-chat", "unknown key on a tool message",
            lambda p: _first(p["messages"], _is("tool")).update(is_error=True), {"strict"}),
    _broken("openai-chat", "tool call without its function",
            lambda p: _first(p["messages"], lambda m: bool(m.get("tool_calls")))["tool_calls"][0].pop("function"),
            {"pydantic", "strict"}),
    _broken("openai-chat", "unknown role",
            lambda p: _first(p["messages"], _is("tool")).update(role="tool_result"), {"pydantic", "strict"}),
]


def _layer(check_name: str) -> str:
    """pydantic, strict or protocol; the envelope and top-level type checks are strict checks too."""
    first = check_name.split(" ", 1)[0]
    return first if first in ("pydantic", "protocol") else "strict"


def findings(format: str, payload: dict) -> set[tuple[str, str]]:
    """Every (layer, problem) the checks of a payload report."""
    return {(_layer(name), problem) for name, problems in layers(format, payload) for problem in problems()}


def rejecting_layers(format: str, broken: dict, intact: dict) -> set[str]:
    """The layers that report something about `broken` they do not report about `intact`: a layer that already
    refuses the intact payload (a defect in our rendering) must not get credit for refusing the broken copy."""
    return {layer for layer, _ in findings(format, broken) - findings(format, intact)} - {"protocol"}


# --- main --------------------------------------------------------------------------------------------------------


def main() -> int:
    passed = failed = 0

    def report(ok: bool, name: str, notes: list[str]) -> None:
        """One line per check: the verdict, the check, and what it found (the first few problems)."""
        nonlocal passed, failed
        passed, failed = passed + ok, failed + (not ok)
        shown = notes[:4] + ([f"… {len(notes) - 4} more"] if len(notes) > 4 else [])
        print(f"{'PASS' if ok else 'FAIL'}  {name}" + (f" -- {'; '.join(shown)}" if shown else ""))

    print(f"# openai {openai.__version__}, anthropic {anthropic.__version__}, pydantic {__import__('pydantic').VERSION}")
    payloads = {}
    for format in FORMATS:
        path = GOLDEN / f"model_input.{format}.json"
        try:
            payloads[format] = json.loads(path.read_text())
        except (OSError, ValueError) as error:
            report(False, f"{format}: read {path.name}", [str(error)])
            continue
        for name, problems in layers(format, payloads[format]):
            try:
                found = problems()
            except Exception as error:  # a check that crashes is a failed check, not a crashed run
                found = [f"the check raised {type(error).__name__}: {error}"]
            report(not found, f"{format}: {name}", found)

    for format, description, breaks, must_reject in BROKEN:
        name = f"{format}: rejects a broken copy ({description})"
        if format not in payloads:
            report(False, name, ["no golden payload to break"])
            continue
        payload = copy.deepcopy(payloads[format])
        try:
            breaks(payload)
            refused = rejecting_layers(format, payload, payloads[format])
        except Exception as error:
            report(False, name, [f"the self-test raised {type(error).__name__}: {error}"])
            continue
        missing = must_reject - refused
        detail = [f"refused by {', '.join(sorted(refused)) or 'nobody'}"]
        report(not missing, name, detail + [f"not refused by {layer}" for layer in sorted(missing)])

    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
