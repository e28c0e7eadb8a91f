"""A LangGraph / LangChain worker in the loop of approval-resume (docs/design.md §16), on LangChain's own fake chat
model (`GenericFakeChatModel`), so it runs without a model key: an agent of `langchain.agents.create_agent` whose model
reads page 12 (no approval), then wants to write its meta description, which the `HumanInTheLoopMiddleware` stops
for. The worker registers the run (the thread id as its worker state; the thread itself in a SQLite checkpointer,
CHECKPOINTS, so another process resumes it) and polls it; decide it in the AI Tasks module, with
examples/php/ai_tasks.php, or with curl (README, "Deciding"). On a denial the model reads the service's exact text;
on an approval, edited arguments included, the tool runs here (it appends a line to PAGES_FILE) and the worker posts
its result. Stopped and started again, it resumes the run from the service and the checkpointer: `… resume <run-id>`.
With a rule the owner remembered for the tool (docs/design.md §18: `POST /v1/rules`, or a decision with `remember:
"owner"`), the registration comes back decided and the worker goes straight on, without waiting.

    pip install "./clients/python[langgraph]" langgraph-checkpoint-sqlite   # from the root of a checkout
    APPROVAL_RESUME_URL=http://127.0.0.1:8080 APPROVAL_RESUME_KEY=ar_… python examples/python/langgraph_worker.py

The key needs `runs:write`, `runs:read` and `users:write`; OWNER_UID (default 7) is upserted as a plain user.
RUN_ID picks the run's id, POLL_SECONDS how often the run is read while it waits (default 1), TOOL_SECONDS how long
the write tool takes (default 0), CHECKPOINTS the SQLite file of the threads (default checkpoints.sqlite).
"""

import asyncio
import json
import os
import sys
import uuid
from collections.abc import Sequence
from typing import Any

from langchain.agents import create_agent
from langchain.agents.middleware import HumanInTheLoopMiddleware
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

from approval_resume import AsyncClient
from approval_resume.adapters import WorkerStep, wait_until_decided
from approval_resume.adapters.langgraph import LangGraphWorker

PAGES_FILE = os.environ.get("PAGES_FILE", "pages.jsonl")
#: How long the write tool takes after it wrote (default 0): a slow tool, for which the worker renews its claim.
TOOL_SECONDS = float(os.environ.get("TOOL_SECONDS", "0"))
CHECKPOINTS = os.environ.get("CHECKPOINTS", "checkpoints.sqlite")


@tool
def read_page(page: int) -> str:
    """Reads a page of the site."""
    return f"Page {page}: the bakery's opening hours."


@tool
async def update_page_metadata(page: int, description: str) -> str:
    """Sets a page's meta description."""
    with open(PAGES_FILE, "a", encoding="utf-8") as pages:
        pages.write(json.dumps({"page": page, "description": description}) + "\n")
    await asyncio.sleep(TOOL_SECONDS)
    return f"updated page {page}: {description}"


class ScriptedChat(GenericFakeChatModel):
    """The scripted model: read, write, then an answer that repeats the last tool result it was given. (The fake has no
    `bind_tools`; its answers are scripted, so it takes the tools and ignores them.)"""

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> "ScriptedChat":
        return self

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        results = [message for message in messages if isinstance(message, ToolMessage)]
        if not results:
            calls = [{"name": "read_page", "args": {"page": 12}, "id": "call_read"}]
            answer = AIMessage(content="", tool_calls=calls)
        elif len(results) == 1:
            write = {"page": 12, "description": "Fresh bread daily."}
            calls = [{"name": "update_page_metadata", "args": write, "id": "call_write"}]
            answer = AIMessage(content="", tool_calls=calls)
        else:
            answer = AIMessage(content=f"The model read: {results[-1].content}")
        return ChatResult(generations=[ChatGeneration(message=answer)])


async def main(arguments: list[str]) -> WorkerStep[Any]:
    owner_uid = int(os.environ.get("OWNER_UID", "7"))
    poll = float(os.environ.get("POLL_SECONDS", "1"))
    async with (
        AsyncClient(os.environ["APPROVAL_RESUME_URL"], os.environ["APPROVAL_RESUME_KEY"]) as client,
        AsyncSqliteSaver.from_conn_string(CHECKPOINTS) as checkpointer,
    ):
        graph = create_agent(
            ScriptedChat(messages=iter(())),
            [read_page, update_page_metadata],
            system_prompt="You edit the bakery's website.",
            middleware=[HumanInTheLoopMiddleware(interrupt_on={"update_page_metadata": True})],
            checkpointer=checkpointer,
        )
        worker = LangGraphWorker(client, graph, effects={"read_page": "read"})
        if arguments[:1] == ["resume"]:
            run_id = arguments[1]
        else:
            await client.put_user(
                owner_uid,
                {"username": f"user-{owner_uid}", "is_admin": False, "can_approve_others": False, "disabled": False},
            )
            run_id = os.environ.get("RUN_ID") or str(uuid.uuid4())
            prompt = {"messages": [{"role": "user", "content": "Write a meta description for page 12."}]}
            step = await worker.start(owner_uid, prompt, run_id=run_id)
            # `suspended`: the turn waits for a person. A turn that rules remembered by a person decided at its
            # registration (docs/design.md §18) did not wait: `start` went straight on with it, as `resume` does.
            if step.status in ("finished", "closed", "claimed"):
                return step
            if step.status == "suspended":
                print(f"run {run_id} waits for approval", flush=True)
        while True:
            await wait_until_decided(client, run_id, poll_interval=poll)
            step = await worker.resume(run_id)
            print(f"run {run_id}: {step.status}", flush=True)
            if step.status in ("finished", "closed", "claimed"):
                return step
            if step.status == "waiting":
                await asyncio.sleep(poll)
            # `suspended` waits for the next decision; `decided` (a turn decided at its registration, past the
            # worker's `max_decided_turns`) is decided already, and the next `resume` goes on at once.


if __name__ == "__main__":
    final = asyncio.run(main(sys.argv[1:]))
    # `claimed`: another worker has the run (its claim is live, or this worker's lapsed); this one ran nothing of it.
    if final.status == "finished" and final.output is not None:
        print(final.output["messages"][-1].content)
    else:
        print(f"run {final.run_id} is {final.status}")
