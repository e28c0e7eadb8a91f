"""Calls the worker runs (docs/design.md §15) through the package, against the real binary: an approval releases a
worker tool's call, the worker claims it and posts its result with `post_results` (sync and async), a repeat is
answered as the first, another result is refused, and the audit records the worker's result."""

import asyncio
import json
import uuid

import pytest
from conftest import Service, new_run_id

from approval_resume import ApiError, AsyncClient, Client, approve_call, deny_call
from approval_resume.models import ChatMessage, PostedResult, PutUser, RunView

WORKER_TOOL = "save_page"
ARGUMENTS = '{"page": 12, "description": "Fresh bread daily."}'


def new_owner(api: Client) -> int:
    uid = uuid.uuid4().int % 1_000_000_000 + 1000
    user: PutUser = {"username": f"owner-{uid}", "is_admin": False, "can_approve_others": False, "disabled": False}
    api.put_user(uid, user)
    return uid


def transcript(*call_ids: str) -> list[ChatMessage]:
    return [
        {"role": "user", "content": "Describe page 12."},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": call_id, "type": "function", "function": {"name": WORKER_TOOL, "arguments": ARGUMENTS}}
                for call_id in call_ids
            ],
        },
    ]


def register(api: Client, owner: int, *call_ids: str, editable: bool = True) -> RunView:
    return api.register_run(
        {
            "id": new_run_id(),
            "owner_uid": owner,
            "messages": transcript(*(call_ids or ("call_1",))),
            "tools": [{"name": WORKER_TOOL, "effect": "write", "executor": "worker", "editable": editable}],
            "privacy_level": "full",
        }
    )


def test_an_approval_releases_the_call_and_its_posted_result_resumes_the_run_once(api: Client) -> None:
    owner = new_owner(api)
    run = register(api, owner)
    assert run["turn"]["pending_calls"][0]["executor"] == "worker"
    answer = api.approve(run["id"], run["turn"]["digest"], owner)
    assert answer["status"] == "released" and "model_input" not in answer
    assert answer["released_calls"] == [
        {"call_id": "call_1", "tool": WORKER_TOOL, "arguments": ARGUMENTS, "edited": False}
    ]
    view = api.get_run(run["id"])
    assert view["status"] == "released" and view["released_calls"][0]["call_id"] == "call_1"
    with pytest.raises(ApiError) as pending:
        api.get_model_input(run["id"])
    assert (pending.value.status, pending.value.code) == (409, "results_pending")

    result: PostedResult = {"call_id": "call_1", "content": "saved page 12", "is_error": False}
    claim_id = api.claim(run["id"])["claim_id"]
    resumed = api.post_results(run["id"], claim_id, [result])
    assert resumed["status"] == "resumed"
    assert resumed["released_calls"][0]["result"] == {"content": "saved page 12", "is_error": False}
    assert api.post_results(run["id"], claim_id, [result]) == resumed
    with pytest.raises(ApiError) as conflict:
        api.post_results(run["id"], claim_id, [{**result, "content": "saved it twice"}])
    assert (conflict.value.status, conflict.value.code) == (409, "result_conflict")

    model_input = api.get_model_input(run["id"], format="openai-chat")
    assert model_input["format"] == "openai-chat"
    assert model_input["messages"][-1] == {"role": "tool", "tool_call_id": "call_1", "content": "saved page 12"}
    (event,) = api.list_events(run["id"])["tool_events"]
    assert (event["outcome"], event["result"], event["privacy_level"]) == ("ok", "saved page 12", "full")


def test_an_edited_release_runs_the_edit_and_the_model_reads_the_note_before_the_workers_content(
    api: Client,
) -> None:
    owner = new_owner(api)
    run = register(api, owner, "call_1", "call_2")
    edited = {"page": 12, "description": "Rye on Sundays."}
    answer = api.decide_calls(
        run["id"], run["turn"]["digest"], owner, [approve_call("call_1", edited), deny_call("call_2")]
    )
    (released,) = answer["released_calls"]
    assert released["edited"] is True and json.loads(released["arguments"]) == edited
    assert [result["call_id"] for result in answer["results"]] == ["call_2"]

    claim_id = api.claim(run["id"])["claim_id"]
    view = api.post_results(run["id"], claim_id, [{"call_id": "call_1", "content": "saved", "is_error": True}])
    assert view["status"] == "resumed"
    model_input = api.get_model_input(run["id"], format="openai-chat")
    assert model_input["format"] == "openai-chat"
    first, second = model_input["messages"][-2:]
    assert first["content"].startswith("Note: approval_edited (decided_by: run_owner).")
    assert first["content"].endswith("\n\nsaved")
    assert second["content"].startswith("Error: approval_denied (decided_by: run_owner).")
    outcomes = {event["call_id"]: event["outcome"] for event in api.list_events(run["id"])["tool_events"]}
    assert outcomes == {"call_1": "failed", "call_2": "denied"}


def test_a_tool_that_is_not_editable_refuses_an_edit_and_a_run_not_released_takes_no_claim(api: Client) -> None:
    owner = new_owner(api)
    run = register(api, owner, editable=False)
    with pytest.raises(ApiError) as refused:
        api.decide_calls(run["id"], run["turn"]["digest"], owner, [approve_call("call_1", {"page": 13})])
    assert (refused.value.status, refused.value.code) == (422, "not_editable")
    with pytest.raises(ApiError) as early:
        api.claim(run["id"])
    assert (early.value.status, early.value.code) == (409, "not_released")


def test_the_async_client_posts_results_as_the_sync_one_does(service: Service, api: Client) -> None:
    owner = new_owner(api)
    run = register(api, owner)
    api.approve(run["id"], run["turn"]["digest"], owner)
    key = service.add_key(f"python-async-{uuid.uuid4().hex[:8]}", ["runs:write", "runs:read"])

    async def post() -> RunView:
        async with AsyncClient(service.base_url, key) as client:
            claim_id = (await client.claim(run["id"]))["claim_id"]
            return await client.post_results(
                run["id"], claim_id, [{"call_id": "call_1", "content": "ok", "is_error": False}]
            )

    assert asyncio.run(post())["status"] == "resumed"
