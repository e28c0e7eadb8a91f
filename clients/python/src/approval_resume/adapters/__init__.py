"""Adapters that plug approval-resume into agent frameworks' own loops (docs/design.md §16).

Reserved for `approval_resume.adapters.openai_agents` (the OpenAI Agents SDK) and
`approval_resume.adapters.pydantic_ai` (Pydantic AI deferred tools). They need the calls the worker runs itself
(docs/design.md §15: `executor: "worker"`, the `released` state, `POST /v1/runs/{id}/results`, `worker_state`), which
the service does not have yet; each will be a module here built on `AsyncClient`, with its framework as an
optional dependency (`pip install "approval-resume[openai-agents]"`), so the base package never imports one.
"""
