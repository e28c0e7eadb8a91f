"""The package against the real binary: users, registration, the inbox, decisions (deny, approve through the
loopback executor, per call with an edit), the model input, turns, cancel and complete, audit events, errors."""

import asyncio
import json
import uuid

import httpx
import pytest
from conftest import REPO, TOOL, Service, chat_transcript, new_run_id

from approval_resume import ApiError, AsyncClient, Client, approve_call, deny_call
from approval_resume.models import PutUser, RegisterRun, RunView

ARGUMENTS = '{"page": 12, "description": "Fresh bread daily."}'
WHO_OWNER = "by the user who started this run, the person you are talking to"
WHO_OTHER = "by another backend user, not the person you are talking to"


def user(name: str, *, is_admin: bool = False, can_approve_others: bool = False) -> PutUser:
    return {"username": name, "is_admin": is_admin, "can_approve_others": can_approve_others, "disabled": False}


def new_owner(api: Client) -> int:
    """A backend user of its own for each test, so inbox listings see only that test's runs."""
    uid = uuid.uuid4().int % 1_000_000_000 + 1000
    api.put_user(uid, user(f"owner-{uid}"))
    return uid


def register(api: Client, owner: int, *calls: tuple[str, str], **members: object) -> RunView:
    body: RegisterRun = {
        "id": new_run_id(),
        "owner_uid": owner,
        "messages": chat_transcript(*(calls or (("call_1", ARGUMENTS),))),
        "tools": [{"name": TOOL, "effect": "write"}],
        **members,  # type: ignore[typeddict-item]
    }
    return api.register_run(body)


@pytest.fixture(scope="module")
def approver(api: Client) -> int:
    api.put_user(3, user("grace", can_approve_others=True))
    return 3


def test_a_user_is_upserted_and_answered_as_stored(api: Client) -> None:
    first = api.put_user(41, user("linus"))
    assert (first["uid"], first["username"], first["approvable_tools"]) == (41, "linus", None)
    second = api.put_user(41, {**user("linus", is_admin=True), "approvable_tools": [TOOL]})
    assert (second["is_admin"], second["approvable_tools"], second["created_at"]) == (True, [TOOL], first["created_at"])


def test_a_worker_state_comes_back_only_when_asked_for_and_a_new_turn_replaces_it(api: Client) -> None:
    owner = new_owner(api)
    state = {"agent": "editor", "step": 3, "nested": {"items": [1.5, None, "é"]}}
    run = register(api, owner, worker_state=state)
    assert "worker_state" not in run and "worker_state" not in api.get_run(run["id"])
    assert api.get_run(run["id"], include_worker_state=True)["worker_state"] == state

    api.deny(run["id"], run["turn"]["digest"], owner)
    next_turn = chat_transcript(("call_2", ARGUMENTS))[-1:]
    api.append_turn(run["id"], {"messages": next_turn, "worker_state": {"step": 4}})
    assert api.get_run(run["id"], include_worker_state=True)["worker_state"] == {"step": 4}


def test_a_registration_with_every_member_is_the_run_and_the_same_body_again_the_same_run(api: Client) -> None:
    owner = new_owner(api)
    body: RegisterRun = {
        "id": new_run_id(),
        "owner_uid": owner,
        "messages": chat_transcript(("call_1", ARGUMENTS)),
        "tools": [{"name": TOOL, "effect": "write"}, {"name": "search_pages", "effect": "read"}],
        "privacy_level": "redacted",
        "require_second_approver": True,
        "approval_ttl_secs": 3600,
        "format": "openai-chat",
    }
    run = api.register_run(body)
    assert (run["id"], run["owner_uid"], run["status"]) == (body["id"], owner, "waiting_for_approval")
    assert run["format"] == "openai-chat"
    assert (run["privacy_level"], run["require_second_approver"]) == ("redacted", True)
    assert run["expires_at"] is not None and "decision" not in run
    [call] = run["turn"]["pending_calls"]
    assert (call["id"], call["name"], call["arguments"], call["effect"]) == ("call_1", TOOL, ARGUMENTS, "write")
    assert api.register_run(body) == run
    assert api.get_run(run["id"]) == run

    with pytest.raises(ApiError) as refused:
        api.register_run({**body, "require_second_approver": False})
    error = refused.value
    assert (error.status, error.code, error.title) == (409, "run_exists", "Conflict"), error
    assert error.request_id and error.detail and error.retry_after is None


# An Anthropic transcript as a provider's SDK sent it: a thinking block with its signature, and a number written
# `1.50`, which Python's json would read back as 1.5 and write as `1.5`. The service keeps the text as sent (§14).
NATIVE_USER = '{"role": "user", "content": "Set the price of bread to 1.50."}'
NATIVE_ASSISTANT = (
    '{"role":"assistant","content":[{"type":"thinking","thinking":"The price first.","signature":"c2lnbmF0dXJl"},'
    f'{{"type":"tool_use","id":"toolu_01","name":"{TOOL}","input":{{"page":12,"price":1.50}}}}]}}'
)


def test_a_native_anthropic_run_comes_back_in_its_model_input_byte_for_byte(api: Client, service: Service) -> None:
    owner = new_owner(api)
    run_id = new_run_id()
    key = service.add_key(f"python-raw-{uuid.uuid4().hex[:12]}", ["runs:write", "runs:read"])
    raw = httpx.Client(base_url=service.base_url, headers={"authorization": f"Bearer {key}"})
    with raw:
        # Sent as text, not through the client: its json encoder would write `1.5`.
        body = (
            f'{{"id":"{run_id}","owner_uid":{owner},"format":"anthropic","system":"Be brief.",'
            f'"messages":[{NATIVE_USER},{NATIVE_ASSISTANT}],"tools":[{{"name":"{TOOL}","effect":"write"}}]}}'
        )
        registered = raw.post("/v1/runs", content=body, headers={"content-type": "application/json"})
        assert registered.status_code == 201, registered.text
        run = api.get_run(run_id)
        assert (run["format"], run["status"]) == ("anthropic", "waiting_for_approval")
        [call] = run["turn"]["pending_calls"]
        assert (call["id"], call["name"], json.loads(call["arguments"])) == ("toolu_01", TOOL, {"page": 12, "price": 1.5})

        answer = api.deny(run_id, run["turn"]["digest"], owner)
        assert answer["format"] == "anthropic" and "model_input" in answer
        assert answer["model_input"]["format"] == "anthropic", "the run's own format when none is asked for"
        text = raw.get(f"/v1/runs/{run_id}/model-input").text
    # Each registered message, byte for byte and in order, then the result the service added.
    user_at, assistant_at = text.find(NATIVE_USER), text.find(NATIVE_ASSISTANT)
    assert 0 < user_at < assistant_at, text
    model_input = json.loads(text)
    assert (model_input["format"], model_input["system"], len(model_input["messages"])) == ("anthropic", "Be brief.", 3)
    [result] = model_input["messages"][2]["content"]
    assert (result["type"], result["tool_use_id"], result["is_error"]) == ("tool_result", "toolu_01", True)
    with pytest.raises(ApiError) as refused:
        api.get_model_input(run_id, format="openai-chat")
    assert (refused.value.status, refused.value.code) == (422, "format_not_representable")


def test_the_inbox_pages_through_every_run_an_approver_may_decide(api: Client, approver: int) -> None:
    owner = new_owner(api)
    runs = [register(api, owner) for _ in range(3)]
    first = api.list_approvals(approver, owner_uid=owner, limit=2)
    assert len(first["items"]) == 2 and first["next_cursor"] is not None
    second = api.list_approvals(approver, owner_uid=owner, limit=2, cursor=first["next_cursor"])
    assert len(second["items"]) == 1 and second["next_cursor"] is None
    listed = [item["run_id"] for item in api.iter_approvals(approver, owner_uid=owner, limit=1)]
    assert listed == [item["run_id"] for item in first["items"] + second["items"]]
    assert sorted(listed) == sorted(run["id"] for run in runs)
    [call] = first["items"][0]["turn"]["pending_calls"]
    assert (call["name"], call["effect"], call["approvable"]) == (TOOL, "write", True)


def test_an_approver_denies_from_the_inbox_and_the_model_reads_that_another_user_declined(
    api: Client, approver: int
) -> None:
    owner = new_owner(api)
    run = register(api, owner, privacy_level="full")
    [item] = api.list_approvals(approver, owner_uid=owner)["items"]
    assert (item["run_id"], item["turn"]["digest"]) == (run["id"], run["turn"]["digest"])

    answer = api.deny(item["run_id"], item["turn"]["digest"], approver)
    [result] = answer["results"]
    expected = (
        f'Error: approval_denied (decided_by: other_user). The approval for tool "{TOOL}" was declined {WHO_OTHER}.'
        " Nothing was executed. Tell the user that another backend user declined the approval; do not describe it"
        " as a system error."
    )
    assert (result["outcome"], result["is_error"], result["content"]) == ("denied", True, expected)
    assert answer["status"] == "resumed"
    assert (answer["decision"]["approved"], answer["decision"]["decided_by"]) == (False, "other_user")
    model_input = answer["model_input"]
    assert model_input["format"] == "openai-chat"
    assert model_input["messages"][-1] == {"role": "tool", "tool_call_id": "call_1", "content": expected}
    assert api.list_approvals(approver, owner_uid=owner)["items"] == []

    events = api.list_events(run["id"])
    [approval] = events["approval_events"]
    assert (approval["approved"], approval["decider_uid"], approval["decided_by"]) == (False, approver, "other_user")
    [tool_event] = events["tool_events"]
    assert (tool_event["outcome"], tool_event["arguments"], tool_event["result"]) == ("denied", ARGUMENTS, expected)


def test_the_owner_denies_with_a_reason_and_the_text_says_they_declined_this_version_themselves(api: Client) -> None:
    owner = new_owner(api)
    run = register(api, owner)
    answer = api.deny(run["id"], run["turn"]["digest"], owner, "variant")
    [result] = answer["results"]
    assert result["content"] == (
        f'Error: approval_denied (decided_by: run_owner, reason: variant). The approval for tool "{TOOL}" was'
        f" declined {WHO_OWNER}. Nothing was executed. Tell them that they declined this version themselves, not"
        " the system or an operator, and propose a different version of this change."
    )
    # The same decision again is answered the same; another one on the decided turn is refused.
    assert api.deny(run["id"], run["turn"]["digest"], owner, "variant") == answer
    with pytest.raises(ApiError) as refused:
        api.approve(run["id"], run["turn"]["digest"], owner)
    assert (refused.value.status, refused.value.code) == (409, "already_decided")


def test_an_approval_runs_the_call_once_through_the_loopback_executor(api: Client, service: Service) -> None:
    owner = new_owner(api)
    run = register(api, owner)
    answer = api.approve(run["id"], run["turn"]["digest"], owner, format="anthropic")
    [result] = answer["results"]
    content = f"{TOOL} ran for user {owner} with " + json.dumps(json.loads(ARGUMENTS), sort_keys=True)
    assert (result["outcome"], result["is_error"], result["content"], result["edited"]) == ("ok", False, content, False)
    model_input = answer["model_input"]
    assert model_input["format"] == "anthropic"
    assert model_input["messages"][-1]["content"] == [
        {"type": "tool_result", "tool_use_id": "call_1", "content": content, "is_error": False}
    ]
    # A replay of the decision answers the recorded outcome and sends nothing again.
    assert api.approve(run["id"], run["turn"]["digest"], owner, format="anthropic") == answer
    sent = [request for request in service.executor.requests if request[1]["idempotency-key"] == f"{run['id']}:call_1"]
    assert len(sent) == 1, sent
    path, headers, body = sent[0]
    assert path == f"/tools/{TOOL}" and json.loads(body)["arguments"] == json.loads(ARGUMENTS)


def test_a_verdict_per_call_runs_the_edited_arguments_and_denies_the_other(api: Client, service: Service) -> None:
    owner = new_owner(api)
    run = register(api, owner, ("call_a", ARGUMENTS), ("call_b", '{"page": 13}'))
    edited = '{"page": 12, "description": "Bread, baked daily."}'
    answer = api.decide_calls(
        run["id"],
        run["turn"]["digest"],
        owner,
        [deny_call("call_b", reason="skip"), approve_call("call_a", arguments=edited)],
    )
    assert answer["decision"]["approved"] is None
    assert [(c["call_id"], c["approved"], c["reason"], c["edited"]) for c in answer["decision"]["calls"]] == [
        ("call_a", True, None, True),
        ("call_b", False, "skip", False),
    ]
    ran, denied = answer["results"]
    note = (
        "Note: approval_edited (decided_by: run_owner). The arguments of this call were changed before it was"
        f" approved, {WHO_OWNER}; it ran with these arguments instead of the ones you proposed: {edited}"
    )
    executed = f"{TOOL} ran for user {owner} with " + json.dumps(json.loads(edited), sort_keys=True)
    assert (ran["outcome"], ran["edited"], ran["content"]) == ("ok", True, f"{note}\n\n{executed}")
    assert (denied["outcome"], denied["content"].split(".")[0]) == (
        "denied",
        "Error: approval_denied (decided_by: run_owner, reason: skip)",
    )
    [request] = [r for r in service.executor.requests if r[1]["idempotency-key"].startswith(run["id"])]
    assert json.loads(request[2])["arguments"] == json.loads(edited)


def test_the_model_input_is_answered_in_each_format_with_the_same_results(api: Client) -> None:
    owner = new_owner(api)
    run = register(api, owner)
    answer = api.deny(run["id"], run["turn"]["digest"], owner)
    content = answer["results"][0]["content"]
    chat = api.get_model_input(run["id"])
    assert chat == answer["model_input"] and chat["format"] == "openai-chat"
    anthropic = api.get_model_input(run["id"], format="anthropic")
    assert anthropic["format"] == "anthropic" and anthropic["system"] == "You edit the bakery's website."
    assert anthropic["messages"][-1]["content"][0]["content"] == content
    responses = api.get_model_input(run["id"], format="openai-responses")
    assert responses["format"] == "openai-responses"
    assert responses["input"][-1] == {"type": "function_call_output", "call_id": "call_1", "output": content}


def test_a_resumed_run_takes_its_next_turn_and_completes_and_another_is_cancelled(api: Client) -> None:
    owner = new_owner(api)
    run = register(api, owner)
    api.deny(run["id"], run["turn"]["digest"], owner)
    with pytest.raises(ApiError) as early:
        api.complete_run(register(api, owner)["id"])
    assert (early.value.status, early.value.code) == (409, "not_resumed")
    next_turn = chat_transcript(("call_2", '{"page": 12, "description": "Bread."}'))[1:]
    waiting = api.append_turn(run["id"], {"messages": next_turn})
    assert (waiting["status"], waiting["turn"]["index"]) == ("waiting_for_approval", 1)
    assert waiting["turn"]["digest"] != run["turn"]["digest"]
    assert api.append_turn(run["id"], {"messages": next_turn}) == waiting
    api.deny(run["id"], waiting["turn"]["digest"], owner)
    assert api.complete_run(run["id"])["status"] == "completed"
    assert api.complete_run(run["id"])["status"] == "completed"

    other = register(api, owner)
    assert api.cancel_run(other["id"])["status"] == "cancelled"
    with pytest.raises(ApiError) as late:
        api.deny(other["id"], other["turn"]["digest"], owner)
    assert (late.value.status, late.value.code) == (409, "not_awaiting_approval")


def test_every_error_answer_is_one_api_error_with_the_problem_s_members(api: Client, service: Service) -> None:
    with service.client(["runs:read"]) as reader, pytest.raises(ApiError) as forbidden:
        reader.put_user(5, user("eve"))
    error = forbidden.value
    assert (error.status, error.code) == (403, "missing_scope") and "users:write" in error.detail
    assert error.problem is not None and error.problem["type"] == "urn:approval-resume:problem:missing_scope"
    assert error.request_id == error.problem["request_id"]

    with pytest.raises(ApiError) as missing:
        api.get_run(new_run_id())
    assert (missing.value.status, missing.value.code) == (404, "not_found")

    with pytest.raises(ApiError) as invalid:
        api.register_run({"id": new_run_id(), "owner_uid": 1, "messages": [], "surprise": 1})  # type: ignore[typeddict-unknown-key]
    assert (invalid.value.status, invalid.value.code) == (422, "invalid_body")

    with Client(service.base_url, "ar_not_a_key") as stranger, pytest.raises(ApiError) as unknown:
        stranger.get_run(new_run_id())
    assert (unknown.value.status, unknown.value.code) == (401, "unauthorized")


def test_the_ops_endpoints_answer_through_the_client(api: Client) -> None:
    assert api.healthz() == {"status": "ok"}
    assert api.readyz() == {"status": "ready"}
    assert "http_requests_total" in api.metrics()
    assert "approval-card" in api.get_approval_card()
    assert api.get_openapi() == (REPO / "openapi.yaml").read_text()


def test_the_async_client_registers_reads_and_denies_a_run(service: Service, api: Client) -> None:
    owner = new_owner(api)
    key = service.add_key(f"async-{uuid.uuid4().hex[:8]}", ["runs:write", "runs:read", "decisions:write"])

    async def walk() -> None:
        async with AsyncClient(service.base_url, key) as client:
            run = await client.register_run(
                {"id": new_run_id(), "owner_uid": owner, "messages": chat_transcript(("call_1", ARGUMENTS))}
            )
            assert (await client.get_run(run["id"]))["turn"] == run["turn"]
            answer = await client.deny(run["id"], run["turn"]["digest"], owner)
            assert answer["results"][0]["content"].startswith("Error: approval_denied (decided_by: run_owner).")
            assert await client.get_model_input(run["id"]) == answer["model_input"]

    asyncio.run(walk())

