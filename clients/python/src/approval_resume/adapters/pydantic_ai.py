"""Pydantic AI (`pydantic-ai-slim`) deferred tools in the loop of approval-resume (docs/design.md §15, §16).

`PydanticAIWorker.start` runs the agent (whose `output_type` includes `DeferredToolRequests`); when it ends on
`DeferredToolRequests` (tools with `requires_approval=True`), the worker registers a run in `openai-chat` built from
the agent's messages, every function tool of the agent `executor: "worker"`, and the messages themselves
(`ModelMessagesTypeAdapter`, JSON) as its `worker_state`. Pydantic AI runs an approval with other arguments
(`ToolApproved(override_args=…)`), so the tools stay editable.

`PydanticAIWorker.resume`, called when the run is released or resumed, reads only the service, so any process
continues a run:

1. released: the worker claims the released calls (`POST /v1/runs/{id}/claim`; refused, it runs nothing and answers
   `claimed`: another worker has the run), renewing the claim while they run; the released calls without a result
   go to the agent as `ToolApproved` (with `override_args` where the decider edited them), the agent runs them and
   is stopped before its next model request (`Agent.iter`), and the worker posts their results under the claim;
2. resumed: the released calls' results, as the service wrote them (an edited call's with the edit note before
   it), are added to the messages as tool returns (`outcome="failed"` for one posted `is_error: true`), so nothing
   runs again; each denied or expired call becomes `ToolDenied(message=…)` with the service's exact text; the agent
   runs on. A new `DeferredToolRequests` appends a turn (`POST /v1/runs/{id}/turns`); a final output completes the
   run.

A registration or an appended turn that comes back decided (remembered decisions, docs/design.md §18) waits for
no click: the worker goes straight on with it by the same two steps, and on through each new turn the agent stops
on that comes back decided too (`_straight_on`, at most `max_decided_turns` of them in one call).

In the released step a run capability (`_ReleasedStep`) wraps each released call's execution: a tool that raises
gets the service's text for a failed call, `Error: tool "{name}" failed.`, as a `ToolFailed` (Pydantic AI's failed
return, posted `is_error: true`; the exception goes to the log), so the other released calls go on and nothing runs
twice; one cancelled while it runs gets the interrupted text. Each result is recorded as it completes, and if an
error still escapes the agent, those are posted before it is raised again.

A worker that dies after a tool ran and before its result was posted leaves its claim to lapse: the service then
gives the call the `interrupted` result, and no worker runs it again. Pydantic AI passes a tool no idempotency key;
inside a released call, `current_idempotency_key(ctx.tool_call_id)` (the call id is an argument here, unlike the
OpenAI adapter's) gives `{run_id}:{call_id}`.

Limits: external calls (`CallDeferred`, `DeferredToolRequests.calls`) are refused with `ValueError`; a tool's result
is posted with `is_error: true` when Pydantic AI marks it failed or asks the model to retry (`ERROR_OUTCOMES`), its
content without Pydantic AI's `{"error": …}` wrapper (the service carries `is_error` itself); a retried call comes
back on resume as a failed return, since the service keeps only `is_error`.
"""

import json
import uuid
from collections.abc import Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from ._install import missing_framework

try:
    from pydantic_ai import (
        Agent,
        DeferredToolRequests,
        DeferredToolResults,
        ModelRetry,
        RunContext,
        ToolApproved,
        ToolDenied,
        ToolFailed,
    )
    from pydantic_ai.capabilities import AbstractCapability, ValidatedToolArgs, WrapToolExecuteHandler
    from pydantic_ai.exceptions import (
        ApprovalRequired,
        CallDeferred,
        SkipToolExecution,
        ToolFailedError,
        ToolRetryError,
    )
    from pydantic_ai.messages import (
        ERROR_OUTCOMES,
        ModelMessage,
        ModelMessagesTypeAdapter,
        ModelRequest,
        ModelResponse,
        RetryPromptPart,
        SystemPromptPart,
        TextPart,
        ToolCallPart,
        ToolReturn,
        ToolReturnPart,
        UserPromptPart,
    )
    from pydantic_ai.run import AgentRunResult
    from pydantic_ai.tools import ToolDefinition
    from pydantic_ai.toolsets import FunctionToolset
except ImportError as error:  # pragma: no cover - depends on the installed extras
    raise missing_framework(__name__, "Pydantic AI", "pydantic-ai") from error

from ..async_client import AsyncClient
from ..models import ChatMessage, DeclaredTool, Effect, PostedResult, RegisterRun, ReleasedCall, RunView
from . import _service, _straight_on
from ._service import WorkerStep

DepsT = TypeVar("DepsT")

#: In the released step, the id of the run whose released calls the agent runs (None: outside that step); gives
#: `current_idempotency_key`.
_RUN_ID: ContextVar[str | None] = ContextVar("approval_resume_pydantic_run_id", default=None)
#: What a call that is not run in the released step is answered with: it never reaches the model, since the agent is
#: stopped before its next request, but Pydantic AI wants a result for every deferred call.
_NOT_RUN_HERE = "not run in this step: the service holds this call's result"


def current_idempotency_key(tool_call_id: str) -> str | None:
    """Inside a released call run by this adapter, given the tool's `ctx.tool_call_id`: `{run_id}:{call_id}`;
    elsewhere `None`. Unlike the OpenAI adapter's `current_idempotency_key()`, it takes the call id: the tool reads it
    from its `RunContext`."""
    run_id = _RUN_ID.get()
    return None if run_id is None else _service.idempotency_key(run_id, tool_call_id)


@dataclass
class _ReleasedStep(AbstractCapability[Any]):
    """The released step's hook around each released call's execution (`wrap_tool_execute`): the call's result is
    recorded in `completed` as it completes, and an exception of its tool becomes Pydantic AI's failed return
    (`ToolFailed` with the service's failed text), so that it neither stops the agent, nor has the siblings
    cancelled, nor leaves the call without a result; a cancellation is recorded as interrupted and raised on.
    Pydantic AI's own signals (retry, failure, deferral) pass through. `completed` is posted only when an error
    escapes the agent: otherwise the returns of the agent's next request are (a success recorded here is the
    return value rendered as Pydantic AI renders a plain one)."""

    released: frozenset[str]
    completed: dict[str, PostedResult] = field(default_factory=dict)

    @classmethod
    def get_serialization_name(cls) -> str | None:
        return None

    async def wrap_tool_execute(
        self,
        ctx: RunContext[Any],
        *,
        call: ToolCallPart,
        tool_def: ToolDefinition,
        args: ValidatedToolArgs,
        handler: WrapToolExecuteHandler,
    ) -> Any:
        call_id, tool = call.tool_call_id, call.tool_name
        if call_id not in self.released:
            return await handler(args)
        try:
            result = await handler(args)
        except (ToolRetryError, ToolFailedError) as signal:
            part = signal.tool_retry if isinstance(signal, ToolRetryError) else signal.tool_failed
            posted = _posted(part)
            if posted is not None:
                self.completed[call_id] = posted
            raise
        except (ToolFailed, ModelRetry) as signal:
            self.completed[call_id] = {"call_id": call_id, "content": signal.message, "is_error": True}
            raise
        except (ApprovalRequired, CallDeferred, SkipToolExecution):
            raise
        except Exception as error:
            run_id = _RUN_ID.get()
            _service.logger.exception("run %s: released call %s (%s) raised; posted failed", run_id, call_id, tool)
            failed = _service.failed_result(call_id, tool)
            self.completed[call_id] = failed
            raise ToolFailed(failed["content"]) from error
        except BaseException:
            self.completed[call_id] = _service.interrupted_result(call_id, tool)
            raise
        value = result.return_value if isinstance(result, ToolReturn) else result
        content = ToolReturnPart(tool, value, tool_call_id=call_id).model_response_str()
        self.completed[call_id] = {"call_id": call_id, "content": content, "is_error": False}
        return result


class PydanticAIWorker(Generic[DepsT]):
    """Runs one agent for many runs. `client` needs an API key with `runs:write` and `runs:read`."""

    def __init__(
        self,
        client: AsyncClient,
        agent: Agent[DepsT, Any],
        *,
        deps: DepsT = None,  # type: ignore[assignment]
        effects: Mapping[str, Effect] | None = None,
        registration: Mapping[str, Any] | None = None,
        max_decided_turns: int = _straight_on.MAX_DECIDED_TURNS,
    ) -> None:
        """`effects`: each tool's effect (absent: `write` for a tool with `requires_approval`, else `read`).
        `registration`: further members of every registration (`privacy_level`, `approval_ttl_secs`, …).
        `max_decided_turns`: how many turns that come back decided (remembered decisions) one `start` or `resume`
        goes straight on through before it answers `decided`."""
        self._client = client
        self._agent = agent
        self._deps = deps
        self._effects = dict(effects or {})
        self._registration = dict(registration or {})
        self._max_decided_turns = _straight_on.checked_limit(max_decided_turns)

    async def start(
        self,
        owner_uid: int,
        prompt: str,
        *,
        run_id: str | None = None,
        message_history: Sequence[ModelMessage] | None = None,
    ) -> WorkerStep[Any]:
        """Runs the agent on `prompt` for `owner_uid`; on `DeferredToolRequests` registers the run (`run_id`, or a
        random UUID) and answers `suspended` while it waits for a person, or, when the registration comes back
        decided (remembered decisions), goes straight on as `resume` does; otherwise `finished` with the output and
        no run."""
        result = await self._agent.run(prompt, message_history=message_history, deps=self._deps)
        if not isinstance(result.output, DeferredToolRequests):
            return WorkerStep("finished", None, output=result.output)
        run_id = run_id or str(uuid.uuid4())
        messages = self._history(result)
        body: RegisterRun = {
            **self._registration,  # type: ignore[typeddict-item]
            "id": run_id,
            "owner_uid": owner_uid,
            "messages": openai_chat(messages, _pending(run_id, result.output)),
            "tools": self._declared_tools(),
            "worker_state": ModelMessagesTypeAdapter.dump_python(messages, mode="json"),
        }
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
        history = ModelMessagesTypeAdapter.validate_python(run.get("worker_state"))
        calls = _turn_calls(run, history)
        decided = await _service.verdicts(self._client, run)
        if decided.unrun():
            try:
                async with _service.claimed(self._client, run_id) as held:
                    run = await self._run_released(run, history, calls, held)
            except _service.ClaimRefused:
                return await _service.refused_step(self._client, run_id)
            if run["status"] != "resumed":
                return WorkerStep("waiting", run_id, run)
            decided = await _service.verdicts(self._client, run)
        elif run["status"] != "resumed":
            return WorkerStep("waiting", run_id, run)

        recorded = [
            ToolReturnPart(
                calls[call_id].tool_name,
                decided.texts[call_id],
                tool_call_id=call_id,
                outcome="failed" if _posted_as_error(decided.released[call_id]) else "success",
            )
            for call_id in calls
            if call_id in decided.released
        ]
        denied = {call_id: ToolDenied(message=decided.texts[call_id]) for call_id in decided.denied()}
        given = [*history, ModelRequest(parts=recorded)] if recorded else history
        result = await self._agent.run(
            message_history=given,
            deferred_tool_results=DeferredToolResults(approvals=dict(denied)) if denied else None,
            deps=self._deps,
        )
        if not isinstance(result.output, DeferredToolRequests):
            await self._client.complete_run(run_id)
            return WorkerStep("finished", run_id, output=result.output)
        messages = self._history(result)
        # What followed the decided turn's returns (Pydantic AI merges the requests that answer it into one).
        answered = [
            index
            for index, message in enumerate(messages)
            if isinstance(message, ModelRequest)
            and any(isinstance(part, ToolReturnPart) and part.tool_call_id in calls for part in message.parts)
        ]
        start = _service.start_of_next_turn(run_id, answered, calls)
        following = openai_chat(messages[start:], _pending(run_id, result.output), system=False)
        appended = await self._client.append_turn(
            run_id,
            {"messages": following, "worker_state": ModelMessagesTypeAdapter.dump_python(messages, mode="json")},
        )
        return _straight_on.registered(run_id, appended)

    async def _run_released(
        self, run: RunView, history: list[ModelMessage], calls: dict[str, ToolCallPart], held: _service.HeldClaim
    ) -> RunView:
        """Under the held claim, the agent runs the released calls without a result (edited ones with the decider's
        arguments) and is stopped before its next model request, which holds their returns; those are posted under the
        claim. `_ReleasedStep` turns a tool's exception into a failed return and records each result as it
        completes; if an error escapes the agent anyway, the completed ones are posted before it is raised again, so
        the next `resume` runs only the others."""
        unrun = held.unrun()
        wanted = {call["call_id"] for call in unrun}
        approvals: dict[str, bool | ToolApproved | ToolDenied] = {
            call_id: ToolDenied(message=_NOT_RUN_HERE) for call_id in calls if call_id not in wanted
        }
        for call in unrun:
            edited = call["edited"] and "arguments" in call
            approvals[call["call_id"]] = ToolApproved(override_args=json.loads(call["arguments"]) if edited else None)
        returns: dict[str, PostedResult] = {}
        step = _ReleasedStep(frozenset(wanted))
        token = _RUN_ID.set(run["id"])
        try:
            async with self._agent.iter(
                message_history=history,
                deferred_tool_results=DeferredToolResults(approvals=approvals),
                deps=self._deps,
                capabilities=[step],
            ) as agent_run:
                async for node in agent_run:
                    if Agent.is_model_request_node(node):
                        for part in node.request.parts:
                            result = _posted(part)
                            if result is not None and result["call_id"] in wanted:
                                returns[result["call_id"]] = result
                        break
        except BaseException:
            await _service.post_completed(self._client, held, unrun, step.completed)
            raise
        finally:
            _RUN_ID.reset(token)
        missing = sorted(wanted - set(returns))
        if missing:
            await _service.post_completed(self._client, held, unrun, {**step.completed, **returns})
            raise RuntimeError(f"run {run['id']}: the agent did not run the released calls {missing}")
        return await _service.post_claimed(self._client, held, [returns[call["call_id"]] for call in unrun])

    @staticmethod
    def _history(result: AgentRunResult[Any]) -> list[ModelMessage]:
        """The agent's messages after a run (`all_messages()`): the worker state, and where the transcript comes
        from."""
        return result.all_messages()

    def _declared_tools(self) -> list[DeclaredTool]:
        """Every tool of the agent's function toolsets, run by the worker; its effect from `effects`, else `write`
        for a tool that requires approval and `read` for one that does not."""
        declared: list[DeclaredTool] = []
        for toolset in self._agent.toolsets:
            if isinstance(toolset, FunctionToolset):
                for name, tool in toolset.tools.items():
                    effect: Effect = self._effects.get(name) or ("write" if tool.requires_approval else "read")
                    declared.append(_service.declared_tool(name, effect))
        return declared


def _posted(part: Any) -> PostedResult | None:
    """A tool's return as the worker posts it: `is_error` for a return Pydantic AI sends the model as an error
    (`failed`, `retried`), its text without the `{"error": …}` wrapper Pydantic AI adds for providers that have no
    error flag (the service keeps `is_error` itself); `None` for a part that answers no tool call."""
    if isinstance(part, ToolReturnPart):
        return {
            "call_id": part.tool_call_id,
            "content": part.model_response_str(wrap_if_error=False),
            "is_error": part.outcome in ERROR_OUTCOMES,
        }
    if isinstance(part, RetryPromptPart) and part.tool_name is not None:
        return {"call_id": part.tool_call_id, "content": part.model_response(), "is_error": True}
    return None


def _posted_as_error(call: ReleasedCall) -> bool:
    """Whether the released call's result was posted `is_error: true`."""
    result = call.get("result")
    return result is not None and result["is_error"]


def _pending(run_id: str, requests: DeferredToolRequests) -> set[str]:
    """The ids of the calls the run waits on: the deferred calls that need approval. Refuses external calls
    (`CallDeferred`), which the service cannot decide."""
    if requests.calls:
        raise ValueError(f"run {run_id}: external deferred calls are not supported, only approvals")
    return {call.tool_call_id for call in requests.approvals}


def _turn_calls(run: RunView, history: list[ModelMessage]) -> dict[str, ToolCallPart]:
    """The tool call of the messages' last response for each pending call of the service's turn, in the turn's
    order; raises when the state does not hold the turn the service waits on."""
    responses = [message for message in history if isinstance(message, ModelResponse)]
    parts = {part.tool_call_id: part for part in (responses[-1].tool_calls if responses else [])}
    calls: dict[str, ToolCallPart] = {}
    for call in run["turn"]["pending_calls"]:
        if call["id"] not in parts:
            raise ValueError(f"run {run['id']}: its worker_state has no tool call {call['id']}")
        calls[call["id"]] = parts[call["id"]]
    return calls


def openai_chat(messages: Sequence[ModelMessage], pending: set[str], *, system: bool = True) -> list[ChatMessage]:
    """Pydantic AI's messages as the service's `openai-chat` transcript: what approvers and the audit read (the
    messages themselves stay the worker's truth, as `worker_state`). The last response's calls that wait are its
    last message; calls of that response that ran without approval move, with their returns, into an assistant
    message before it, since the service takes every call of the waiting turn as pending. `system`: the first
    request's instructions open the transcript (a registration; an appended turn has none)."""
    chat: list[ChatMessage] = []
    for message in messages:
        if isinstance(message, ModelRequest):
            if system and message.instructions and not any(m.get("role") == "system" for m in chat):
                chat.append({"role": "system", "content": message.instructions})
            chat.extend(_request_messages(message))
        else:
            text = "".join(part.content for part in message.parts if isinstance(part, TextPart))
            calls = [_chat_call(part) for part in message.tool_calls]
            assistant: ChatMessage = {"role": "assistant", "content": text or None}
            if calls:
                assistant["tool_calls"] = calls
            chat.append(assistant)
    return _waiting_calls_in_their_own_message(chat, pending)


def _request_messages(request: ModelRequest) -> list[ChatMessage]:
    """One request's parts as `openai-chat` messages: system prompts, user prompts, tool returns as `tool` messages
    (with the text the model reads), and retry prompts (as `tool` messages when they answer a call, else `user`)."""
    out: list[ChatMessage] = []
    for part in request.parts:
        if isinstance(part, SystemPromptPart):
            out.append({"role": "system", "content": part.content})
        elif isinstance(part, UserPromptPart):
            content = part.content if isinstance(part.content, str) else json.dumps(part.content, default=str)
            out.append({"role": "user", "content": content})
        elif isinstance(part, ToolReturnPart):
            out.append({"role": "tool", "tool_call_id": part.tool_call_id, "content": part.model_response_str()})
        elif isinstance(part, RetryPromptPart):
            if part.tool_name is None:
                out.append({"role": "user", "content": part.model_response()})
            else:
                out.append({"role": "tool", "tool_call_id": part.tool_call_id, "content": part.model_response()})
    return out


def _chat_call(part: ToolCallPart) -> dict[str, Any]:
    """A tool call as an `openai-chat` assistant message's `tool_calls` item (its arguments as JSON text)."""
    return {
        "id": part.tool_call_id,
        "type": "function",
        "function": {"name": part.tool_name, "arguments": part.args_as_json_str()},
    }


def _waiting_calls_in_their_own_message(chat: list[ChatMessage], pending: set[str]) -> list[ChatMessage]:
    """The transcript with the pending calls alone in its last message: the service takes every call of the last
    assistant message as the waiting turn, so calls of that message that ran without approval move, with their
    `tool` messages, into an assistant message before it. (The OpenAI adapter's `_waiting_last` moves items of a flat
    input list instead.)"""
    last = max((i for i, m in enumerate(chat) if m.get("role") == "assistant"), default=None)
    if last is None or not pending:
        return chat
    turn = chat[last]
    calls = turn.get("tool_calls", [])
    waiting = [call for call in calls if call["id"] in pending]
    ran = [call for call in calls if call["id"] not in pending]
    after = chat[last + 1 :]
    if not waiting:
        return chat
    head = chat[:last]
    if ran:
        head.append({**turn, "tool_calls": ran})
        head.extend(after)
        return [*head, {"role": "assistant", "content": None, "tool_calls": waiting}]
    return [*head, *after, {**turn, "tool_calls": waiting}]
