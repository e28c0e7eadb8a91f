"""What every adapter asks of the service, whatever its framework (docs/design.md §15, §16): register a suspended
run, wait until its turn is released or resumed, claim the released calls (and renew the claim while they run), read
the verdicts and the exact texts the model is to read, post the released calls' results under the claim, append the
next turn or complete the run.

The adapters keep nothing of their own between calls: a run's state lives in the service (`worker_state`, the
released calls and their results, the model input), so any process, a restarted one included, continues a run from
its id alone.
"""

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Generic, Literal, TypeVar

from ..async_client import AsyncClient
from ..errors import ApiError, ClaimedError, ClaimLapsedError
from ..models import Claim, DeclaredTool, Effect, PostedResult, ReleasedCall, RunStatus, RunView

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

    - `suspended`: the model asked for approval; the turn (registered, or appended) waits for a person's decision.
      A turn that came back decided (remembered decisions, docs/design.md §18) is not `suspended`: the adapter goes
      straight on with it, as `resume` would;
    - `decided`: the run's turn was decided when it was registered and this worker went no further: it had already
      gone straight on through `max_decided_turns` such turns in this call (see `_straight_on`). The run stands
      released or resumed; `resume(run_id)` goes on;
    - `waiting`: nothing to do yet (no decision, or the service still runs its own tools);
    - `closed`: the run is over without this worker (cancelled, or completed before);
    - `claimed`: another worker has the run: its claim on the released calls is live, or it resumed the run, or this
      worker's own claim lapsed before its results were posted (the service then gave the unposted calls the
      `interrupted` result); this worker ran nothing it may post, and leaves the run to the service and the other;
    - `finished`: the model answered without asking for approval, `output` is its answer, the run (if any) is
      completed.
    """

    status: Literal["suspended", "decided", "waiting", "closed", "claimed", "finished"]
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


class ClaimRefused(Exception):
    """The service refused this worker the run's released calls: another worker's live claim, a claim of this
    worker that lapsed, a run no longer released (another worker posted every result), or a run cancelled meanwhile.
    An adapter answers it with `refused_step` and runs nothing more."""

    def __init__(self, error: ApiError) -> None:
        super().__init__(str(error))
        self.error = error


def refused(error: ApiError) -> bool:
    """Whether `error` says that the run's released calls are not this worker's to run or post."""
    if isinstance(error, ClaimedError | ClaimLapsedError):
        return True
    return error.status == 409 and error.code in ("not_released", "run_cancelled")


async def refused_step(client: AsyncClient, run_id: str) -> WorkerStep[Any]:
    """The step after `ClaimRefused`: `closed` when the run was cancelled meanwhile, else `claimed` (another worker has
    the run)."""
    run = await client.get_run(run_id)
    return WorkerStep("closed" if run["status"] in CLOSED else "claimed", run_id, run)


@dataclass
class HeldClaim:
    """A live claim of this worker (docs/design.md §15) and the released calls it covers, as the claim answered."""

    run_id: str
    claim: Claim
    #: Set when a renewal found the claim lapsed: the results will be refused, the service interrupted the calls.
    lapsed: bool = False

    @property
    def claim_id(self) -> str:
        return self.claim["claim_id"]

    def unrun(self) -> list[ReleasedCall]:
        """The released calls without a result, in the turn's order: the ones this worker is to run."""
        return [call for call in self.claim["released_calls"] if "result" not in call]


def seconds_left(until: str) -> float:
    """Seconds from now until `until` (RFC 3339), by this machine's clock."""
    moment = datetime.fromisoformat(until)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return (moment - datetime.now(timezone.utc)).total_seconds()


#: The fraction of a claim's remaining time after which it is renewed: early enough that a renewal delayed by a slow
#: answer, or a clock a little off the database's, still arrives before `until`.
RENEW_AFTER = 1 / 3


async def _keep_renewed(client: AsyncClient, held: HeldClaim) -> None:
    """Renews the claim again and again while the released calls run (a long tool), until cancelled; a renewal that
    finds the claim lapsed marks it so and stops (the tool goes on, its result will be refused)."""
    while True:
        await asyncio.sleep(max(0.5, seconds_left(held.claim["until"]) * RENEW_AFTER))
        try:
            held.claim = await client.claim(held.run_id, held.claim_id)
        except ClaimLapsedError:
            held.lapsed = True
            logger.warning("run %s: the claim lapsed while its released calls ran", held.run_id)
            return
        except ApiError as error:
            if refused(error):
                held.lapsed = True
                return
            # A passing failure (503 past its retries): the claim may still live; try again sooner.
            logger.warning("run %s: renewing the claim failed (%s); trying again", held.run_id, error.code)
        except Exception:
            logger.warning("run %s: renewing the claim failed; trying again", held.run_id, exc_info=True)


@contextlib.asynccontextmanager
async def claimed(client: AsyncClient, run_id: str) -> AsyncIterator[HeldClaim]:
    """Claims the run's released calls for the block, renewing the claim in the background while the block runs
    (its tools). Raises `ClaimRefused` when the service gives the calls to no one else but not to this worker
    either (another's live claim, a run no longer released)."""
    try:
        held = HeldClaim(run_id, await client.claim(run_id))
    except ApiError as error:
        if refused(error):
            raise ClaimRefused(error) from error
        raise
    renewal = asyncio.create_task(_keep_renewed(client, held))
    try:
        yield held
    finally:
        renewal.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await renewal


async def post_claimed(client: AsyncClient, held: HeldClaim, results: list[PostedResult]) -> RunView:
    """Posts the released calls' results under the held claim; `ClaimRefused` when the service refuses them because
    the claim lapsed (or another worker's claim took its place)."""
    try:
        return await client.post_results(held.run_id, held.claim_id, results)
    except ApiError as error:
        if refused(error):
            raise ClaimRefused(error) from error
        raise


async def post_completed(
    client: AsyncClient, held: HeldClaim, unrun: list[ReleasedCall], completed: Mapping[str, PostedResult]
) -> None:
    """On an error that escaped the framework's run of the released calls: posts the results of those that did
    complete, in the turn's order, so that the next `resume` runs only the others. A post that fails is logged, so
    that the caller sees the first error, not this one."""
    run_id = held.run_id
    results = [completed[call["call_id"]] for call in unrun if call["call_id"] in completed]
    if not results:
        return
    try:
        await client.post_results(run_id, held.claim_id, results)
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
    """The key of a released call (`{run_id}:{call_id}`, as the service's own executors get it, docs/design.md §9),
    for a tool to pass to what it changes. The claim already keeps a call from running twice across workers; the key
    carries that promise past the tool, to a system that can refuse a second request itself. None of the frameworks
    passes an idempotency key to a tool (their keys are for model requests), so each adapter gives it through its
    module's `current_idempotency_key`."""
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
