"""`approval_resume.adapters.pydantic_ai` with Pydantic AI's own scripted model (`FunctionModel`), against the real
binary: a tool with `requires_approval` suspends the run, a denial (by the owner, by an approver) reaches the model as
`ToolDenied` with the service's exact text, an approval with edited arguments runs the tool once with them and the
audit records its result, a mixed turn runs its released call first, a turn the owner allowed (or refused, "never")
for the rest of the run and a registration an owner rule decides go straight on without a click, a released tool
that raises is posted failed (and reaches the model as a failed return) while the other released call runs once, and
a worker that dies is replaced by another that finishes the run without running a call twice."""

import asyncio
import json
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from conftest import (
    ARGUMENTS,
    EDITED,
    EXPIRED_TEXT,
    INTERRUPTED_TEXT,
    NEVER_BY_OWNER_TEXT,
    PUBLISH_FAILED,
    TOOL,
    Ledger,
    Run,
    Service,
    ShortLease,
    denied_text,
    remembered_for_the_run,
    verdicts_by_turn,
    wait_for_status,
)
from examples import example_env, killed_while_its_tool_runs_then_lapsed, run_example, start_example
from pydantic_ai import Agent, AgentRunResult, DeferredToolRequests, RunContext
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from approval_resume import AsyncClient, Client, approve_call, deny_call
from approval_resume.adapters import WorkerStep
from approval_resume.adapters.pydantic_ai import PydanticAIWorker, current_idempotency_key
from approval_resume.models import RunView


@dataclass
class Script:
    """The scripted model: one response of write calls per group of `turns` (counted by the responses already in
    the messages, so a fresh model in another worker goes on where the last one stopped), then `answer`, or an
    error, as a worker that dies; it keeps every request it was sent. A call is of the write tool unless `tools`
    names another for its id."""

    turns: tuple[tuple[str, ...], ...] = (("call_write",),)
    answer: str | Exception = "Done."
    tools: dict[str, str] = field(default_factory=dict)
    requests: list[list[ModelMessage]] = field(default_factory=list)

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.requests.append(messages)
        answered = sum(isinstance(message, ModelResponse) for message in messages)
        if answered < len(self.turns):
            return ModelResponse(
                parts=[ToolCallPart(self.tools.get(i, TOOL), ARGUMENTS, tool_call_id=i) for i in self.turns[answered]]
            )
        if isinstance(self.answer, Exception):
            raise self.answer
        return ModelResponse(parts=[TextPart(self.answer)])

    def last_returns(self) -> dict[str, str]:
        """The tool returns of the last request the model was sent, by call id."""
        returns: dict[str, str] = {}
        for message in self.requests[-1]:
            if isinstance(message, ModelRequest):
                for part in message.parts:
                    if isinstance(part, ToolReturnPart):
                        returns[part.tool_call_id] = part.model_response_str()
        return returns


Editor = Agent[None, str | DeferredToolRequests]


def agent(ledger: Ledger, script: Script, keys: list[str | None] | None = None, seconds: float = 0) -> Editor:
    editor: Editor = Agent(
        FunctionModel(script), output_type=[str, DeferredToolRequests], instructions="You edit the bakery's website."
    )

    @editor.tool(name=TOOL, requires_approval=True)
    async def update_page_metadata(ctx: RunContext[None], page: int, description: str) -> str:
        """Sets a page's meta description."""
        ledger.write(page=page, description=description)
        if keys is not None and ctx.tool_call_id is not None:
            keys.append(current_idempotency_key(ctx.tool_call_id))
        await asyncio.sleep(seconds)
        return f"updated page {page}: {description}"

    return editor


def suspend(
    on_loop: Run,
    client: AsyncClient,
    ledger: Ledger,
    owner: int,
    script: Script,
    keys: list[str | None] | None = None,
    **registration: Any,
) -> tuple[PydanticAIWorker[None], WorkerStep[Any]]:
    worker: PydanticAIWorker[None] = PydanticAIWorker(client, agent(ledger, script, keys), registration=registration)
    return worker, on_loop(worker.start(owner, "Write a meta description for page 12."))


def test_a_denial_by_the_owner_reaches_the_model_as_tool_denied_with_the_exact_text(
    on_loop: Run, worker_client: AsyncClient, decider: Client, ledger: Ledger, owner: int
) -> None:
    script = Script()
    worker, step = suspend(on_loop, worker_client, ledger, owner, script)
    assert step.status == "suspended" and step.run is not None and step.run_id is not None
    run = step.run
    assert (run["status"], run["format"]) == ("waiting_for_approval", "openai-chat")
    (call,) = run["turn"]["pending_calls"]
    assert (call["id"], call["name"], call["executor"], call["editable"]) == ("call_write", TOOL, "worker", True)
    assert call["arguments"] == json.dumps(ARGUMENTS, separators=(",", ":"))
    state = decider.get_run(step.run_id, include_worker_state=True)["worker_state"]
    assert isinstance(state, list) and state[-1]["kind"] == "response"

    decider.deny(step.run_id, run["turn"]["digest"], owner)
    finished = on_loop(worker.resume(step.run_id))
    assert (finished.status, finished.output) == ("finished", "Done.")
    assert script.last_returns() == {"call_write": denied_text("run_owner")}
    assert ledger.runs() == []
    assert decider.get_run(step.run_id)["status"] == "completed"


def test_a_denial_by_an_approver_tells_the_model_another_user_declined(
    on_loop: Run, worker_client: AsyncClient, decider: Client, ledger: Ledger, owner: int, approver: int
) -> None:
    script = Script()
    worker, step = suspend(on_loop, worker_client, ledger, owner, script)
    assert step.run is not None and step.run_id is not None
    decider.deny(step.run_id, step.run["turn"]["digest"], approver)
    assert on_loop(worker.resume(step.run_id)).status == "finished"
    assert script.last_returns() == {"call_write": denied_text("other_user")}
    assert ledger.runs() == []


def test_a_turn_nobody_decided_in_time_reaches_the_model_as_the_expired_text(
    on_loop: Run, worker_client: AsyncClient, decider: Client, ledger: Ledger, owner: int
) -> None:
    script = Script()
    worker, step = suspend(on_loop, worker_client, ledger, owner, script, approval_ttl_secs=1)
    assert step.run_id is not None
    wait_for_status(decider, step.run_id, "resumed")
    assert on_loop(worker.resume(step.run_id)).status == "finished"
    assert script.last_returns() == {"call_write": EXPIRED_TEXT}
    assert ledger.runs() == []


@pytest.mark.parametrize("privacy_level", ["full", "metadata"])
def test_an_approval_with_edited_arguments_runs_the_tool_once_with_them_and_the_audit_keeps_the_result(
    on_loop: Run, worker_client: AsyncClient, decider: Client, ledger: Ledger, owner: int, privacy_level: str
) -> None:
    script, keys = Script(), list[str | None]()
    worker, step = suspend(on_loop, worker_client, ledger, owner, script, keys, privacy_level=privacy_level)
    assert step.run is not None and step.run_id is not None
    edit = approve_call("call_write", EDITED)
    answer = decider.decide_calls(step.run_id, step.run["turn"]["digest"], owner, [edit])
    assert answer["status"] == "released" and answer["released_calls"][0]["edited"] is True
    assert on_loop(worker.resume(step.run_id)).status == "finished"

    assert ledger.runs() == [EDITED]
    assert keys == [f"{step.run_id}:call_write"]
    read = script.last_returns()["call_write"]
    note = (
        "Note: approval_edited (decided_by: run_owner). The arguments of this call were changed before it was "
        "approved, by the user who started this run, the person you are talking to; it ran with these arguments "
        f"instead of the ones you proposed: {json.dumps(EDITED)}"
    )
    assert read == f"{note}\n\nupdated page 12: Rye on Sundays."
    run = decider.get_run(step.run_id)
    assert run["status"] == "completed"
    assert run["released_calls"][0]["result"] == {"content": "updated page 12: Rye on Sundays.", "is_error": False}
    (event,) = decider.list_events(step.run_id)["tool_events"]
    assert (event["outcome"], event["privacy_level"], event["result_bytes"]) == ("ok", privacy_level, len(read))
    assert event["result"] == (read if privacy_level == "full" else None)


def test_two_workers_resuming_at_once_run_the_tool_once_and_the_other_reports_the_claim(
    on_loop: Run, worker_client: AsyncClient, decider: Client, ledger: Ledger, owner: int
) -> None:
    script, other = Script(), Script()
    first: PydanticAIWorker[None] = PydanticAIWorker(worker_client, agent(ledger, script, seconds=1.0))
    second: PydanticAIWorker[None] = PydanticAIWorker(worker_client, agent(ledger, other, seconds=1.0))
    step = on_loop(first.start(owner, "Write a meta description for page 12."))
    assert step.run is not None and step.run_id is not None
    decider.approve(step.run_id, step.run["turn"]["digest"], owner)

    async def both(run_id: str) -> list[WorkerStep[Any]]:
        return list(await asyncio.gather(first.resume(run_id), second.resume(run_id)))

    steps = on_loop(both(step.run_id))
    assert sorted(resumed.status for resumed in steps) == ["claimed", "finished"]
    assert ledger.runs() == [ARGUMENTS]
    # Whichever worker won the claim ran the model on; the other never called its model.
    read = [each.last_returns() for each in (script, other) if each.requests and each.last_returns()]
    assert read == [{"call_write": "updated page 12: Fresh bread daily."}]


def test_a_mixed_turn_runs_and_posts_the_released_call_then_resumes_with_the_denied_text(
    on_loop: Run, worker_client: AsyncClient, decider: Client, ledger: Ledger, owner: int
) -> None:
    script = Script(turns=(("call_a", "call_b"),))
    worker, step = suspend(on_loop, worker_client, ledger, owner, script)
    assert step.run is not None and step.run_id is not None
    assert [call["id"] for call in step.run["turn"]["pending_calls"]] == ["call_a", "call_b"]
    calls = [approve_call("call_a"), deny_call("call_b")]
    assert decider.decide_calls(step.run_id, step.run["turn"]["digest"], owner, calls)["status"] == "released"
    assert on_loop(worker.resume(step.run_id)).status == "finished"
    assert ledger.runs() == [ARGUMENTS]
    assert script.last_returns() == {
        "call_a": "updated page 12: Fresh bread daily.",
        "call_b": denied_text("run_owner"),
    }


def test_a_model_that_asks_again_after_a_denial_appends_a_turn_which_an_approval_then_resumes(
    on_loop: Run, worker_client: AsyncClient, decider: Client, ledger: Ledger, owner: int
) -> None:
    script = Script(turns=(("call_1",), ("call_2",)))
    worker, step = suspend(on_loop, worker_client, ledger, owner, script)
    assert step.run is not None and step.run_id is not None
    decider.deny(step.run_id, step.run["turn"]["digest"], owner)
    again = on_loop(worker.resume(step.run_id))
    assert again.status == "suspended" and again.run is not None
    assert (again.run["status"], again.run["turn"]["index"]) == ("waiting_for_approval", 1)
    assert [call["id"] for call in again.run["turn"]["pending_calls"]] == ["call_2"]
    model_input = decider.get_model_input(step.run_id)
    assert model_input["format"] == "openai-chat"
    assert [message["role"] for message in model_input["messages"]] == ["system", "user", "assistant", "tool"]

    decider.approve(step.run_id, again.run["turn"]["digest"], owner)
    assert on_loop(worker.resume(step.run_id)).status == "finished"
    assert ledger.runs() == [ARGUMENTS]
    assert script.last_returns() == {
        "call_1": denied_text("run_owner"),
        "call_2": "updated page 12: Fresh bread daily.",
    }


def test_a_turn_allowed_for_the_rest_of_the_run_goes_through_at_its_registration_without_a_click(
    on_loop: Run, worker_client: AsyncClient, decider: Client, ledger: Ledger, owner: int
) -> None:
    script = Script(turns=(("call_1",), ("call_2",)))
    worker, step = suspend(on_loop, worker_client, ledger, owner, script)
    assert step.status == "suspended" and step.run is not None and step.run_id is not None
    assert remembered_for_the_run(decider, step.run, owner, approved=True)["status"] == "released"
    (rule,) = decider.list_run_rules(step.run_id)["rules"]

    finished = on_loop(worker.resume(step.run_id))
    assert (finished.status, finished.output) == ("finished", "Done.")
    assert ledger.runs() == [ARGUMENTS, ARGUMENTS], "the tool ran once per turn"
    ran = "updated page 12: Fresh bread daily."
    assert script.last_returns() == {"call_1": ran, "call_2": ran}
    run = decider.get_run(step.run_id)
    assert (run["status"], run["turn"]["index"]) == ("completed", 1)
    assert verdicts_by_turn(decider, step.run_id) == [(0, "call_1", True, None), (1, "call_2", True, rule["id"])]


def test_a_turn_refused_for_the_rest_of_the_run_reaches_the_model_as_tool_denied_with_the_never_text(
    on_loop: Run, worker_client: AsyncClient, decider: Client, ledger: Ledger, owner: int
) -> None:
    script = Script(turns=(("call_1",), ("call_2",)))
    worker, step = suspend(on_loop, worker_client, ledger, owner, script)
    assert step.run is not None and step.run_id is not None
    remembered_for_the_run(decider, step.run, owner, approved=False, reason="skip")

    assert on_loop(worker.resume(step.run_id)).status == "finished"
    assert script.last_returns() == {"call_1": NEVER_BY_OWNER_TEXT, "call_2": NEVER_BY_OWNER_TEXT}
    assert ledger.runs() == []
    (rule,) = decider.list_run_rules(step.run_id)["rules"]
    assert verdicts_by_turn(decider, step.run_id) == [(0, "call_1", False, None), (1, "call_2", False, rule["id"])]


def test_a_registration_an_owner_rule_decides_goes_straight_on_from_start_and_the_tool_runs_once(
    on_loop: Run, worker_client: AsyncClient, decider: Client, ledger: Ledger, owner: int
) -> None:
    until = (datetime.now(timezone.utc) + timedelta(days=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    rule = decider.make_owner_rule(
        {"owner_uid": owner, "created_by": owner, "tool": TOOL, "verdict": "approve", "expires_at": until}
    )
    script = Script()
    worker, step = suspend(on_loop, worker_client, ledger, owner, script)
    assert (step.status, step.output) == ("finished", "Done.")
    assert step.run_id is not None
    assert ledger.runs() == [ARGUMENTS]
    assert script.last_returns() == {"call_write": "updated page 12: Fresh bread daily."}
    assert decider.get_run(step.run_id)["status"] == "completed"
    assert verdicts_by_turn(decider, step.run_id) == [(0, "call_write", True, rule["id"])]


def test_a_released_tool_that_raises_is_posted_failed_and_resuming_twice_runs_the_other_released_call_once(
    on_loop: Run, worker_client: AsyncClient, decider: Client, ledger: Ledger, owner: int
) -> None:
    script = Script(turns=(("call_write", "call_publish"),), tools={"call_publish": "publish_page"})
    editor = agent(ledger, script)

    @editor.tool(name="publish_page", requires_approval=True)
    def publish_page(ctx: RunContext[None], page: int, description: str) -> str:
        """Publishes a page."""
        raise RuntimeError("the CMS is down")

    worker: PydanticAIWorker[None] = PydanticAIWorker(worker_client, editor)
    step = on_loop(worker.start(owner, "Update page 12 and publish it."))
    assert step.run is not None and step.run_id is not None
    assert decider.approve(step.run_id, step.run["turn"]["digest"], owner)["status"] == "released"

    assert on_loop(worker.resume(step.run_id)).status == "finished"
    assert on_loop(worker.resume(step.run_id)).status == "closed"
    assert ledger.runs() == [ARGUMENTS]
    run = decider.get_run(step.run_id)
    assert {call["call_id"]: call.get("result") for call in run["released_calls"]} == {
        "call_write": {"content": "updated page 12: Fresh bread daily.", "is_error": False},
        "call_publish": {"content": PUBLISH_FAILED, "is_error": True},
    }
    returns = script.last_returns()
    assert returns["call_write"] == "updated page 12: Fresh bread daily."
    # Handed back as Pydantic AI's failed return, which it sends a model without an error flag wrapped.
    assert json.loads(returns["call_publish"]) == {"error": PUBLISH_FAILED}
    events = {event["call_id"]: event["outcome"] for event in decider.list_events(step.run_id)["tool_events"]}
    assert events == {"call_write": "ok", "call_publish": "failed"}


def test_a_resume_whose_history_lost_the_decided_returns_appends_no_turn(
    on_loop: Run,
    worker_client: AsyncClient,
    decider: Client,
    ledger: Ledger,
    owner: int,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    script = Script(turns=(("call_1",), ("call_2",)))
    worker, step = suspend(on_loop, worker_client, ledger, owner, script)
    assert step.run is not None and step.run_id is not None
    decider.deny(step.run_id, step.run["turn"]["digest"], owner)

    def without_returns(result: AgentRunResult[Any]) -> list[ModelMessage]:
        def answers(message: ModelMessage) -> bool:
            return isinstance(message, ModelRequest) and any(isinstance(p, ToolReturnPart) for p in message.parts)

        return [message for message in result.all_messages() if not answers(message)]

    monkeypatch.setattr(worker, "_history", without_returns)
    with pytest.raises(ValueError, match="holds no result of the decided calls"):
        on_loop(worker.resume(step.run_id))
    run = decider.get_run(step.run_id)
    assert (run["status"], run["turn"]["index"]) == ("resumed", 0)


def test_a_worker_that_dies_after_posting_is_replaced_by_one_that_runs_nothing_again(
    on_loop: Run, worker_client: AsyncClient, decider: Client, ledger: Ledger, owner: int
) -> None:
    first, step = suspend(on_loop, worker_client, ledger, owner, Script(answer=RuntimeError("the worker died")))
    assert step.run is not None and step.run_id is not None
    decider.approve(step.run_id, step.run["turn"]["digest"], owner)
    with pytest.raises(RuntimeError, match="the worker died"):
        on_loop(first.resume(step.run_id))
    assert decider.get_run(step.run_id)["status"] == "resumed"

    script = Script()
    second: PydanticAIWorker[None] = PydanticAIWorker(worker_client, agent(ledger, script))
    assert on_loop(second.resume(step.run_id)).status == "finished"
    assert ledger.runs() == [ARGUMENTS]
    assert script.last_returns() == {"call_write": "updated page 12: Fresh bread daily."}


def test_a_worker_process_killed_between_release_and_results_is_restarted_and_finishes_the_run_once(
    service: Service, worker_key: str, decider: Client, ledger: Ledger, owner: int
) -> None:
    run_id = str(uuid.uuid4())
    env = example_env(service, worker_key, owner, ledger, RUN_ID=run_id, POLL_SECONDS="3600")
    worker = start_example("pydantic_ai_worker.py", env)
    try:
        run = decider.get_run(run_id) if worker.wait_for("waits for approval") else None
        assert run is not None
        edit = approve_call("call_write", EDITED)
        assert decider.decide_calls(run_id, run["turn"]["digest"], owner, [edit])["status"] == "released"
    finally:
        worker.kill()
    assert decider.get_run(run_id)["status"] == "released" and ledger.runs() == []

    finished = run_example("pydantic_ai_worker.py", env, "resume", run_id)
    assert "The model read: Note: approval_edited (decided_by: run_owner)." in finished
    assert ledger.runs() == [EDITED]
    assert decider.get_run(run_id)["status"] == "completed"
    again = run_example("pydantic_ai_worker.py", env, "resume", run_id)
    assert f"run {run_id} is closed" in again and ledger.runs() == [EDITED]


@pytest.mark.lease
def test_a_worker_killed_while_its_tool_runs_leaves_its_claim_to_lapse_and_the_model_reads_the_interrupted_text(
    short_lease: ShortLease, ledger: Ledger
) -> None:
    def approve(run_id: str, run: RunView, owner: int) -> object:
        return short_lease.decider.approve(run_id, run["turn"]["digest"], owner)

    run_id, output = killed_while_its_tool_runs_then_lapsed("pydantic_ai_worker.py", short_lease, ledger, approve)
    (read,) = [line.removeprefix("The model read: ") for line in output.splitlines() if line.startswith("The model")]
    # A failed return, which Pydantic AI hands a model without an error flag wrapped.
    assert json.loads(read) == {"error": INTERRUPTED_TEXT}
    assert ledger.runs() == [ARGUMENTS]
    assert short_lease.decider.get_run(run_id)["status"] == "completed"
