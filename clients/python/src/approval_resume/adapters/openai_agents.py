"""The OpenAI Agents SDK (`openai-agents`) in the loop of approval-resume (docs/design.md §15, §16).

`OpenAIAgentsWorker.start` runs the agent; when it stops on interruptions (function tools with `needs_approval`),
the worker registers a run in `openai-responses` (the SDK's input list, the pending calls last), the SDK's
`RunState` JSON (`state.to_json()`) as its `worker_state`, and every function tool of the agent `executor: "worker"`
(editable: the SDK's approval carries no arguments, so the adapter's wrapper of the tool hands an edited call the
decider's arguments, and the SDK runs it as any approved call, its hooks and guardrails included).

`OpenAIAgentsWorker.resume`, called when the run is released or resumed (the feed, a webhook, or
`wait_until_decided`), reads only the service, so any process continues a run:

1. released: the worker claims the released calls (`POST /v1/runs/{id}/claim`; refused, it runs nothing and answers
   `claimed`: another worker has the run), renewing the claim while they run; the state is restored
   (`RunState.from_string`), the released calls without a result are approved (`state.approve`) and the SDK runs
   them (an edited one with the decider's arguments), stopped before it calls the model (the model may go on only
   once the service holds every result); the worker posts their bare outputs under the claim (the service puts the
   edit note before an edited call's);
2. resumed: the state is restored again, each released call approved with its recorded result (the SDK does not
   run it again: the agent's function tools are wrapped to answer a recorded call from the service), each denied or
   expired call rejected with the service's exact text (`state.reject(item, rejection_message=…)`), and the SDK
   runs on. New interruptions append a turn (`POST /v1/runs/{id}/turns`, with the new state); a final output
   completes the run.

A registration or an appended turn that comes back decided (remembered decisions, docs/design.md §18) waits for
no click: the worker goes straight on with it by the same two steps, and on through each new turn the SDK stops
on that comes back decided too (`_straight_on`, at most `max_decided_turns` of them in one call).

Each released call's result is recorded as its tool completes. A released tool that raises (one built with
`failure_error_function=None`; the SDK's default turns the error into an ordinary output, posted as such with
`is_error: false`) gets the service's text for a failed call, `Error: tool "{name}" failed.`, `is_error: true` (the
exception goes to the log), so the other released calls go on and nothing runs twice; one cancelled while it runs
gets the interrupted text. If an error still escapes the SDK, the results of the calls that completed are posted
before it is raised again.

A worker that dies after a tool ran and before its result was posted leaves its claim to lapse: the service then
gives the call the `interrupted` result, and no worker runs it again. The SDK passes a tool no idempotency key;
inside a released call, `current_idempotency_key()` (no argument) gives `{run_id}:{call_id}` for the tool to pass to
what it changes.

Limits: only function tools of the starting agent are wrapped and declared (hosted, MCP, shell or computer tools
that need approval, and tools of handed-off agents, are refused with `ValueError` when they interrupt); a result the
SDK's failure handler wrote is posted `is_error: false` (the SDK does not mark it); `start`'s run `context` travels
in the state JSON as the SDK serializes it, and `resume` restores it without a deserializer of its own.
"""

import copy
import json
import uuid
from collections.abc import Mapping
from contextvars import ContextVar
from typing import Any

from ._install import missing_framework

try:
    from agents import Agent, FunctionTool, RunConfig, RunHooks, Runner, RunState, ToolApprovalItem
    from agents.result import RunResult
    from agents.tool_context import ToolContext
except ImportError as error:  # pragma: no cover - depends on the installed extras
    raise missing_framework(__name__, "the OpenAI Agents SDK", "openai-agents") from error

from ..async_client import AsyncClient
from ..models import DeclaredTool, Effect, JsonObject, PostedResult, RegisterRun, RunView
from . import _service, _straight_on
from ._service import WorkerStep

#: In the resumed step, the released calls' results the service holds, by call id: (tool name, text). A wrapped
#: tool answers a call of that id and tool with the text instead of running, once: the entry is then removed, so a
#: later call that reuses the id runs (None: outside the resumed step).
_RECORDED: ContextVar[dict[str, tuple[str, str]] | None] = ContextVar("approval_resume_recorded", default=None)
#: In the released step, where a wrapped tool leaves each released call's result, by call id, as the call completes
#: (None: outside that step).
_RAN: ContextVar[dict[str, PostedResult] | None] = ContextVar("approval_resume_ran", default=None)
#: In the released step, the id of the run whose released calls the SDK runs (None: outside that step).
_RUN_ID: ContextVar[str | None] = ContextVar("approval_resume_run_id", default=None)
#: In the released step, the edited arguments of the released calls a decider edited, by call id: the wrapped tool
#: runs with them instead of the model's (None: outside that step).
_EDITS: ContextVar[dict[str, str] | None] = ContextVar("approval_resume_edits", default=None)
#: While a wrapped tool runs a released call: `{run_id}:{call_id}`, what `current_idempotency_key()` answers.
_CALL_KEY: ContextVar[str | None] = ContextVar("approval_resume_call_key", default=None)


def current_idempotency_key() -> str | None:
    """Inside a released call run by this adapter: `{run_id}:{call_id}`; elsewhere `None`."""
    return _CALL_KEY.get()


class _ReleasedCallsRan(Exception):
    """Raised before the model is called once the SDK has run the released calls (see `OpenAIAgentsWorker._run`)."""


class _StopBeforeModel(RunHooks[Any]):
    """Run hooks for the released step: the SDK runs the approved calls, then raises `_ReleasedCallsRan` where it
    would call the model, which may read the turn only once the service holds every released call's result."""

    async def on_llm_start(self, context: Any, agent: Any, system_prompt: Any, input_items: Any) -> None:
        raise _ReleasedCallsRan()


def _output_text(output: Any) -> str:
    """A tool's output as the worker posts it: a string as it is, anything else as JSON."""
    return output if isinstance(output, str) else json.dumps(output, default=str)


def _guarded(tool: FunctionTool) -> FunctionTool:
    """The tool, for a worker: in the resumed step, a released call whose result the service holds is answered with
    that result, once, without running (`_RECORDED`); in the released step, an edited call runs with the decider's
    arguments (`_EDITS`), each call's result is recorded as it completes (`_RAN`), and an exception becomes the
    failed result (a cancellation the interrupted one, raised on); elsewhere the tool runs as it is."""
    invoke = tool.on_invoke_tool

    async def on_invoke_tool(context: ToolContext[Any], arguments: str) -> Any:
        call_id = context.tool_call_id
        recorded = _RECORDED.get()
        if recorded is not None and call_id in recorded and recorded[call_id][0] == tool.name:
            return recorded.pop(call_id)[1]
        ran, run_id = _RAN.get(), _RUN_ID.get()
        if ran is None or run_id is None:
            return await invoke(context, arguments)
        arguments = (_EDITS.get() or {}).get(call_id, arguments)
        token = _CALL_KEY.set(_service.idempotency_key(run_id, call_id))
        try:
            output = await invoke(context, arguments)
        except Exception:
            _service.logger.exception("run %s: released call %s (%s) raised; posted failed", run_id, call_id, tool.name)
            ran[call_id] = _service.failed_result(call_id, tool.name)
            return ran[call_id]["content"]
        except BaseException:
            ran[call_id] = _service.interrupted_result(call_id, tool.name)
            raise
        finally:
            _CALL_KEY.reset(token)
        ran[call_id] = {"call_id": call_id, "content": _output_text(output), "is_error": False}
        return output

    guarded = copy.copy(tool)
    guarded.on_invoke_tool = on_invoke_tool
    return guarded


def _waiting_last(items: list[JsonObject], pending: set[str]) -> list[JsonObject]:
    """The items with the pending function calls last: the service takes the calls after the last user message or
    function call output as the waiting turn, and the SDK lists the outputs of calls it ran without approval (in the
    same model response) after them."""
    waiting = [item for item in items if item.get("type") == "function_call" and item.get("call_id") in pending]
    return [item for item in items if item not in waiting] + waiting


class OpenAIAgentsWorker:
    """Runs one agent for many runs. `client` needs an API key with `runs:write` and `runs:read`."""

    def __init__(
        self,
        client: AsyncClient,
        agent: Agent[Any],
        *,
        run_config: RunConfig | None = None,
        effects: Mapping[str, Effect] | None = None,
        registration: Mapping[str, Any] | None = None,
        max_decided_turns: int = _straight_on.MAX_DECIDED_TURNS,
    ) -> None:
        """`effects`: each tool's effect (absent: `write` for a tool with `needs_approval`, else `read`).
        `registration`: further members of every registration (`privacy_level`, `approval_ttl_secs`, …).
        `max_decided_turns`: how many turns that come back decided (remembered decisions) one `start` or `resume`
        goes straight on through before it answers `decided`."""
        self._client = client
        self._agent = agent.clone(
            tools=[_guarded(tool) if isinstance(tool, FunctionTool) else tool for tool in agent.tools]
        )
        self._run_config = run_config or RunConfig()
        self._effects = dict(effects or {})
        self._registration = dict(registration or {})
        self._max_decided_turns = _straight_on.checked_limit(max_decided_turns)

    async def start(
        self, owner_uid: int, input: str | list[Any], *, run_id: str | None = None, context: Any = None
    ) -> WorkerStep[Any]:
        """Runs the agent on `input` for `owner_uid`; on interruptions registers the run (`run_id`, or a random UUID)
        and answers `suspended` while it waits for a person, or, when the registration comes back decided
        (remembered decisions), goes straight on as `resume` does; otherwise `finished` with the final output and no
        run."""
        result = await Runner.run(self._agent, input, run_config=self._run_config, context=context)
        if not result.interruptions:
            return WorkerStep("finished", None, output=result.final_output)
        run_id = run_id or str(uuid.uuid4())
        pending = self._pending(run_id, result.interruptions)
        body: RegisterRun = {
            **self._registration,  # type: ignore[typeddict-item]
            "id": run_id,
            "owner_uid": owner_uid,
            "format": "openai-responses",
            "input": _waiting_last(self._items(result), pending),
            "tools": self._declared_tools(),
            "worker_state": result.to_state().to_json(),
        }
        if isinstance(self._agent.instructions, str):
            body["instructions"] = self._agent.instructions
        registered = _straight_on.registered(run_id, await self._client.register_run(body))
        return await _straight_on.go_on(registered, self._resume_once, self._max_decided_turns)

    async def resume(self, run_id: str) -> WorkerStep[Any]:
        """Continues the run from what the service holds (see the module's docstring). Safe to call again after a crash
        at any point, and in any process. A new turn that comes back decided is gone on with at once, up to
        `max_decided_turns` of them."""
        step = await self._resume_once(run_id)
        return await _straight_on.go_on(step, self._resume_once, self._max_decided_turns)

    async def _resume_once(self, run_id: str) -> WorkerStep[Any]:
        """`resume` for one decided turn; a new turn's step is `suspended`, or `decided` when it came back decided."""
        run, undecided = await _service.load_decided(self._client, run_id)
        if undecided is not None:
            return undecided
        # The run's answers after this (results posted) carry no worker_state: keep the one read here.
        worker_state = run.get("worker_state")
        decided = await _service.verdicts(self._client, run)
        if decided.unrun():
            try:
                async with _service.claimed(self._client, run_id) as held:
                    run = await self._run_released(run, worker_state, held)
            except _service.ClaimRefused:
                return await _service.refused_step(self._client, run_id)
            if run["status"] != "resumed":
                return WorkerStep("waiting", run_id, run)
            decided = await _service.verdicts(self._client, run)
        elif run["status"] != "resumed":
            return WorkerStep("waiting", run_id, run)

        state, items = await self._restore(run, worker_state)
        for call_id, item in items.items():
            if call_id in decided.released:
                state.approve(item)
            else:
                state.reject(item, rejection_message=decided.texts[call_id])
        recorded = _RECORDED.set(
            {call_id: (call["tool"], decided.texts[call_id]) for call_id, call in decided.released.items()}
        )
        try:
            result = await Runner.run(self._agent, state, run_config=self._run_config)
        finally:
            _RECORDED.reset(recorded)
        if not result.interruptions:
            await self._client.complete_run(run_id)
            return WorkerStep("finished", run_id, output=result.final_output)
        pending = self._pending(run_id, result.interruptions)
        decided_ids = set(items)
        everything = self._items(result)
        answered = [
            index
            for index, item in enumerate(everything)
            if item.get("type") == "function_call_output" and item.get("call_id") in decided_ids
        ]
        following = everything[_service.start_of_next_turn(run_id, answered, decided_ids) :]
        appended = await self._client.append_turn(
            run_id,
            {"input": _waiting_last(following, pending), "worker_state": result.to_state().to_json()},
        )
        return _straight_on.registered(run_id, appended)

    async def _run_released(self, run: RunView, worker_state: Any, held: _service.HeldClaim) -> RunView:
        """Under the held claim, the SDK runs the released calls without a result, and nothing else: they are
        approved, the turn's other calls left undecided (so the SDK stops on them), and a hook stops it before the
        model if it would go on. An edited call runs with the decider's arguments: the SDK's approval carries none,
        so the wrapped tool takes them in place of the proposed ones. The wrapped tools record each result as it
        completes; if an error escapes the SDK anyway, the completed ones are posted before it is raised again, so
        the next `resume` runs only the others."""
        unrun = held.unrun()
        state, items = await self._restore(run, worker_state)
        edits: dict[str, str] = {}
        for call in unrun:
            state.approve(items[call["call_id"]])
            if call["edited"] and "arguments" in call:
                edits[call["call_id"]] = call["arguments"]
        ran: dict[str, PostedResult] = {}
        tokens = (_RAN.set(ran), _RUN_ID.set(run["id"]), _EDITS.set(edits))
        try:
            await Runner.run(self._agent, state, run_config=self._run_config, hooks=_StopBeforeModel())
        except _ReleasedCallsRan:
            pass
        except BaseException:
            await _service.post_completed(self._client, held, unrun, ran)
            raise
        finally:
            _RAN.reset(tokens[0])
            _RUN_ID.reset(tokens[1])
            _EDITS.reset(tokens[2])
        missing = [call["call_id"] for call in unrun if call["call_id"] not in ran]
        if missing:
            await _service.post_completed(self._client, held, unrun, ran)
            raise RuntimeError(f"run {run['id']}: the SDK did not run the released calls {missing}")
        return await _service.post_claimed(self._client, held, [ran[call["call_id"]] for call in unrun])

    async def _restore(
        self, run: RunView, worker_state: Any
    ) -> tuple[RunState[Any, Agent[Any]], dict[str, ToolApprovalItem]]:
        """The run's state, and its interruption for each pending call of the service's turn."""
        state = await RunState.from_string(self._agent, json.dumps(worker_state))
        interruptions = {_call_id(item): item for item in state.get_interruptions()}
        items: dict[str, ToolApprovalItem] = {}
        for call in run["turn"]["pending_calls"]:
            if call["id"] not in interruptions:
                raise ValueError(f"run {run['id']}: its worker_state has no interruption for call {call['id']}")
            items[call["id"]] = interruptions[call["id"]]
        return state, items

    def _pending(self, run_id: str, interruptions: list[ToolApprovalItem]) -> set[str]:
        """The call ids of the interruptions, the calls the run waits on; refuses an interruption that is not a
        function tool of the agent (the adapter declares and wraps only those)."""
        names = {tool.name for tool in self._agent.tools if isinstance(tool, FunctionTool)}
        for item in interruptions:
            if item.tool_name not in names:
                raise ValueError(f"run {run_id}: {item.tool_name!r} is not a function tool of the agent")
        return {_call_id(item) for item in interruptions}

    @staticmethod
    def _items(result: RunResult) -> list[JsonObject]:
        """The SDK's input list after a run (`to_input_list()`): the items the service's `openai-responses` takes."""
        return [dict(item) for item in result.to_input_list()]

    def _declared_tools(self) -> list[DeclaredTool]:
        declared: list[DeclaredTool] = []
        for tool in self._agent.tools:
            if isinstance(tool, FunctionTool):
                effect: Effect = self._effects.get(tool.name) or ("read" if tool.needs_approval is False else "write")
                declared.append(_service.declared_tool(tool.name, effect))
        return declared


def _call_id(item: ToolApprovalItem) -> str:
    call_id = item.call_id
    if not isinstance(call_id, str):
        raise ValueError(f"the interruption of {item.tool_name!r} has no call id")
    return call_id


