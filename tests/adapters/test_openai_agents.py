"""`approval_resume.adapters.openai_agents` with the OpenAI Agents SDK's own scripted model
(`agents.testing.ScriptedModel`), against the real binary: a write tool suspends the run, a denial (by the owner, by
an approver) reaches the model as the service's exact text, an approval runs the tool once in the worker and the
audit records its result, a mixed turn runs its released call first, and a worker that dies is replaced by another
that finishes the run without running a call twice."""

import uuid
from typing import Any

import pytest
from agents import Agent, RunConfig, function_tool
from agents.testing import ModelCall, ScriptedModel, assistant_message, function_call
from conftest import EXPIRED_TEXT, TOOL, Ledger, Run, Service, denied_text, wait_for_status
from examples import example_env, run_example, start_example

from approval_resume import ApiError, AsyncClient, Client, approve_call, deny_call
from approval_resume.adapters import WorkerStep
from approval_resume.adapters.openai_agents import OpenAIAgentsWorker, current_idempotency_key

ARGUMENTS = {"page": 12, "description": "Fresh bread daily."}
CONFIG = RunConfig(tracing_disabled=True)


def write(*call_ids: str) -> list[Any]:
    """The model's turn: one call of the write tool per id."""
    return [function_call(TOOL, ARGUMENTS, call_id=call_id) for call_id in call_ids]


def agent(ledger: Ledger, model: ScriptedModel, keys: list[str | None] | None = None) -> Agent[None]:
    @function_tool(name_override=TOOL, needs_approval=True)
    def update_page_metadata(page: int, description: str) -> str:
        """Sets a page's meta description."""
        ledger.write(page=page, description=description)
        if keys is not None:
            keys.append(current_idempotency_key())
        return f"updated page {page}"

    instructions = "You edit the bakery's website."
    return Agent(name="editor", instructions=instructions, tools=[update_page_metadata], model=model)


def outputs(call: ModelCall | None) -> dict[str, str]:
    """The tool results a model request holds, by call id."""
    assert call is not None
    return {
        item["call_id"]: item["output"]
        for item in call.input
        if isinstance(item, dict) and item.get("type") == "function_call_output"
    }


def suspend(
    on_loop: Run, client: AsyncClient, ledger: Ledger, owner: int, *call_ids: str
) -> tuple[OpenAIAgentsWorker, ScriptedModel, WorkerStep[Any]]:
    model = ScriptedModel([write(*(call_ids or ("call_write",))), [assistant_message("Done.")]])
    worker = OpenAIAgentsWorker(client, agent(ledger, model), run_config=CONFIG)
    step = on_loop(worker.start(owner, "Write a meta description for page 12."))
    return worker, model, step


def test_a_denial_by_the_owner_reaches_the_model_as_the_services_exact_text_and_nothing_runs(
    on_loop: Run, worker_client: AsyncClient, decider: Client, ledger: Ledger, owner: int
) -> None:
    worker, model, step = suspend(on_loop, worker_client, ledger, owner)
    assert step.status == "suspended" and step.run is not None and step.run_id is not None
    run = step.run
    assert (run["status"], run["format"], run["owner_uid"]) == ("waiting_for_approval", "openai-responses", owner)
    (call,) = run["turn"]["pending_calls"]
    assert (call["id"], call["name"], call["executor"], call["editable"]) == ("call_write", TOOL, "worker", False)
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


def test_an_edit_is_refused_since_the_sdk_cannot_run_one(
    on_loop: Run, worker_client: AsyncClient, decider: Client, ledger: Ledger, owner: int
) -> None:
    _, _, step = suspend(on_loop, worker_client, ledger, owner)
    assert step.run is not None and step.run_id is not None
    edit = approve_call("call_write", {"page": 12, "description": "Rye on Sundays."})
    with pytest.raises(ApiError) as refused:
        decider.decide_calls(step.run_id, step.run["turn"]["digest"], owner, [edit])
    assert (refused.value.status, refused.value.code) == (422, "not_editable")


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
    model = ScriptedModel([write("call_1"), write("call_2"), [assistant_message("Done.")]])
    worker = OpenAIAgentsWorker(worker_client, agent(ledger, model), run_config=CONFIG)
    step = on_loop(worker.start(owner, "Write a meta description for page 12."))
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
