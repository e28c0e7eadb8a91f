"""LangGraph and LangChain (`langgraph`, `langchain`) in the loop of approval-resume (docs/design.md §15, §16).

`LangGraphWorker` drives a compiled graph with a checkpointer: an agent of `langchain.agents.create_agent` with the
`HumanInTheLoopMiddleware` (its default, batched mode), or a graph of one's own whose node calls `interrupt()` with the
same value (`{"action_requests": [{"name", "args"}, …]}`, or `{"tool_calls": [<ToolCall>, …]}`) and reads the
middleware's answer (`{"decisions": [...]}`), keeping the conversation in a `messages` channel with a model node and a
tools node (`model_node`, `tools_node`).

`start` invokes the graph on a thread; an interrupt carrying tool calls registers a run in `openai-chat` (LangChain's
messages are modelled on OpenAI chat's, and `convert_to_openai_messages` is LangChain's own converter: roles, tool
calls with their ids, tool messages), every tool `executor: "worker"` (editable: the middleware takes an `edit`), and
`{"thread_id": …}` as `worker_state`: the graph's state stays in the application's checkpointer, whichever worker
resumes it reads it there.

`resume(run_id)`, called when the run is released or resumed, reads only the service and the checkpointer:

1. released: the worker claims the released calls (`POST /v1/runs/{id}/claim`; refused, it runs nothing and answers
   `claimed`), renewing the claim while they run, and resumes the thread with `Command(resume={"decisions": …})`:
   `approve` for a released call, `edit` with the decider's arguments for an edited one, `reject` for the others (run
   nowhere); the tools node runs the approved calls and the graph is stopped before the model node. The tools' bare
   outputs (read from LangChain's tool callbacks, before the middleware adds its own edit notice) are posted under
   the claim.
2. resumed: a thread still at the interrupt (a denial, an expiry, a claim that lapsed) is resumed with `reject` for
   every call, the service's exact text as its `message`; then every call of the turn gets the service's text as its
   tool message (`update_state` as the tools node: a denial's and an expiry's exact text, an edited call's edit note,
   a blank line and the output), so the model reads what the service wrote, word for word, whatever framing the
   middleware puts around a rejection; the graph runs on. A new interrupt appends a turn (`POST /turns`, the messages
   after the decided turn's); an end completes the run.

A registration or an appended turn that comes back decided (remembered decisions, docs/design.md §18) waits for
no click: the worker goes straight on with it by the same two steps, and on through each new turn the graph stops
on that comes back decided too (`_straight_on`, at most `max_decided_turns` of them in one call).

A worker that dies while a tool runs leaves its claim to lapse: the service gives the call the `interrupted` result and
no worker runs it again. LangChain passes a tool no idempotency key; inside a released call,
`current_idempotency_key(tool_call_id)` (the call id from the tool's `ToolRuntime`) gives `{run_id}:{call_id}`.

Limits: the middleware's `per_call` mode (one interrupt per call) is not adapted; a waiting model turn that mixes calls
needing approval with calls that do not is refused with `ValueError` (the service takes every call of the last
assistant message as pending, and the graph runs the others unasked); a tool that raises (LangGraph raises it out of
the graph) is posted failed, `Error: tool "{name}" failed.`, and the error raised on after the completed results are
posted.
"""

import json
import uuid
from collections.abc import Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

from ._install import missing_framework

try:
    from langchain_core.callbacks import AsyncCallbackHandler
    from langchain_core.messages import AIMessage, AnyMessage, ToolMessage, convert_to_openai_messages
    from langchain_core.runnables import RunnableConfig
    from langgraph.graph.state import CompiledStateGraph
    from langgraph.types import Command, StateSnapshot
except ImportError as error:  # pragma: no cover - depends on the installed extras
    raise missing_framework(__name__, "LangGraph and LangChain", "langgraph") from error

from ..async_client import AsyncClient
from ..models import ChatMessage, DeclaredTool, Effect, PostedResult, RegisterRun, RunView
from . import _service, _straight_on
from ._service import WorkerStep

#: In the released step, the id of the run whose released calls the graph runs (None: outside that step); gives
#: `current_idempotency_key`. LangChain copies the context into the threads that run synchronous tools.
_RUN_ID: ContextVar[str | None] = ContextVar("approval_resume_langgraph_run_id", default=None)
#: The message of a `reject` given in the released step to a call not run there: it never reaches the model, since
#: the resumed step replaces every call's tool message with the service's text before the model is called.
_NOT_RUN_HERE = "not run in this step: the service holds this call's result"


def current_idempotency_key(tool_call_id: str) -> str | None:
    """Inside a released call run by this adapter, given the call's id (`runtime.tool_call_id`): `{run_id}:{call_id}`;
    elsewhere `None`."""
    run_id = _RUN_ID.get()
    return None if run_id is None else _service.idempotency_key(run_id, tool_call_id)


@dataclass
class _ToolOutputs(AsyncCallbackHandler):
    """LangChain's tool callbacks in the released step: each released call's bare output as its tool ends (the
    middleware's edit notice is added outside the tool, so the callback sees the output alone), or the failed result
    when its tool raises."""

    released: frozenset[str]
    tools: Mapping[str, str]
    completed: dict[str, PostedResult] = field(default_factory=dict)
    calls: dict[UUID, str] = field(default_factory=dict)

    async def on_tool_start(
        self, serialized: dict[str, Any], input_str: str, *, run_id: UUID, **kwargs: Any
    ) -> None:
        call_id = kwargs.get("tool_call_id")
        if isinstance(call_id, str) and call_id in self.released:
            self.calls[run_id] = call_id

    async def on_tool_end(self, output: Any, *, run_id: UUID, **kwargs: Any) -> None:
        call_id = self.calls.get(run_id)
        if call_id is None:
            return
        if isinstance(output, ToolMessage):
            self.completed[call_id] = {
                "call_id": call_id,
                "content": _text(output.content),
                "is_error": output.status == "error",
            }
        else:
            self.completed[call_id] = {"call_id": call_id, "content": _text(output), "is_error": False}

    async def on_tool_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        call_id = self.calls.get(run_id)
        if call_id is None:
            return
        tool = self.tools[call_id]
        _service.logger.error(
            "run %s: released call %s (%s) raised; posted failed", _RUN_ID.get(), call_id, tool, exc_info=error
        )
        self.completed[call_id] = _service.failed_result(call_id, tool)


def _text(content: Any) -> str:
    return content if isinstance(content, str) else json.dumps(content, default=str)


class LangGraphWorker:
    """Runs one compiled graph (with a checkpointer) for many runs. `client` needs an API key with `runs:write` and
    `runs:read`."""

    def __init__(
        self,
        client: AsyncClient,
        graph: CompiledStateGraph[Any, Any, Any, Any],
        *,
        effects: Mapping[str, Effect] | None = None,
        registration: Mapping[str, Any] | None = None,
        max_decided_turns: int = _straight_on.MAX_DECIDED_TURNS,
        model_node: str = "model",
        tools_node: str = "tools",
    ) -> None:
        """`effects`: each tool's effect (absent: `write` for a tool the interrupt asks about, else `read`).
        `registration`: further members of every registration (`privacy_level`, `approval_ttl_secs`, …).
        `max_decided_turns`: how many turns that come back decided (remembered decisions) one `start` or `resume`
        goes straight on through before it answers `decided`.
        `model_node`, `tools_node`: the graph's nodes that call the model and run the tools (`create_agent`'s names)."""
        self._client = client
        self._graph = graph
        self._effects = dict(effects or {})
        self._registration = dict(registration or {})
        self._max_decided_turns = _straight_on.checked_limit(max_decided_turns)
        self._model_node = model_node
        self._tools_node = tools_node

    async def start(
        self, owner_uid: int, input: Any, *, run_id: str | None = None, thread_id: str | None = None
    ) -> WorkerStep[Any]:
        """Invokes the graph on `input` in thread `thread_id` (default: the run's id) for `owner_uid`; on an interrupt
        registers the run (`run_id`, or a random UUID) and answers `suspended` while it waits for a person, or, when
        the registration comes back decided (remembered decisions), goes straight on as `resume` does; otherwise
        `finished` with the graph's final state and no run."""
        run_id = run_id or str(uuid.uuid4())
        thread = thread_id or run_id
        config = _config(thread)
        result = await self._graph.ainvoke(input, config)
        snapshot = await self._graph.aget_state(config)
        if not snapshot.interrupts:
            return WorkerStep("finished", None, output=result)
        messages = _messages(snapshot)
        calls = _waiting_calls(run_id, snapshot, messages)
        body: RegisterRun = {
            **self._registration,  # type: ignore[typeddict-item]
            "id": run_id,
            "owner_uid": owner_uid,
            "messages": _openai_chat(messages),
            "tools": self._declared_tools(calls),
            "worker_state": {"thread_id": thread},
        }
        registered = _straight_on.registered(run_id, await self._client.register_run(body))
        return await _straight_on.go_on(registered, self._resume_once, self._max_decided_turns)

    async def resume(self, run_id: str) -> WorkerStep[Any]:
        """Continues the run from what the service and the checkpointer hold (see the module's docstring). Safe to call
        again after a crash at any point, and in any process that shares the checkpointer. A new turn that comes back
        decided is gone on with at once, up to `max_decided_turns` of them."""
        step = await self._resume_once(run_id)
        return await _straight_on.go_on(step, self._resume_once, self._max_decided_turns)

    async def _resume_once(self, run_id: str) -> WorkerStep[Any]:
        """`resume` for one decided turn; a new turn's step is `suspended`, or `decided` when it came back decided."""
        run, undecided = await _service.load_decided(self._client, run_id)
        if undecided is not None:
            return undecided
        # The run's answers after this (results posted) carry no worker_state: keep the thread read here.
        thread = _thread_id(run)
        config = _config(thread)
        decided = await _service.verdicts(self._client, run)
        if decided.unrun():
            try:
                async with _service.claimed(self._client, run_id) as held:
                    run = await self._run_released(run, config, held)
            except _service.ClaimRefused:
                return await _service.refused_step(self._client, run_id)
            if run["status"] != "resumed":
                return WorkerStep("waiting", run_id, run)
            decided = await _service.verdicts(self._client, run)
        elif run["status"] != "resumed":
            return WorkerStep("waiting", run_id, run)

        turn = [call["id"] for call in run["turn"]["pending_calls"]]
        snapshot = await self._graph.aget_state(config)
        if not _at_turn(_messages(snapshot), turn):
            # The thread went past this turn: another worker continued it (a resumed turn needs no claim, §15).
            return WorkerStep("claimed", run_id, await self._client.get_run(run_id))
        if snapshot.interrupts:
            rejections = [{"type": "reject", "message": decided.texts[call_id]} for call_id in turn]
            await self._graph.ainvoke(
                Command(resume={"decisions": rejections}), config, interrupt_before=[self._model_node]
            )
            snapshot = await self._graph.aget_state(config)
        await self._graph.aupdate_state(
            config, {"messages": _service_results(run, decided, _messages(snapshot))}, as_node=self._tools_node
        )
        result = await self._graph.ainvoke(None, config)
        snapshot = await self._graph.aget_state(config)
        if not snapshot.interrupts:
            await self._client.complete_run(run_id)
            return WorkerStep("finished", run_id, output=result)
        messages = _messages(snapshot)
        _waiting_calls(run_id, snapshot, messages)
        answered = [
            index
            for index, message in enumerate(messages)
            if isinstance(message, ToolMessage) and message.tool_call_id in turn
        ]
        following = messages[_service.start_of_next_turn(run_id, answered, turn) :]
        appended = await self._client.append_turn(
            run_id, {"messages": _openai_chat(following), "worker_state": {"thread_id": thread}}
        )
        return _straight_on.registered(run_id, appended)

    async def _run_released(self, run: RunView, config: RunnableConfig, held: _service.HeldClaim) -> RunView:
        """Under the held claim, the thread is resumed with the middleware's decisions for the released calls without a
        result (`approve`, or `edit` with the decider's arguments) and `reject` for every other call, and stopped
        before the model node; the tools' bare outputs are posted under the claim. If an error escapes the graph,
        the completed ones are posted before it is raised again."""
        unrun = {call["call_id"]: call for call in held.unrun()}
        turn = run["turn"]["pending_calls"]
        snapshot = await self._graph.aget_state(config)
        if not snapshot.interrupts or not _at_turn(_messages(snapshot), [call["id"] for call in turn]):
            raise ValueError(f"run {run['id']}: its thread does not wait on the run's turn")
        decisions: list[dict[str, Any]] = []
        for call in turn:
            released = unrun.get(call["id"])
            if released is None:
                decisions.append({"type": "reject", "message": _NOT_RUN_HERE})
            elif released["edited"] and "arguments" in released:
                edited = {"name": call["name"], "args": json.loads(released["arguments"])}
                decisions.append({"type": "edit", "edited_action": edited})
            else:
                decisions.append({"type": "approve"})
        outputs = _ToolOutputs(frozenset(unrun), {call["id"]: call["name"] for call in turn})
        token = _RUN_ID.set(run["id"])
        try:
            await self._graph.ainvoke(
                Command(resume={"decisions": decisions}),
                {**config, "callbacks": [outputs]},
                interrupt_before=[self._model_node],
            )
        except BaseException:
            await _service.post_completed(self._client, held, list(unrun.values()), outputs.completed)
            raise
        finally:
            _RUN_ID.reset(token)
        missing = [call_id for call_id in unrun if call_id not in outputs.completed]
        if missing:
            await _service.post_completed(self._client, held, list(unrun.values()), outputs.completed)
            raise RuntimeError(f"run {run['id']}: the graph did not run the released calls {missing}")
        return await _service.post_claimed(self._client, held, [outputs.completed[call_id] for call_id in unrun])

    def _declared_tools(self, waiting: Sequence[Mapping[str, Any]]) -> list[DeclaredTool]:
        """The tools of the waiting calls, run by the worker: their effect from `effects`, else `write` (the graph asks
        a person before it runs them); and every other tool named in `effects`."""
        names = {call["name"] for call in waiting}
        effects: dict[str, Effect] = {name: "write" for name in names}
        effects.update(self._effects)
        return [_service.declared_tool(name, effect) for name, effect in effects.items()]


def _config(thread_id: str) -> RunnableConfig:
    return {"configurable": {"thread_id": thread_id}}


def _thread_id(run: RunView) -> str:
    state = run.get("worker_state")
    if not isinstance(state, dict) or not isinstance(state.get("thread_id"), str):
        raise ValueError(f"run {run['id']}: its worker_state holds no thread id")
    return str(state["thread_id"])


def _messages(snapshot: StateSnapshot) -> list[AnyMessage]:
    values = snapshot.values
    messages = values.get("messages") if isinstance(values, dict) else None
    if not isinstance(messages, list):
        raise ValueError("the graph's state has no `messages` channel")
    return messages


def _last_ai(messages: Sequence[AnyMessage]) -> AIMessage | None:
    return next((message for message in reversed(messages) if isinstance(message, AIMessage)), None)


def _at_turn(messages: Sequence[AnyMessage], turn: Sequence[str]) -> bool:
    """Whether the thread's last model turn is the run's waiting turn (its calls, in order)."""
    last = _last_ai(messages)
    return last is not None and [call["id"] for call in last.tool_calls] == list(turn)


def _waiting_calls(run_id: str, snapshot: StateSnapshot, messages: Sequence[AnyMessage]) -> list[dict[str, Any]]:
    """The tool calls the graph's interrupt asks about, checked against its last model turn: every call of that turn
    (the service takes them all as pending), with an id each."""
    if len(snapshot.interrupts) != 1:
        raise ValueError(f"run {run_id}: {len(snapshot.interrupts)} interrupts; only one per turn is adapted")
    value = snapshot.interrupts[0].value
    last = _last_ai(messages)
    if last is None or not last.tool_calls:
        raise ValueError(f"run {run_id}: the interrupt follows no model turn with tool calls")
    calls = [dict(call) for call in last.tool_calls]
    asked: list[tuple[Any, ...]]
    proposed: list[tuple[Any, ...]]
    if isinstance(value, Mapping) and isinstance(value.get("tool_calls"), list):
        asked = [(call.get("name"), call.get("args"), call.get("id")) for call in value["tool_calls"]]
        proposed = [(call["name"], call["args"], call["id"]) for call in calls]
    elif isinstance(value, Mapping) and isinstance(value.get("action_requests"), list):
        asked = [(action.get("name"), action.get("args")) for action in value["action_requests"]]
        proposed = [(call["name"], call["args"]) for call in calls]
    else:
        raise ValueError(f"run {run_id}: the interrupt carries no tool calls (`action_requests` or `tool_calls`)")
    if asked != proposed:
        raise ValueError(
            f"run {run_id}: the interrupt asks about some of the model turn's calls only; the service takes every "
            "call of the turn as waiting, so a turn that mixes calls needing approval with others is not adapted"
        )
    for call in calls:
        if not call.get("id"):
            raise ValueError(f"run {run_id}: the call of {call['name']!r} has no id")
    return calls


def _openai_chat(messages: Sequence[AnyMessage]) -> list[ChatMessage]:
    converted = convert_to_openai_messages(list(messages))
    return [dict(message) for message in converted]


def _service_results(run: RunView, decided: _service.Verdicts, messages: Sequence[AnyMessage]) -> list[ToolMessage]:
    """A tool message per call of the turn, holding the service's text for it, each in place of the thread's own
    (same message id) where the thread has one."""
    existing = {
        message.tool_call_id: message.id for message in messages if isinstance(message, ToolMessage) and message.id
    }
    results: list[ToolMessage] = []
    for call in run["turn"]["pending_calls"]:
        released = decided.released.get(call["id"])
        posted = released.get("result") if released is not None else None
        is_error = posted["is_error"] if posted is not None else True
        results.append(
            ToolMessage(
                content=decided.texts[call["id"]],
                tool_call_id=call["id"],
                name=call["name"],
                status="error" if is_error else "success",
                id=existing.get(call["id"]),
            )
        )
    return results
