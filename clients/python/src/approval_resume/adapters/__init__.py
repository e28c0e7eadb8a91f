"""Adapters that plug approval-resume into agent frameworks' own loops (docs/design.md §15, §16).

- `approval_resume.adapters.openai_agents`: `OpenAIAgentsWorker`, the OpenAI Agents SDK (`openai-agents`):
  interruptions become a run in `openai-responses` with the SDK's `RunState` JSON as `worker_state`; released calls
  are approved and run by the SDK, denied ones rejected with the service's exact text.
  `pip install "approval-resume[openai-agents]"`.
- `approval_resume.adapters.pydantic_ai`: `PydanticAIWorker`, Pydantic AI deferred tools (`pydantic-ai-slim`):
  `DeferredToolRequests` become a run in `openai-chat` with the agent's messages as `worker_state`; verdicts come
  back as `DeferredToolResults` (`ToolApproved(override_args=…)` for edits, `ToolDenied(message=<exact text>)`).
  `pip install "approval-resume[pydantic-ai]"`.

Both are built on `AsyncClient` and the shared steps of `_service` (register, wait for the decision, read the
verdicts and exact texts, post the released calls' results); each imports its framework only when imported itself,
so the base package never does. A worker keeps nothing between calls: `resume(run_id)` continues a run in any
process from the service alone, and runs no released call whose result was posted. A released tool that raises is
posted failed (the service's `Error: tool "{name}" failed.`, `is_error: true`) rather than left to run again. A
worker that dies after a tool ran and before its result was posted runs that call again;
`idempotency_key(run_id, call_id)` names the call for a tool that can make its effect idempotent.
"""

from ._service import WorkerStep, idempotency_key, wait_until_decided

__all__ = ["WorkerStep", "idempotency_key", "wait_until_decided"]
