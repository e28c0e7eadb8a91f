"""An OpenAI Agents SDK worker in the loop of approval-resume (docs/design.md §16), on the SDK's own scripted test
model (`agents.testing.ScriptedModel`), so it runs without a model key: the model reads page 12 (no approval), then
wants to write its meta description (`needs_approval`). The worker registers the run and polls it; decide it in the
AI Tasks module, with examples/php/ai_tasks.php, or with curl (README, "Deciding"). On a denial the model reads the
service's exact text; on an approval the SDK runs the tool here (it appends a line to PAGES_FILE) and the worker
posts its result. Stopped and started again, it resumes the run from the service alone: `… resume <run-id>`.
With a rule the owner remembered for the tool (docs/design.md §18: `POST /v1/rules`, or a decision with `remember:
"owner"`), the registration comes back decided and the worker goes straight on, without waiting.

    pip install "./clients/python[openai-agents]"      # from the root of a checkout of the repository
    APPROVAL_RESUME_URL=http://127.0.0.1:8080 APPROVAL_RESUME_KEY=ar_… python examples/python/openai_agents_worker.py

The key needs `runs:write`, `runs:read` and `users:write`; OWNER_UID (default 7) is upserted as a plain user.
RUN_ID picks the run's id, POLL_SECONDS how often the run is read while it waits (default 1), TOOL_SECONDS how long
the write tool takes (default 0).
"""

import asyncio
import json
import os
import sys
import uuid

from agents import Agent, RunConfig, function_tool
from agents.testing import ModelCall, ModelStep, ScriptedModel, assistant_message, function_call

from approval_resume import AsyncClient
from approval_resume.adapters import WorkerStep, wait_until_decided
from approval_resume.adapters.openai_agents import OpenAIAgentsWorker

PAGES_FILE = os.environ.get("PAGES_FILE", "pages.jsonl")
#: How long the write tool takes after it wrote (default 0): a slow tool, for which the worker renews its claim.
TOOL_SECONDS = float(os.environ.get("TOOL_SECONDS", "0"))


@function_tool
def read_page(page: int) -> str:
    """Reads a page of the site."""
    return f"Page {page}: the bakery's opening hours."


@function_tool(needs_approval=True)
async def update_page_metadata(page: int, description: str) -> str:
    """Sets a page's meta description."""
    with open(PAGES_FILE, "a", encoding="utf-8") as pages:
        pages.write(json.dumps({"page": page, "description": description}) + "\n")
    await asyncio.sleep(TOOL_SECONDS)
    return f"updated page {page}"


def answer(call: ModelCall) -> ModelStep:
    """The scripted model: read, write, then an answer that repeats the last tool result it was given."""
    outputs = [item for item in call.input if isinstance(item, dict) and item.get("type") == "function_call_output"]
    if not outputs:
        return ModelStep(output=[function_call("read_page", {"page": 12}, call_id="call_read")])
    if len(outputs) == 1:
        write = {"page": 12, "description": "Fresh bread daily."}
        return ModelStep(output=[function_call("update_page_metadata", write, call_id="call_write")])
    return ModelStep(output=[assistant_message(f"The model read: {outputs[-1]['output']}")])


def agent() -> Agent[None]:
    model = ScriptedModel([ModelStep.respond(answer) for _ in range(20)])
    return Agent(
        name="editor",
        instructions="You edit the bakery's website.",
        tools=[read_page, update_page_metadata],
        model=model,
    )


async def main(arguments: list[str]) -> WorkerStep[object]:
    owner_uid = int(os.environ.get("OWNER_UID", "7"))
    poll = float(os.environ.get("POLL_SECONDS", "1"))
    async with AsyncClient(os.environ["APPROVAL_RESUME_URL"], os.environ["APPROVAL_RESUME_KEY"]) as client:
        worker = OpenAIAgentsWorker(client, agent(), run_config=RunConfig(tracing_disabled=True))
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
