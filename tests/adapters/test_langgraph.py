"""`approval_resume.adapters.langgraph` with LangChain's own fake chat model (`GenericFakeChatModel` of
`langchain_core`) in an agent of `langchain.agents.create_agent` with the `HumanInTheLoopMiddleware` and an in-memory
checkpointer, against the real binary: a denial reaches the model as the service's exact text and nothing runs; an
edited approval runs the tool once with the decider's arguments and the model reads the edit note, a blank line, the
output; two workers resuming at once run the tool once, the other reports the claim; a turn the owner allowed (or
refused, "never") for the rest of the run goes straight on without a click; a plain `interrupt()` carrying
tool calls is adapted too; the example worker (a SQLite checkpointer) killed after the release is restarted and
finishes the run once, and killed while its tool runs leaves its claim to lapse: the model reads the interrupted
text."""

import asyncio
import json
import uuid
from collections.abc import Iterator, Sequence
from typing import Annotated, Any, TypedDict

import pytest
from conftest import (
    ARGUMENTS,
    EDITED,
    INTERRUPTED_TEXT,
    NEVER_BY_OWNER_TEXT,
    TOOL,
    Ledger,
    Run,
    Service,
    ShortLease,
    denied_text,
    remembered_for_the_run,
    verdicts_by_turn,
)
from examples import example_env, killed_while_its_tool_runs_then_lapsed, run_example, start_example
from langchain.agents import create_agent
from langchain.agents.middleware import HumanInTheLoopMiddleware
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, AnyMessage, BaseMessage, ToolMessage
from langchain_core.outputs import ChatResult
from langchain_core.tools import BaseTool, tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.prebuilt import ToolNode, ToolRuntime
from langgraph.types import interrupt


from approval_resume import AsyncClient, Client, approve_call
from approval_resume.adapters import WorkerStep
from approval_resume.adapters.langgraph import LangGraphWorker, current_idempotency_key
from approval_resume.models import RunView


class ScriptedChat(GenericFakeChatModel):
    """LangChain's fake chat model, answering from its list, keeping each request it was sent (`requests`), and
    taking tools as a real chat model does (the fake has no `bind_tools`; the answers are scripted anyway)."""

    requests: list[list[BaseMessage]]

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> "ScriptedChat":
        return self

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        self.requests.append(list(messages))
        return super()._generate(messages, *args, **kwargs)


def model(*answers: AIMessage) -> ScriptedChat:
    return ScriptedChat(messages=iter(answers), requests=[])


def write(*call_ids: str) -> AIMessage:
    return AIMessage(content="", tool_calls=[{"name": TOOL, "args": ARGUMENTS, "id": call_id} for call_id in call_ids])


def tools(ledger: Ledger, keys: list[str | None] | None = None, seconds: float = 0) -> list[BaseTool]:
    @tool(TOOL)
    async def update_page_metadata(page: int, description: str, runtime: ToolRuntime) -> str:
        """Sets a page's meta description."""
        ledger.write(page=page, description=description)
        if keys is not None and runtime.tool_call_id is not None:
            keys.append(current_idempotency_key(runtime.tool_call_id))
        await asyncio.sleep(seconds)
        return f"updated page {page}: {description}"

    return [update_page_metadata]


def agent(chat: ScriptedChat, ledger: Ledger, checkpointer: InMemorySaver, **tool_options: Any) -> Any:
    return create_agent(
        chat,
        tools(ledger, **tool_options),
        system_prompt="You edit the bakery's website.",
        middleware=[HumanInTheLoopMiddleware(interrupt_on={TOOL: True})],
        checkpointer=checkpointer,
    )


def tool_texts(chat: ScriptedChat) -> dict[str, Any]:
    """The tool messages of the last request the model was sent, by call id."""
    return {message.tool_call_id: message.content for message in chat.requests[-1] if isinstance(message, ToolMessage)}


@pytest.fixture
def checkpointer() -> Iterator[InMemorySaver]:
    yield InMemorySaver()


def suspend(on_loop: Run, worker: LangGraphWorker, owner: int) -> WorkerStep[Any]:
    step = on_loop(worker.start(owner, {"messages": [{"role": "user", "content": "Describe page 12."}]}))
    assert step.status == "suspended" and step.run is not None and step.run_id is not None
    return step


def asking_twice(
    on_loop: Run, worker_client: AsyncClient, ledger: Ledger, owner: int, checkpointer: InMemorySaver
) -> tuple[ScriptedChat, LangGraphWorker, WorkerStep[Any]]:
    """A worker whose model writes (call_1), writes again (call_2), then answers "Done.", suspended on the first."""
    chat = model(write("call_1"), write("call_2"), AIMessage(content="Done."))
    worker = LangGraphWorker(worker_client, agent(chat, ledger, checkpointer))
    return chat, worker, suspend(on_loop, worker, owner)


def test_an_interrupt_of_the_middleware_is_a_run_and_a_denial_reaches_the_model_as_the_exact_text(
    on_loop: Run, worker_client: AsyncClient, decider: Client, ledger: Ledger, owner: int, checkpointer: InMemorySaver
) -> None:
    chat = model(write("call_write"), AIMessage(content="Done."))
    worker = LangGraphWorker(worker_client, agent(chat, ledger, checkpointer))
    step = suspend(on_loop, worker, owner)
    assert step.run is not None and step.run_id is not None
    run = step.run
    assert (run["status"], run["format"]) == ("waiting_for_approval", "openai-chat")
    (call,) = run["turn"]["pending_calls"]
    assert (call["id"], call["name"], call["executor"], call["editable"]) == ("call_write", TOOL, "worker", True)
    assert json.loads(call["arguments"]) == ARGUMENTS
    state = decider.get_run(step.run_id, include_worker_state=True)["worker_state"]
    assert state == {"thread_id": step.run_id}

    decider.deny(step.run_id, run["turn"]["digest"], owner)
    finished = on_loop(worker.resume(step.run_id))
    assert finished.status == "finished" and finished.output is not None
    assert finished.output["messages"][-1].content == "Done."
    assert tool_texts(chat) == {"call_write": denied_text("run_owner")}
    assert ledger.runs() == []
    assert decider.get_run(step.run_id)["status"] == "completed"


def test_an_edited_approval_runs_the_tool_once_with_the_edit_and_the_model_reads_the_note_then_the_output(
    on_loop: Run, worker_client: AsyncClient, decider: Client, ledger: Ledger, owner: int, checkpointer: InMemorySaver
) -> None:
    chat, keys = model(write("call_write"), AIMessage(content="Done.")), list[str | None]()
    worker = LangGraphWorker(worker_client, agent(chat, ledger, checkpointer, keys=keys))
    step = suspend(on_loop, worker, owner)
    assert step.run is not None and step.run_id is not None
    answer = decider.decide_calls(step.run_id, step.run["turn"]["digest"], owner, [approve_call("call_write", EDITED)])
    assert answer["status"] == "released"
    assert on_loop(worker.resume(step.run_id)).status == "finished"

    assert ledger.runs() == [EDITED]
    assert keys == [f"{step.run_id}:call_write"]
    note = (
        "Note: approval_edited (decided_by: run_owner). The arguments of this call were changed before it was "
        "approved, by the user who started this run, the person you are talking to; it ran with these arguments "
        f"instead of the ones you proposed: {json.dumps(EDITED)}"
    )
    assert tool_texts(chat) == {"call_write": f"{note}\n\nupdated page 12: Rye on Sundays."}
    run = decider.get_run(step.run_id)
    assert run["released_calls"][0]["result"] == {"content": "updated page 12: Rye on Sundays.", "is_error": False}


def test_two_workers_resuming_at_once_run_the_tool_once_and_the_other_reports_the_claim(
    on_loop: Run, worker_client: AsyncClient, decider: Client, ledger: Ledger, owner: int, checkpointer: InMemorySaver
) -> None:
    chat, other = model(write("call_write"), AIMessage(content="Done.")), model(AIMessage(content="Done."))
    first = LangGraphWorker(worker_client, agent(chat, ledger, checkpointer, seconds=1.0))
    second = LangGraphWorker(worker_client, agent(other, ledger, checkpointer, seconds=1.0))
    step = suspend(on_loop, first, owner)
    assert step.run is not None and step.run_id is not None
    decider.approve(step.run_id, step.run["turn"]["digest"], owner)

    async def both() -> list[WorkerStep[Any]]:
        return list(await asyncio.gather(first.resume(step.run_id or ""), second.resume(step.run_id or "")))

    steps = on_loop(both())
    assert sorted(resumed.status for resumed in steps) == ["claimed", "finished"]
    assert ledger.runs() == [ARGUMENTS]
    # Whichever worker won the claim ran the model on; the other never called its model.
    read = [tool_texts(each) for each in (chat, other) if each.requests and tool_texts(each)]
    assert read == [{"call_write": "updated page 12: Fresh bread daily."}]


def test_a_turn_allowed_for_the_rest_of_the_run_goes_through_at_its_registration_without_a_click(
    on_loop: Run, worker_client: AsyncClient, decider: Client, ledger: Ledger, owner: int, checkpointer: InMemorySaver
) -> None:
    chat, worker, step = asking_twice(on_loop, worker_client, ledger, owner, checkpointer)
    assert step.run is not None and step.run_id is not None
    assert remembered_for_the_run(decider, step.run, owner, approved=True)["status"] == "released"
    (rule,) = decider.list_run_rules(step.run_id)["rules"]

    finished = on_loop(worker.resume(step.run_id))
    assert finished.status == "finished" and finished.output is not None
    assert finished.output["messages"][-1].content == "Done."
    assert ledger.runs() == [ARGUMENTS, ARGUMENTS], "the tool ran once per turn"
    ran = "updated page 12: Fresh bread daily."
    assert tool_texts(chat) == {"call_1": ran, "call_2": ran}
    run = decider.get_run(step.run_id)
    assert (run["status"], run["turn"]["index"]) == ("completed", 1)
    assert verdicts_by_turn(decider, step.run_id) == [(0, "call_1", True, None), (1, "call_2", True, rule["id"])]


def test_a_turn_refused_for_the_rest_of_the_run_reaches_the_model_as_the_never_text_and_its_call_never_runs(
    on_loop: Run, worker_client: AsyncClient, decider: Client, ledger: Ledger, owner: int, checkpointer: InMemorySaver
) -> None:
    chat, worker, step = asking_twice(on_loop, worker_client, ledger, owner, checkpointer)
    assert step.run is not None and step.run_id is not None
    remembered_for_the_run(decider, step.run, owner, approved=False, reason="skip")

    assert on_loop(worker.resume(step.run_id)).status == "finished"
    assert tool_texts(chat) == {"call_1": NEVER_BY_OWNER_TEXT, "call_2": NEVER_BY_OWNER_TEXT}
    assert ledger.runs() == []
    (rule,) = decider.list_run_rules(step.run_id)["rules"]
    assert verdicts_by_turn(decider, step.run_id) == [(0, "call_1", False, None), (1, "call_2", False, rule["id"])]


class Conversation(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]


def test_a_plain_interrupt_carrying_tool_calls_is_a_run_and_an_approval_runs_its_tool_once(
    on_loop: Run, worker_client: AsyncClient, decider: Client, ledger: Ledger, owner: int, checkpointer: InMemorySaver
) -> None:
    chat = model(write("call_write"), AIMessage(content="Done."))

    async def call_model(state: Conversation) -> dict[str, Any]:
        return {"messages": [await chat.ainvoke(state["messages"])]}

    def review(state: Conversation) -> dict[str, Any]:
        last = state["messages"][-1]
        assert isinstance(last, AIMessage)
        decisions = interrupt({"tool_calls": last.tool_calls})["decisions"]
        rejected = [
            ToolMessage(content=decision["message"], tool_call_id=call["id"], status="error")
            for call, decision in zip(last.tool_calls, decisions, strict=True)
            if decision["type"] == "reject"
        ]
        return {"messages": rejected}

    def after_review(state: Conversation) -> str:
        return "tools" if isinstance(state["messages"][-1], AIMessage) else "model"

    def after_model(state: Conversation) -> str:
        last = state["messages"][-1]
        return "review" if isinstance(last, AIMessage) and last.tool_calls else END

    graph = StateGraph(Conversation)
    graph.add_node("model", call_model)
    graph.add_node("review", review)
    graph.add_node("tools", ToolNode(tools(ledger)))
    graph.add_edge(START, "model")
    graph.add_conditional_edges("model", after_model, ["review", END])
    graph.add_conditional_edges("review", after_review, ["tools", "model"])
    graph.add_edge("tools", "model")
    worker = LangGraphWorker(worker_client, graph.compile(checkpointer=checkpointer))

    step = suspend(on_loop, worker, owner)
    assert step.run is not None and step.run_id is not None
    decider.approve(step.run_id, step.run["turn"]["digest"], owner)
    assert on_loop(worker.resume(step.run_id)).status == "finished"
    assert ledger.runs() == [ARGUMENTS]
    assert tool_texts(chat) == {"call_write": "updated page 12: Fresh bread daily."}


def test_a_worker_process_killed_between_release_and_results_is_restarted_and_finishes_the_run_once(
    service: Service, worker_key: str, decider: Client, ledger: Ledger, owner: int
) -> None:
    run_id = str(uuid.uuid4())
    env = example_env(service, worker_key, owner, ledger, RUN_ID=run_id, POLL_SECONDS="3600")
    worker = start_example("langgraph_worker.py", env)
    try:
        run = decider.get_run(run_id) if worker.wait_for("waits for approval") else None
        assert run is not None, "".join(worker.lines)
        edit = approve_call("call_write", EDITED)
        assert decider.decide_calls(run_id, run["turn"]["digest"], owner, [edit])["status"] == "released"
    finally:
        worker.kill()
    assert decider.get_run(run_id)["status"] == "released" and ledger.runs() == []

    finished = run_example("langgraph_worker.py", env, "resume", run_id)
    assert "The model read: Note: approval_edited (decided_by: run_owner)." in finished
    assert ledger.runs() == [EDITED]
    assert decider.get_run(run_id)["status"] == "completed"
    again = run_example("langgraph_worker.py", env, "resume", run_id)
    assert f"run {run_id} is closed" in again and ledger.runs() == [EDITED]


@pytest.mark.lease
def test_a_worker_killed_while_its_tool_runs_leaves_its_claim_to_lapse_and_the_model_reads_the_interrupted_text(
    short_lease: ShortLease, ledger: Ledger
) -> None:
    def approve(run_id: str, run: RunView, owner: int) -> object:
        return short_lease.decider.approve(run_id, run["turn"]["digest"], owner)

    run_id, output = killed_while_its_tool_runs_then_lapsed("langgraph_worker.py", short_lease, ledger, approve)
    assert f"The model read: {INTERRUPTED_TEXT}" in output
    assert ledger.runs() == [ARGUMENTS]
    assert short_lease.decider.get_run(run_id)["status"] == "completed"
