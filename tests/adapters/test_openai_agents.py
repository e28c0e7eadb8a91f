"""`approval_resume.adapters.openai_agents` with the OpenAI Agents SDK's own scripted model
(`agents.testing.ScriptedModel`), against the real binary: a write tool suspends the run, a denial (by the owner, by
an approver) reaches the model as the service's exact text, an approval runs the tool once in the worker and the
audit records its result, an edited approval runs the tool once with the decider's arguments (the SDK's approval
carries none: the adapter's tool wrapper hands them over) and the model reads the edit note, a blank line, the output;
two workers resuming at once run the tool once and the other reports the claim; a mixed turn runs its released call
first; a turn the owner allowed (or refused, "never") for the rest of the run comes back decided when the model asks
again and the worker goes straight on without a click (the tool ran once per turn; the model reads the never text
twice), at most `max_decided_turns` turns in one call; a released tool that raises is posted failed while the other
released call runs once, a recorded result
answers only its own call, once, a worker that dies is replaced by another that finishes the run without running a
call twice, and a worker killed while its tool runs leaves its claim to lapse: the model reads the interrupted text."""

import asyncio
import json
import uuid
from collections.abc import Sequence
from typing import Any

import pytest
from agents import Agent, FunctionTool, RunConfig, function_tool
from agents.result import RunResult
from agents.tool_context import ToolContext
from agents.testing import ModelCall, ScriptedModel, assistant_message, function_call
from conftest import (
    ARGUMENTS,
    EDITED,
    EXPIRED_TEXT,
    INTERRUPTED_TEXT,
    NEVER_BY_OWNER_TEXT,
    PUBLISH_FAILED,
    SHORT_LEASE_SECS,
    TOOL,
    Ledger,
    Run,
    Service,
    ShortLease,
    denied_text,
    new_owner,
    remembered_for_the_run,
    verdicts_by_turn,
    wait_for_status,
)
from examples import example_env, killed_while_its_tool_runs_then_lapsed, run_example, start_example

from approval_resume import AsyncClient, Client, approve_call, deny_call
from approval_resume.adapters import WorkerStep, openai_agents
from approval_resume.adapters.openai_agents import OpenAIAgentsWorker, current_idempotency_key
from approval_resume.models import JsonObject, RunView

CONFIG = RunConfig(tracing_disabled=True)


def write(*call_ids: str) -> list[Any]:
    """The model's turn: one call of the write tool per id."""
    return [function_call(TOOL, ARGUMENTS, call_id=call_id) for call_id in call_ids]


def agent(
    ledger: Ledger,
    model: ScriptedModel,
    keys: list[str | None] | None = None,
    more: Sequence[FunctionTool] = (),
    seconds: float = 0,
) -> Agent[None]:
    @function_tool(name_override=TOOL, needs_approval=True)
    async def update_page_metadata(page: int, description: str) -> str:
        """Sets a page's meta description."""
        ledger.write(page=page, description=description)
        if keys is not None:
            keys.append(current_idempotency_key())
        await asyncio.sleep(seconds)
        return f"updated page {page}"

    instructions = "You edit the bakery's website."
    return Agent(name="editor", instructions=instructions, tools=[update_page_metadata, *more], model=model)


def outputs(call: ModelCall | None) -> dict[str, str]:
    """The tool results a model request holds, by call id."""
    assert call is not None
    return {
        item["call_id"]: item["output"]
        for item in call.input
        if isinstance(item, dict) and item.get("type") == "function_call_output"
    }


def asking(
    on_loop: Run, client: AsyncClient, ledger: Ledger, owner: int, *turns: list[Any]
) -> tuple[OpenAIAgentsWorker, ScriptedModel, WorkerStep[Any]]:
    """A worker whose model asks for the calls of `turns`, one turn after the other, then answers "Done.", and what
    its start on the page's description came to."""
    model = ScriptedModel([*turns, [assistant_message("Done.")]])
    worker = OpenAIAgentsWorker(client, agent(ledger, model), run_config=CONFIG)
    step = on_loop(worker.start(owner, "Write a meta description for page 12."))
    return worker, model, step


def suspend(
    on_loop: Run, client: AsyncClient, ledger: Ledger, owner: int, *call_ids: str
) -> tuple[OpenAIAgentsWorker, ScriptedModel, WorkerStep[Any]]:
    """`asking` with one turn: a write per id (`call_write` by default)."""
    return asking(on_loop, client, ledger, owner, write(*(call_ids or ("call_write",))))


def test_a_denial_by_the_owner_reaches_the_model_as_the_services_exact_text_and_nothing_runs(
    on_loop: Run, worker_client: AsyncClient, decider: Client, ledger: Ledger, owner: int
) -> None:
    worker, model, step = suspend(on_loop, worker_client, ledger, owner)
    assert step.status == "suspended" and step.run is not None and step.run_id is not None
    run = step.run
    assert (run["status"], run["format"], run["owner_uid"]) == ("waiting_for_approval", "openai-responses", owner)
    (call,) = run["turn"]["pending_calls"]
    assert (call["id"], call["name"], call["executor"], call["editable"]) == ("call_write", TOOL, "worker", True)
    state = decider.get_run(step.run_id, include_worker_state=True)["worker_state"]
    assert isinstance(state, dict) and "$schemaVersion" in state

    answer = decider.deny(step.run_id, run["turn"]["digest"], owner)
    assert answer["results"][0]["content"] == denied_text("run_owner")
    finished = on_loop(worker.resume(step.run_id))
    assert (finished.status, finished.output) == ("finished", "Done.")
    assert outputs(model.last_call) == {"call_write": denied_text("run_owner")}
    assert ledger.runs() == []
    assert decider.get_run(step.run_id)["status"] == "completed"


def test_a_denial_by_an_approver_tells_the_model_another_user_declined(
    on_loop: Run, worker_client: AsyncClient, decider: Client, ledger: Ledger, owner: int, approver: int
) -> None:
    worker, model, step = suspend(on_loop, worker_client, ledger, owner)
    assert step.run is not None and step.run_id is not None
    decider.deny(step.run_id, step.run["turn"]["digest"], approver)
    assert on_loop(worker.resume(step.run_id)).status == "finished"
    assert outputs(model.last_call) == {"call_write": denied_text("other_user")}
    assert ledger.runs() == []


@pytest.mark.parametrize("privacy_level", ["full", "metadata"])
def test_an_approval_runs_the_tool_once_in_the_worker_and_the_audit_keeps_its_result_at_the_runs_level(
    on_loop: Run, worker_client: AsyncClient, decider: Client, ledger: Ledger, owner: int, privacy_level: str
) -> None:
    keys: list[str | None] = []
    model = ScriptedModel([write("call_write"), [assistant_message("Done.")]])
    worker = OpenAIAgentsWorker(
        worker_client, agent(ledger, model, keys), run_config=CONFIG, registration={"privacy_level": privacy_level}
    )
    step = on_loop(worker.start(owner, "Write a meta description for page 12."))
    assert step.run is not None and step.run_id is not None
    assert decider.approve(step.run_id, step.run["turn"]["digest"], owner)["status"] == "released"
    assert on_loop(worker.resume(step.run_id)).status == "finished"

    assert ledger.runs() == [ARGUMENTS]
    assert keys == [f"{step.run_id}:call_write"]
    assert outputs(model.last_call) == {"call_write": "updated page 12"}
    run = decider.get_run(step.run_id)
    assert run["status"] == "completed"
    assert run["released_calls"] == [
        {
            "call_id": "call_write",
            "tool": TOOL,
            "arguments": '{"page":12,"description":"Fresh bread daily."}',
            "edited": False,
            "result": {"content": "updated page 12", "is_error": False},
        }
    ]
    (event,) = decider.list_events(step.run_id)["tool_events"]
    assert (event["outcome"], event["privacy_level"], event["result_bytes"]) == ("ok", privacy_level, 15)
    assert event["result"] == ("updated page 12" if privacy_level == "full" else None)


def test_a_turn_nobody_decided_in_time_reaches_the_model_as_the_expired_text(
    on_loop: Run, worker_client: AsyncClient, decider: Client, ledger: Ledger, owner: int
) -> None:
    model = ScriptedModel([write("call_write"), [assistant_message("Done.")]])
    worker = OpenAIAgentsWorker(
        worker_client, agent(ledger, model), run_config=CONFIG, registration={"approval_ttl_secs": 1}
    )
    step = on_loop(worker.start(owner, "Write a meta description for page 12."))
    assert step.run_id is not None
    wait_for_status(decider, step.run_id, "resumed")
    assert on_loop(worker.resume(step.run_id)).status == "finished"
    assert outputs(model.last_call) == {"call_write": EXPIRED_TEXT}
    assert ledger.runs() == []


def test_an_edited_approval_runs_the_tool_once_with_the_edit_and_the_model_reads_the_note_then_the_output(
    on_loop: Run, worker_client: AsyncClient, decider: Client, ledger: Ledger, owner: int
) -> None:
    keys: list[str | None] = []
    model = ScriptedModel([write("call_write"), [assistant_message("Done.")]])
    worker = OpenAIAgentsWorker(worker_client, agent(ledger, model, keys), run_config=CONFIG)
    step = on_loop(worker.start(owner, "Write a meta description for page 12."))
    assert step.run is not None and step.run_id is not None
    edit = approve_call("call_write", EDITED)
    assert decider.decide_calls(step.run_id, step.run["turn"]["digest"], owner, [edit])["status"] == "released"
    assert on_loop(worker.resume(step.run_id)).status == "finished"

    assert ledger.runs() == [EDITED]
    assert keys == [f"{step.run_id}:call_write"]
    note = (
        "Note: approval_edited (decided_by: run_owner). The arguments of this call were changed before it was "
        "approved, by the user who started this run, the person you are talking to; it ran with these arguments "
        f"instead of the ones you proposed: {json.dumps(EDITED)}"
    )
    assert outputs(model.last_call) == {"call_write": f"{note}\n\nupdated page 12"}
    run = decider.get_run(step.run_id)
    assert run["released_calls"][0]["result"] == {"content": "updated page 12", "is_error": False}


def test_two_workers_resuming_at_once_run_the_tool_once_and_the_other_reports_the_claim(
    on_loop: Run, worker_client: AsyncClient, decider: Client, ledger: Ledger, owner: int
) -> None:
    model = ScriptedModel([write("call_write"), [assistant_message("Done.")]])
    other = ScriptedModel([[assistant_message("Done.")]])
    first = OpenAIAgentsWorker(worker_client, agent(ledger, model, seconds=1.0), run_config=CONFIG)
    second = OpenAIAgentsWorker(worker_client, agent(ledger, other, seconds=1.0), run_config=CONFIG)
    step = on_loop(first.start(owner, "Write a meta description for page 12."))
    assert step.run is not None and step.run_id is not None
    decider.approve(step.run_id, step.run["turn"]["digest"], owner)

    async def both(run_id: str) -> list[WorkerStep[Any]]:
        return list(await asyncio.gather(first.resume(run_id), second.resume(run_id)))

    steps = on_loop(both(step.run_id))
    assert sorted(resumed.status for resumed in steps) == ["claimed", "finished"]
    assert ledger.runs() == [ARGUMENTS]
    assert decider.get_run(step.run_id)["status"] == "completed"
    # Whichever worker won the claim ran the model on; the other never called its model.
    read = [outputs(each.last_call) for each in (model, other) if each.last_call and outputs(each.last_call)]
    assert read == [{"call_write": "updated page 12"}]


def test_a_mixed_turn_runs_and_posts_the_released_call_then_resumes_with_the_denied_text(
    on_loop: Run, worker_client: AsyncClient, decider: Client, ledger: Ledger, owner: int
) -> None:
    worker, model, step = suspend(on_loop, worker_client, ledger, owner, "call_a", "call_b")
    assert step.run is not None and step.run_id is not None
    assert [call["id"] for call in step.run["turn"]["pending_calls"]] == ["call_a", "call_b"]
    calls = [approve_call("call_a"), deny_call("call_b")]
    assert decider.decide_calls(step.run_id, step.run["turn"]["digest"], owner, calls)["status"] == "released"
    assert on_loop(worker.resume(step.run_id)).status == "finished"
    assert ledger.runs() == [ARGUMENTS]
    assert outputs(model.last_call) == {"call_a": "updated page 12", "call_b": denied_text("run_owner")}


def test_a_model_that_asks_again_after_a_denial_appends_a_turn_which_an_approval_then_resumes(
    on_loop: Run, worker_client: AsyncClient, decider: Client, ledger: Ledger, owner: int
) -> None:
    worker, model, step = asking(on_loop, worker_client, ledger, owner, write("call_1"), write("call_2"))
    assert step.run is not None and step.run_id is not None
    decider.deny(step.run_id, step.run["turn"]["digest"], owner)
    again = on_loop(worker.resume(step.run_id))
    assert again.status == "suspended" and again.run is not None
    assert (again.run["status"], again.run["turn"]["index"]) == ("waiting_for_approval", 1)
    assert [call["id"] for call in again.run["turn"]["pending_calls"]] == ["call_2"]

    decider.approve(step.run_id, again.run["turn"]["digest"], owner)
    assert on_loop(worker.resume(step.run_id)).status == "finished"
    assert ledger.runs() == [ARGUMENTS]
    assert outputs(model.last_call) == {"call_1": denied_text("run_owner"), "call_2": "updated page 12"}


def test_a_turn_allowed_for_the_rest_of_the_run_goes_through_at_its_registration_without_a_click(
    on_loop: Run, worker_client: AsyncClient, decider: Client, ledger: Ledger, owner: int
) -> None:
    worker, model, step = asking(on_loop, worker_client, ledger, owner, write("call_1"), write("call_2"))
    assert step.status == "suspended" and step.run is not None and step.run_id is not None
    assert remembered_for_the_run(decider, step.run, owner, approved=True)["status"] == "released"
    (rule,) = decider.list_run_rules(step.run_id)["rules"]
    assert (rule["tool"], rule["verdict"], rule["created_by"]) == (TOOL, "approve", owner)

    finished = on_loop(worker.resume(step.run_id))
    assert (finished.status, finished.output) == ("finished", "Done.")
    assert ledger.runs() == [ARGUMENTS, ARGUMENTS], "the tool ran once per turn"
    assert outputs(model.last_call) == {"call_1": "updated page 12", "call_2": "updated page 12"}
    run = decider.get_run(step.run_id)
    assert (run["status"], run["turn"]["index"]) == ("completed", 1)
    assert verdicts_by_turn(decider, step.run_id) == [(0, "call_1", True, None), (1, "call_2", True, rule["id"])]
    released = {call["call_id"]: call.get("result") for call in run["released_calls"]}
    assert released == {"call_2": {"content": "updated page 12", "is_error": False}}


def test_a_turn_refused_for_the_rest_of_the_run_reaches_the_model_as_the_never_text_and_its_call_never_runs(
    on_loop: Run, worker_client: AsyncClient, decider: Client, ledger: Ledger, owner: int
) -> None:
    worker, model, step = asking(on_loop, worker_client, ledger, owner, write("call_1"), write("call_2"))
    assert step.run is not None and step.run_id is not None
    answer = remembered_for_the_run(decider, step.run, owner, approved=False, reason="skip")
    assert answer["results"][0]["content"] == NEVER_BY_OWNER_TEXT

    finished = on_loop(worker.resume(step.run_id))
    assert (finished.status, finished.output) == ("finished", "Done.")
    assert outputs(model.last_call) == {"call_1": NEVER_BY_OWNER_TEXT, "call_2": NEVER_BY_OWNER_TEXT}
    assert ledger.runs() == []
    (rule,) = decider.list_run_rules(step.run_id)["rules"]
    assert (rule["verdict"], rule["reason"]) == ("deny", "skip")
    assert verdicts_by_turn(decider, step.run_id) == [(0, "call_1", False, None), (1, "call_2", False, rule["id"])]


def test_a_worker_goes_straight_on_through_at_most_max_decided_turns_and_a_later_resume_goes_on(
    on_loop: Run, worker_client: AsyncClient, decider: Client, ledger: Ledger, owner: int
) -> None:
    model = ScriptedModel([write("call_1"), write("call_2"), write("call_3"), [assistant_message("Done.")]])
    worker = OpenAIAgentsWorker(worker_client, agent(ledger, model), run_config=CONFIG, max_decided_turns=1)
    step = on_loop(worker.start(owner, "Write a meta description for page 12."))
    assert step.run is not None and step.run_id is not None
    remembered_for_the_run(decider, step.run, owner, approved=True)

    stopped = on_loop(worker.resume(step.run_id))
    assert stopped.status == "decided" and stopped.run is not None
    assert (stopped.run["status"], stopped.run["turn"]["index"]) == ("released", 2)
    assert ledger.runs() == [ARGUMENTS, ARGUMENTS], "turn 2 went straight on; turn 3 waits for a resume"
    assert on_loop(worker.resume(step.run_id)).status == "finished"
    assert ledger.runs() == [ARGUMENTS] * 3
    assert outputs(model.last_call) == {f"call_{n}": "updated page 12" for n in (1, 2, 3)}


def test_a_released_tool_that_raises_is_posted_failed_and_resuming_twice_runs_the_other_released_call_once(
    on_loop: Run, worker_client: AsyncClient, decider: Client, ledger: Ledger, owner: int
) -> None:
    @function_tool(name_override="publish_page", needs_approval=True, failure_error_function=None)
    def publish_page(page: int) -> str:
        """Publishes a page."""
        raise RuntimeError("the CMS is down")

    turn = [*write("call_write"), function_call("publish_page", {"page": 12}, call_id="call_publish")]
    model = ScriptedModel([turn, [assistant_message("Done.")]])
    worker = OpenAIAgentsWorker(worker_client, agent(ledger, model, more=[publish_page]), run_config=CONFIG)
    step = on_loop(worker.start(owner, "Update page 12 and publish it."))
    assert step.run is not None and step.run_id is not None
    assert decider.approve(step.run_id, step.run["turn"]["digest"], owner)["status"] == "released"

    assert on_loop(worker.resume(step.run_id)).status == "finished"
    assert on_loop(worker.resume(step.run_id)).status == "closed"
    assert ledger.runs() == [ARGUMENTS]
    run = decider.get_run(step.run_id)
    assert {call["call_id"]: call.get("result") for call in run["released_calls"]} == {
        "call_write": {"content": "updated page 12", "is_error": False},
        "call_publish": {"content": PUBLISH_FAILED, "is_error": True},
    }
    assert outputs(model.last_call) == {"call_write": "updated page 12", "call_publish": PUBLISH_FAILED}
    events = {event["call_id"]: event["outcome"] for event in decider.list_events(step.run_id)["tool_events"]}
    assert events == {"call_write": "ok", "call_publish": "failed"}


def test_a_recorded_result_answers_its_own_tools_call_once_and_a_reused_call_id_runs_its_tool(
    on_loop: Run, worker_client: AsyncClient, ledger: Ledger
) -> None:
    """The SDK (0.24.0) refuses a call id reused for another invocation itself (`ModelBehaviorError`), so no model
    can drive this: the worker's wrapped tools are called as the SDK calls them, in the resumed step, with the
    service's result of `call_1` recorded."""
    reads: list[int] = []

    @function_tool(name_override="read_page")
    def read_page(page: int) -> str:
        """Reads a page."""
        reads.append(page)
        return f"page {page}: the bakery"

    worker = OpenAIAgentsWorker(worker_client, agent(ledger, ScriptedModel([]), more=[read_page]), run_config=CONFIG)
    tools = {tool.name: tool for tool in worker._agent.tools if isinstance(tool, FunctionTool)}

    recorded = {"call_1": (TOOL, "updated page 12 (recorded)")}

    def call(name: str, arguments: dict[str, Any]) -> Any:
        text = json.dumps(arguments)
        context = ToolContext(None, tool_name=name, tool_call_id="call_1", tool_arguments=text)

        async def invoke() -> Any:
            token = openai_agents._RECORDED.set(recorded)
            try:
                return await tools[name].on_invoke_tool(context, text)
            finally:
                openai_agents._RECORDED.reset(token)

        return on_loop(invoke())

    assert call("read_page", {"page": 12}) == "page 12: the bakery"
    assert reads == [12]
    assert call(TOOL, ARGUMENTS) == "updated page 12 (recorded)"
    assert ledger.runs() == []
    assert call(TOOL, ARGUMENTS) == "updated page 12"
    assert ledger.runs() == [ARGUMENTS]


def test_a_resume_whose_history_lost_the_decided_outputs_appends_no_turn(
    on_loop: Run,
    worker_client: AsyncClient,
    decider: Client,
    ledger: Ledger,
    owner: int,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    worker, model, step = asking(on_loop, worker_client, ledger, owner, write("call_1"), write("call_2"))
    assert step.run is not None and step.run_id is not None
    decider.deny(step.run_id, step.run["turn"]["digest"], owner)

    def without_outputs(result: RunResult) -> list[JsonObject]:
        items = [dict(item) for item in result.to_input_list()]
        return [item for item in items if item.get("type") != "function_call_output"]

    monkeypatch.setattr(worker, "_items", without_outputs)
    with pytest.raises(ValueError, match="holds no result of the decided calls"):
        on_loop(worker.resume(step.run_id))
    run = decider.get_run(step.run_id)
    assert (run["status"], run["turn"]["index"]) == ("resumed", 0)


def test_a_worker_that_dies_after_posting_is_replaced_by_one_that_runs_nothing_again(
    on_loop: Run, worker_client: AsyncClient, decider: Client, ledger: Ledger, owner: int
) -> None:
    dying = ScriptedModel([write("call_write"), RuntimeError("the worker died before the model answered")])
    first = OpenAIAgentsWorker(worker_client, agent(ledger, dying), run_config=CONFIG)
    step = on_loop(first.start(owner, "Write a meta description for page 12."))
    assert step.run is not None and step.run_id is not None
    decider.approve(step.run_id, step.run["turn"]["digest"], owner)
    with pytest.raises(RuntimeError, match="the worker died"):
        on_loop(first.resume(step.run_id))
    assert decider.get_run(step.run_id)["status"] == "resumed"

    model = ScriptedModel([[assistant_message("Done.")]])
    second = OpenAIAgentsWorker(worker_client, agent(ledger, model), run_config=CONFIG)
    assert on_loop(second.resume(step.run_id)).status == "finished"
    assert ledger.runs() == [ARGUMENTS]
    assert outputs(model.last_call) == {"call_write": "updated page 12"}


def test_a_worker_process_killed_between_release_and_results_is_restarted_and_finishes_the_run_once(
    service: Service, worker_key: str, decider: Client, ledger: Ledger, owner: int
) -> None:
    run_id = str(uuid.uuid4())
    env = example_env(service, worker_key, owner, ledger, RUN_ID=run_id, POLL_SECONDS="3600")
    worker = start_example("openai_agents_worker.py", env)
    try:
        run = decider.get_run(run_id) if worker.wait_for("waits for approval") else None
        assert run is not None
        assert decider.approve(run_id, run["turn"]["digest"], owner)["status"] == "released"
    finally:
        worker.kill()
    assert decider.get_run(run_id)["status"] == "released" and ledger.runs() == []

    finished = run_example("openai_agents_worker.py", env, "resume", run_id)
    assert "The model read: updated page 12" in finished
    assert ledger.runs() == [ARGUMENTS]
    assert decider.get_run(run_id)["status"] == "completed"
    again = run_example("openai_agents_worker.py", env, "resume", run_id)
    assert f"run {run_id} is closed" in again and ledger.runs() == [ARGUMENTS]


@pytest.mark.lease
def test_a_worker_killed_while_its_tool_runs_leaves_its_claim_to_lapse_and_the_model_reads_the_interrupted_text(
    short_lease: ShortLease, ledger: Ledger
) -> None:
    def approve(run_id: str, run: RunView, owner: int) -> object:
        return short_lease.decider.approve(run_id, run["turn"]["digest"], owner)

    run_id, output = killed_while_its_tool_runs_then_lapsed("openai_agents_worker.py", short_lease, ledger, approve)
    assert f"The model read: {INTERRUPTED_TEXT}" in output
    assert ledger.runs() == [ARGUMENTS]
    run = short_lease.decider.get_run(run_id)
    assert run["status"] == "completed"


@pytest.mark.lease
def test_a_tool_that_runs_longer_than_the_lease_keeps_its_claim_renewed_and_its_result_is_taken(
    on_loop: Run, short_lease: ShortLease, ledger: Ledger
) -> None:
    owner = new_owner(short_lease.decider)
    client = AsyncClient(short_lease.service.base_url, short_lease.worker_key)
    try:
        model = ScriptedModel([write("call_write"), [assistant_message("Done.")]])
        slow = agent(ledger, model, seconds=SHORT_LEASE_SECS + 2.0)
        worker = OpenAIAgentsWorker(client, slow, run_config=CONFIG)
        step = on_loop(worker.start(owner, "Write a meta description for page 12."))
        assert step.run is not None and step.run_id is not None
        short_lease.decider.approve(step.run_id, step.run["turn"]["digest"], owner)
        assert on_loop(worker.resume(step.run_id)).status == "finished"
    finally:
        on_loop(client.aclose())
    assert ledger.runs() == [ARGUMENTS]
    assert outputs(model.last_call) == {"call_write": "updated page 12"}


def test_a_run_cancelled_while_its_tool_runs_ends_the_worker_closed_and_its_result_is_not_taken(
    on_loop: Run,
    service: Service,
    worker_key: str,
    worker_client: AsyncClient,
    decider: Client,
    ledger: Ledger,
    owner: int,
) -> None:
    model = ScriptedModel([write("call_write"), [assistant_message("Done.")]])
    worker = OpenAIAgentsWorker(worker_client, agent(ledger, model, seconds=2.0), run_config=CONFIG)
    step = on_loop(worker.start(owner, "Write a meta description for page 12."))
    assert step.run is not None and step.run_id is not None
    decider.approve(step.run_id, step.run["turn"]["digest"], owner)

    async def cancel_while_the_tool_runs(run_id: str) -> WorkerStep[Any]:
        resuming = asyncio.create_task(worker.resume(run_id))
        while not ledger.runs():
            await asyncio.sleep(0.05)
        with Client(service.base_url, worker_key) as canceller:
            await asyncio.to_thread(canceller.cancel_run, run_id)
        return await resuming

    resumed = on_loop(cancel_while_the_tool_runs(step.run_id))
    assert resumed.status == "closed" and resumed.run is not None and resumed.run["status"] == "cancelled"
    assert ledger.runs() == [ARGUMENTS]
    assert "result" not in decider.get_run(step.run_id)["released_calls"][0]
