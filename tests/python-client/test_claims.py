"""Claims (docs/design.md §15) through the package. What the client sends and how it reads the service's refusals,
from an httpx mock transport (the answers of the contract, word for word); then the real binary: one claim at a time,
results only under it, a renewal by the claimant."""

import asyncio
import json
from typing import Any

import httpx
import pytest
from conftest import Service
from test_worker_calls import new_owner, register

from approval_resume import (
    ApiError,
    AsyncClient,
    ClaimedError,
    ClaimLapsedError,
    ClaimRequiredError,
    Client,
    RetryPolicy,
)
from approval_resume.models import Claim

RUN_ID = "0b0e9f1e-6a56-4c2b-9a43-3f1f4c1d2a01"
UNTIL = "2026-12-07T01:05:00.123456Z"
CLAIM: Claim = {"claim_id": "6f1c1f0e-2b7a-4c55-9d0e-0a4f5b1c2d3e", "until": UNTIL, "released_calls": []}


def problem(code: str, **more: Any) -> httpx.Response:
    body = {"type": f"urn:approval-resume:problem:{code}", "title": "Conflict", "status": 409, "detail": code}
    return httpx.Response(
        409, json={**body, "code": code, **more}, headers={"content-type": "application/problem+json"}
    )


def mock(answers: list[httpx.Response], seen: list[httpx.Request]) -> Client:
    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return answers.pop(0)

    http = httpx.Client(transport=httpx.MockTransport(handle))
    return Client("http://service.invalid", "ar_key", http=http, retry=RetryPolicy(attempts=1))


def test_a_new_claim_sends_an_empty_body_and_a_renewal_sends_its_claim_id() -> None:
    seen: list[httpx.Request] = []
    api = mock([httpx.Response(200, json=CLAIM), httpx.Response(200, json=CLAIM)], seen)
    assert api.claim(RUN_ID) == CLAIM
    assert api.claim(RUN_ID, CLAIM["claim_id"]) == CLAIM
    assert [(request.method, request.url.path) for request in seen] == [("POST", f"/v1/runs/{RUN_ID}/claim")] * 2
    assert [json.loads(request.content) for request in seen] == [{}, {"claim_id": CLAIM["claim_id"]}]


def test_results_are_posted_with_the_claim_id_and_without_one_when_none_is_given() -> None:
    seen: list[httpx.Request] = []
    run = {"id": RUN_ID, "status": "resumed"}
    api = mock([httpx.Response(200, json=run), httpx.Response(200, json=run)], seen)
    result = {"call_id": "call_1", "content": "saved", "is_error": False}
    api.post_results(RUN_ID, "c-1", [{"call_id": "call_1", "content": "saved", "is_error": False}])
    api.post_results(RUN_ID, None, [{"call_id": "call_1", "content": "saved", "is_error": False}])
    assert [json.loads(request.content) for request in seen] == [
        {"results": [result], "claim_id": "c-1"},
        {"results": [result]},
    ]


def test_another_workers_claim_is_a_claimed_error_that_says_until_when() -> None:
    api = mock([problem("claimed", until=UNTIL)], [])
    with pytest.raises(ClaimedError) as refused:
        api.claim(RUN_ID)
    assert (refused.value.status, refused.value.code, refused.value.until) == (409, "claimed", UNTIL)
    assert isinstance(refused.value, ApiError)


@pytest.mark.parametrize(
    ("code", "kind"), [("claim_lapsed", ClaimLapsedError), ("claim_required", ClaimRequiredError)]
)
def test_a_lapsed_claim_and_a_missing_one_are_errors_of_their_own(code: str, kind: type[ApiError]) -> None:
    api = mock([problem(code)], [])
    with pytest.raises(kind) as refused:
        api.post_results(RUN_ID, "c-1", [{"call_id": "call_1", "content": "saved", "is_error": False}])
    assert refused.value.code == code


def test_other_conflicts_stay_plain_api_errors() -> None:
    api = mock([problem("not_released", run_status="resumed")], [])
    with pytest.raises(ApiError) as refused:
        api.claim(RUN_ID)
    assert type(refused.value) is ApiError and refused.value.code == "not_released"


def test_the_async_client_reads_a_claimed_error_too() -> None:
    def handle(request: httpx.Request) -> httpx.Response:
        return problem("claimed", until=UNTIL)

    async def claim() -> None:
        async with httpx.AsyncClient(transport=httpx.MockTransport(handle)) as http:
            await AsyncClient("http://service.invalid", "ar_key", http=http).claim(RUN_ID)

    with pytest.raises(ClaimedError) as refused:
        asyncio.run(claim())
    assert refused.value.until == UNTIL


def test_one_worker_claims_the_released_run_another_is_refused_and_results_need_the_live_claim(
    api: Client, service: Service
) -> None:
    owner = new_owner(api)
    run = register(api, owner)
    api.approve(run["id"], run["turn"]["digest"], owner)
    claim = api.claim(run["id"])
    assert [call["call_id"] for call in claim["released_calls"]] == ["call_1"]
    with pytest.raises(ClaimedError) as refused:
        api.claim(run["id"])
    assert refused.value.until is not None
    renewed = api.claim(run["id"], claim["claim_id"])
    assert renewed["claim_id"] == claim["claim_id"] and renewed["until"] >= claim["until"]

    result = {"call_id": "call_1", "content": "saved page 12", "is_error": False}
    with pytest.raises(ClaimRequiredError):
        api.post_results(run["id"], None, [{"call_id": "call_1", "content": "saved page 12", "is_error": False}])
    posted = [{"call_id": "call_1", "content": "saved page 12", "is_error": False}]
    resumed = api.post_results(run["id"], claim["claim_id"], posted)  # type: ignore[arg-type]
    assert resumed["status"] == "resumed"
    assert resumed["released_calls"][0]["result"] == {"content": result["content"], "is_error": False}
    with pytest.raises(ApiError) as over:
        api.claim(run["id"])
    assert (over.value.status, over.value.code) == (409, "not_released")
    assert over.value.problem is not None and over.value.problem.get("run_status") == "resumed"
