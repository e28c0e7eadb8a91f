"""A Pydantic AI worker in the loop of approval-resume (docs/design.md §16), on Pydantic AI's own scripted model
(`FunctionModel`), so it runs without a model key: the model reads page 12 (no approval), then wants to write its
meta description (a tool with `requires_approval=True`, so the run ends on `DeferredToolRequests`). The worker
registers the run and polls it; decide it in the AI Tasks module, with examples/php/ai_tasks.php, or with curl
(README, "Deciding"). On a denial the model reads the service's exact text (`ToolDenied`); on an approval, edited
arguments included (`ToolApproved(override_args=…)`), the tool runs here (it appends a line to PAGES_FILE) and the
worker posts its result. Stopped and started again, it resumes the run from the service alone: `… resume <run-id>`.
With a rule the owner remembered for the tool (docs/design.md §18: `POST /v1/rules`, or a decision with `remember:
"owner"`), the registration comes back decided and the worker goes straight on, without waiting.

    pip install "./clients/python[pydantic-ai]"      # from the root of a checkout of the repository
    APPROVAL_RESUME_URL=http://127.0.0.1:8080 APPROVAL_RESUME_KEY=ar_… python examples/python/pydantic_ai_worker.py

The key needs `runs:write`, `runs:read` and `users:write`; OWNER_UID (default 7) is upserted as a plain user.
RUN_ID picks the run's id, POLL_SECONDS how often the run is read while it waits (default 1), TOOL_SECONDS how long
the write tool takes (default 0).
"""

import asyncio
import json
import os
import sys
import uuid

from pydantic_ai import Agent, DeferredToolRequests
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from approval_resume import AsyncClient
from approval_resume.adapters import WorkerStep, wait_until_decided
from approval_resume.adapters.pydantic_ai import PydanticAIWorker

PAGES_FILE = os.environ.get("PAGES_FILE", "pages.jsonl")
#: How long the write tool takes after it wrote (default 0): a slow tool, for which the worker renews its claim.
TOOL_SECONDS = float(os.environ.get("TOOL_SECONDS", "0"))


def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """The scripted model: read, write, then an answer that repeats the last tool result it was given."""
    returns = [
        part
        for message in messages
        if isinstance(message, ModelRequest)
        for part in message.parts
        if isinstance(part, ToolReturnPart)
    ]
    if not returns:
        return ModelResponse(parts=[ToolCallPart("read_page", {"page": 12}, tool_call_id="call_read")])
    if len(returns) == 1:
        write = {"page": 12, "description": "Fresh bread daily."}
        return ModelResponse(parts=[ToolCallPart("update_page_metadata", write, tool_call_id="call_write")])
    return ModelResponse(parts=[TextPart(f"The model read: {returns[-1].model_response_str()}")])


agent = Agent(
    FunctionModel(answer),
    output_type=[str, DeferredToolRequests],
    instructions="You edit the bakery's website.",
)


@agent.tool_plain
def read_page(page: int) -> str:
    """Reads a page of the site."""
    return f"Page {page}: the bakery's opening hours."


@agent.tool_plain(requires_approval=True)
async def update_page_metadata(page: int, description: str) -> str:
    """Sets a page's meta description."""
    with open(PAGES_FILE, "a", encoding="utf-8") as pages:
        pages.write(json.dumps({"page": page, "description": description}) + "\n")
    await asyncio.sleep(TOOL_SECONDS)
    return f"updated page {page}: {description}"


async def main(arguments: list[str]) -> WorkerStep[object]:
    owner_uid = int(os.environ.get("OWNER_UID", "7"))
    poll = float(os.environ.get("POLL_SECONDS", "1"))
    async with AsyncClient(os.environ["APPROVAL_RESUME_URL"], os.environ["APPROVAL_RESUME_KEY"]) as client:
        worker: PydanticAIWorker[None] = PydanticAIWorker(client, agent)
        if arguments[:1] == ["resume"]:
            run_id = arguments[1]
        else:
            await client.put_user(
                owner_uid,
                {"username": f"user-{owner_uid}", "is_admin": False, "can_approve_others": False, "disabled": False},
            )
            run_id = os.environ.get("RUN_ID") or str(uuid.uuid4())
            step = await worker.start(owner_uid, "Write a meta description for page 12.", run_id=run_id)
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
    print(final.output if final.status == "finished" else f"run {final.run_id} is {final.status}")
