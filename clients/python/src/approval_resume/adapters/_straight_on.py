"""Going straight on when a turn comes back decided (docs/design.md §18, remembered decisions).

A registration (`POST /v1/runs`) or an appended turn (`POST /v1/runs/{id}/turns`) whose every pending call is covered
by live rules of one author is decided in that request: its answer is the run `released` (worker calls to run) or
`resumed` (every call denied, or run by the service). No click will come and the run will not wait, so an adapter
goes on at once, by the same code as its `resume(run_id)` (claim, run the released calls under the claim, post their
results, hand the denials' exact texts to the framework, run on). The framework may then stop on a new turn that
comes back decided too, and so on: a model that keeps calling a tool the person allowed "for this conversation" could
go on for ever, and a framework's own limits (the Agents SDK's `max_turns`, LangGraph's recursion limit, Pydantic AI's
usage limits) count one framework run, which a resume starts afresh. So the loop stops after `max_decided_turns`
such turns and answers `decided`: the run stands released or resumed in the service, and `resume(run_id)` (or the
feed's `run.released` / `run.resumed`, recorded for such a turn as for a click) goes on from there.
"""

from collections.abc import Awaitable, Callable
from typing import Any

from ..models import RunView
from ._service import CLOSED, DECIDED, WorkerStep, logger

#: How many turns decided at their registration one `start` or `resume` goes straight on through, by default. Ten
#: matches the Agents SDK's default `max_turns`: enough for a conversation's run of allowed calls, short of a loop.
MAX_DECIDED_TURNS = 10

#: One step of an adapter's `resume`: continue a decided run once, answering where it stands after.
ResumeOnce = Callable[[str], Awaitable[WorkerStep[Any]]]


def checked_limit(max_decided_turns: int) -> int:
    """`max_decided_turns` as a worker keeps it: 0 (never go straight on: `decided` at once) or more."""
    if max_decided_turns < 0:
        raise ValueError(f"max_decided_turns is {max_decided_turns}; it must be 0 or more")
    return max_decided_turns


def registered(run_id: str, run: RunView) -> WorkerStep[Any]:
    """The step a registration's or an appended turn's answer `run` stands for: `suspended` while the turn waits for
    a person; `decided` when rules decided it in the request (released or resumed: the caller goes on); `closed` for
    a run already over (a registration repeated after the run was cancelled or completed answers it as it stands);
    `waiting` while the service runs its own tools (`resuming`)."""
    status = run["status"]
    if status == "waiting_for_approval":
        return WorkerStep("suspended", run_id, run)
    if status in DECIDED:
        return WorkerStep("decided", run_id, run)
    if status in CLOSED:
        return WorkerStep("closed", run_id, run)
    return WorkerStep("waiting", run_id, run)


async def go_on(step: WorkerStep[Any], resume_once: ResumeOnce, max_decided_turns: int) -> WorkerStep[Any]:
    """While `step` is `decided`, continues the run with `resume_once`, at most `max_decided_turns` times; answers
    the first step that is not `decided`, or the last `decided` one at the bound (logged: the run is left to a later
    `resume`)."""
    for _ in range(max_decided_turns):
        if step.status != "decided" or step.run_id is None:
            return step
        step = await resume_once(step.run_id)
    if step.status == "decided":
        logger.warning(
            "run %s: stopped after going straight on through %d turns decided at their registration; "
            "resume(run_id) goes on",
            step.run_id,
            max_decided_turns,
        )
    return step
