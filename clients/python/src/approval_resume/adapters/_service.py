"""What every adapter asks of the service, whatever its framework (docs/design.md §15, §16): register a suspended
run, wait until its turn is released or resumed, read the verdicts and the exact texts the model is to read, post
the released calls' results, append the next turn or complete the run.

The adapters keep nothing of their own between calls: a run's state lives in the service (`worker_state`, the
released calls and their results, the model input), so any process, a restarted one included, continues a run from
its id alone.
"""

import asyncio
import json
import logging
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, TypeVar

from ..async_client import AsyncClient
from ..models import DeclaredTool, Effect, PostedResult, ReleasedCall, RunStatus, RunView

OutputT = TypeVar("OutputT")

logger = logging.getLogger("approval_resume.adapters")

#: The statuses in which a run's turn is decided and the worker has something to do: run and post the released
#: calls (`released`), or hand the verdicts to the framework and run on (`resumed`).
DECIDED: frozenset[RunStatus] = frozenset({"released", "resumed"})
#: The statuses in which a run is over (cancelled, or completed before): `resume` answers `closed`, runs nothing.
CLOSED: frozenset[RunStatus] = frozenset({"cancelled", "completed"})


@dataclass(frozen=True)
class WorkerStep(Generic[OutputT]):
    """Where a run stands after an adapter's `start` or `resume`.

    - `suspended`: the model asked for approval; the run waits for a decision (registered, or a new turn appended);
    - `waiting`: nothing to do yet (no decision, or the service still runs its own tools);
    - `closed`: the run is over without this worker (cancelled, or completed before);
    - `finished`: the model answered without asking for approval, `output` is its answer, the run (if any) is
      completed.
    """

    status: Literal["suspended", "waiting", "closed", "finished"]
    run_id: str | None
    run: RunView | None = None
    output: OutputT | None = None


@dataclass(frozen=True)
class Verdicts:
    """A decided turn, as the worker needs it.

    `released`: the calls released to the worker, by id, with the arguments to run and, once posted, their result.
    `texts`: for every call of the turn, once the run is `resumed`, the exact text the service wrote as its result
    (the denial or expiry of docs/design.md §3, or a released call's result with the edit note before it), read from
    the model input; empty while the run is `released` (the model input answers 409 until every result is posted).
    """

    run: RunView
    released: dict[str, ReleasedCall]
    texts: dict[str, str] = field(default_factory=dict)

    def unrun(self) -> list[ReleasedCall]:
        """The released calls that have no result yet: the ones the worker has to run, in the turn's order."""
        return [call for call in self.released.values() if "result" not in call]

    def denied(self) -> list[str]:
        """The ids of the turn's calls that were not released (denied or expired), in the turn's order."""
        return [call["id"] for call in self.run["turn"]["pending_calls"] if call["id"] not in self.released]


def declared_tool(name: str, effect: Effect) -> DeclaredTool:
    """A tool of the worker's framework: run by the worker, never with edited arguments unless the adapter says so."""
    return {"name": name, "effect": effect, "executor": "worker"}


def failed_result(call_id: str, tool: str) -> PostedResult:
    """What the worker posts for a released call whose tool raised: the service's own text for an executor that
    failed (docs/design.md §3, `Error: tool "{tool}" failed.`), `is_error: true`. Posted rather than left without a
    result, since a call that began may have taken effect and the worker runs a released call at most once (§15);
    the exception itself goes to the log, not to the model or the audit."""
    return {"call_id": call_id, "content": f'Error: tool "{tool}" failed.', "is_error": True}


def interrupted_result(call_id: str, tool: str) -> PostedResult:
    """What the worker posts for a released call whose tool was cancelled while it ran (the worker's task cancelled,
    or the framework cancelling it): the service's text for an interrupted call (docs/design.md §3), `is_error:
    true`, since whether it took effect is unknown and it must not run again."""
    return {
        "call_id": call_id,
        "content": f'Error: tool "{tool}" was interrupted; whether it took effect is unknown.',
        "is_error": True,
    }


async def post_completed(
    client: AsyncClient, run_id: str, unrun: list[ReleasedCall], completed: Mapping[str, PostedResult]
) -> None:
    """On an error that escaped the framework's run of the released calls: posts the results of those that did
    complete, in the turn's order, so that the next `resume` runs only the others. A post that fails is logged, so
    that the caller sees the first error, not this one."""
    results = [completed[call["call_id"]] for call in unrun if call["call_id"] in completed]
    if not results:
        return
    try:
        await client.post_results(run_id, results)
    except Exception:
        logger.exception("run %s: could not post the results of the released calls that completed", run_id)


def start_of_next_turn(run_id: str, answering: Sequence[int], decided: Iterable[str]) -> int:
    """Where what the framework added after the decided turn begins, given the indices (in its history after the
    resume) of the items or messages that hold the decided calls' results: just after the last of them. Raises when
    there is none: the history would then be appended whole as the new turn, repeating the transcript the service
    already holds, so nothing is appended and the run stays `resumed`."""
    if not answering:
        raise ValueError(
            f"run {run_id}: the framework's history after the resume holds no result of the decided calls "
            f"{sorted(decided)}, so the new turn cannot be told apart from the transcript before it; nothing appended"
        )
    return answering[-1] + 1


def idempotency_key(run_id: str, call_id: str) -> str:
    """The key a tool may use to make a released call's effect happen once (`{run_id}:{call_id}`, as the service's
    own executors get it, docs/design.md §9): a worker that died after the tool ran and before its result was posted
    runs the call again, and a tool that passes this key to what it changes can make that second run a no-op."""
    return f"{run_id}:{call_id}"


async def load(client: AsyncClient, run_id: str) -> RunView:
    """The run with its `worker_state`."""
    return await client.get_run(run_id, include_worker_state=True)


async def load_decided(client: AsyncClient, run_id: str) -> tuple[RunView, WorkerStep[Any] | None]:
    """The run with its `worker_state`, and the step a worker's `resume` answers at once when the run is not decided:
    `closed` once it ended, `waiting` while nobody decided it; None when it is released or resumed, to go on."""
    run = await load(client, run_id)
    if run["status"] in CLOSED:
        return run, WorkerStep("closed", run_id, run)
    if run["status"] not in DECIDED:
        return run, WorkerStep("waiting", run_id, run)
    return run, None


async def wait_until_decided(
    client: AsyncClient, run_id: str, *, poll_interval: float = 1.0, timeout: float | None = None
) -> RunView:
    """Polls the run until it is released, resumed, cancelled or completed; the feed (`approval_resume.Feed`) or a
    webhook says the same without polling. Raises `TimeoutError` after `timeout` seconds."""
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        run = await client.get_run(run_id)
        if run["status"] in DECIDED or run["status"] in CLOSED:
            return run
        if deadline is not None and time.monotonic() >= deadline:
            raise TimeoutError(f"run {run_id} is still {run['status']} after {timeout}s")
        await asyncio.sleep(poll_interval)


async def verdicts(client: AsyncClient, run: RunView) -> Verdicts:
    """The decided turn of `run` (released or resumed), with the exact texts once it is resumed."""
    released = {call["call_id"]: call for call in run.get("released_calls", [])}
    if run["status"] != "resumed":
        return Verdicts(run, released)
    return Verdicts(run, released, await result_texts(client, run))


async def result_texts(client: AsyncClient, run: RunView) -> dict[str, str]:
    """Each call of the decided turn and the text its result holds in the run's own model input: what the model
    reads, word for word (`openai-chat` tool messages, `openai-responses` function call outputs)."""
    model_input: Mapping[str, Any] = await client.get_model_input(run["id"])
    texts: dict[str, str] = {}
    if model_input["format"] == "openai-chat":
        for message in model_input["messages"]:
            if message.get("role") == "tool" and isinstance(message.get("content"), str):
                texts[message["tool_call_id"]] = message["content"]
    elif model_input["format"] == "openai-responses":
        for item in model_input["input"]:
            if item.get("type") == "function_call_output" and isinstance(item.get("output"), str):
                texts[item["call_id"]] = item["output"]
    else:
        found = model_input["format"]
        raise ValueError(f"run {run['id']}: the adapters read openai-chat or openai-responses, not {found}")
    missing = [call["id"] for call in run["turn"]["pending_calls"] if call["id"] not in texts]
    if missing:
        raise ValueError(f"run {run['id']}: the model input holds no result for calls {missing}")
    return {call["id"]: texts[call["id"]] for call in run["turn"]["pending_calls"]}


def check_released_arguments(run_id: str, call: ReleasedCall, proposed: str) -> None:
    """Refuses to run a released call with other arguments than the model proposed, for a framework that cannot run
    an edit (its tools are registered `editable: false`, so the service releases the proposed arguments; anything
    else would run arguments nobody approved)."""
    arguments = call.get("arguments")
    if arguments is not None and json.loads(arguments) != json.loads(proposed or "{}"):
        raise ValueError(f"run {run_id}: released call {call['call_id']} has arguments the model did not propose")
