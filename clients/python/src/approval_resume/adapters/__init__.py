"""Adapters that plug approval-resume into agent frameworks' own loops (docs/design.md §15, §16).

- `approval_resume.adapters.openai_agents`: `OpenAIAgentsWorker`, the OpenAI Agents SDK (`openai-agents`):
  interruptions become a run in `openai-responses` with the SDK's `RunState` JSON as `worker_state`; released calls
  are approved and run by the SDK (edited ones with the decider's arguments, handed to the tool by the adapter's
  wrapper), denied ones rejected with the service's exact text.
  `pip install "<checkout>/clients/python[openai-agents]"`.
- `approval_resume.adapters.pydantic_ai`: `PydanticAIWorker`, Pydantic AI deferred tools (`pydantic-ai-slim`):
  `DeferredToolRequests` become a run in `openai-chat` with the agent's messages as `worker_state`; verdicts come
  back as `DeferredToolResults` (`ToolApproved(override_args=…)` for edits, `ToolDenied(message=<exact text>)`).
  `pip install "<checkout>/clients/python[pydantic-ai]"`.
- `approval_resume.adapters.langgraph`: `LangGraphWorker`, LangGraph / LangChain (`langgraph`, `langchain`): an
  interrupt of the `HumanInTheLoopMiddleware` (or a plain `interrupt()` carrying tool calls) becomes a run in
  `openai-chat` with the thread id as `worker_state`; verdicts come back as the middleware's decisions through
  `Command(resume=…)` (approve, edit, reject with the exact text). `pip install "<checkout>/clients/python[langgraph]"`.

No package named approval-resume is published: `<checkout>` is a checkout of the repository.

All are built on `AsyncClient` and the shared steps of `_service` (register, wait for the decision, claim the
released calls and renew the claim while they run, read the verdicts and exact texts, post the released calls'
results under the claim); each imports its framework only when imported itself, so the base package never does. A
worker keeps nothing between calls: `resume(run_id)` continues a run in any process from the service alone, and runs
no released call whose result was posted; refused the claim, it runs nothing and answers `claimed` (another worker
has the run). A released tool that raises is posted failed (the service's `Error: tool "{name}" failed.`,
`is_error: true`) rather than left to run again. A worker that dies while a tool runs leaves its claim to lapse: the
service gives the call the `interrupted` result and no worker runs it again. `idempotency_key(run_id, call_id)`
names the call for a tool that passes it on to what it changes.

A registration or an appended turn that comes back decided (remembered decisions, docs/design.md §18: every call
covered by live rules of one author, the run answered `released` or `resumed`) is gone on with at once, as `resume`
would, and again for each new turn decided so, up to the worker's `max_decided_turns` in one call (`_straight_on`);
`start` and `resume` answer `suspended` only for a turn that waits for a person.
"""

from ._service import WorkerStep, idempotency_key, wait_until_decided

__all__ = ["WorkerStep", "idempotency_key", "wait_until_decided"]
