"""What the client sends again, and after how long. The service answers 503 only when its database is away, so
these answers come from an httpx mock transport; the waits are recorded instead of slept."""

import asyncio
import time
from typing import Any

import httpx
import pytest

from approval_resume import ApiError, AsyncClient, Client, RetryPolicy

UNAVAILABLE = {
    "type": "urn:approval-resume:problem:database_unavailable",
    "title": "Service Unavailable",
    "status": 503,
    "detail": "the database is unavailable; retry after the time in Retry-After",
    "code": "database_unavailable",
    "request_id": "req-1",
}
RUN: dict[str, Any] = {"id": "0b0e9f1e-6a56-4c2b-9a43-3f1f4c1d2a01", "status": "cancelled"}


def service(answers: list[httpx.Response | Exception], seen: list[httpx.Request]) -> httpx.MockTransport:
    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    return httpx.MockTransport(handle)


def unavailable(retry_after: str = "2") -> httpx.Response:
    return httpx.Response(
        503, json=UNAVAILABLE, headers={"retry-after": retry_after, "content-type": "application/problem+json"}
    )


@pytest.fixture
def waits(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    recorded: list[float] = []
    monkeypatch.setattr(time, "sleep", recorded.append)
    return recorded


def client(answers: list[httpx.Response | Exception], seen: list[httpx.Request], **policy: float) -> Client:
    http = httpx.Client(transport=service(answers, seen), base_url="http://service.invalid")
    return Client("http://service.invalid", "ar_key", http=http, retry=RetryPolicy(**policy))  # type: ignore[arg-type]


def test_a_503_is_sent_again_after_its_retry_after_for_a_call_whose_repeat_answers_the_same(waits: list[float]) -> None:
    seen: list[httpx.Request] = []
    api = client([unavailable("2"), httpx.Response(200, json=RUN)], seen)
    assert api.cancel_run(RUN["id"]) == RUN
    assert waits == [2.0] and len(seen) == 2
    assert seen[0].headers["authorization"] == "Bearer ar_key"


def test_a_503_on_creating_a_webhook_is_not_sent_again(waits: list[float]) -> None:
    seen: list[httpx.Request] = []
    api = client([unavailable(), httpx.Response(201, json={})], seen)
    with pytest.raises(ApiError) as refused:
        api.create_webhook("https://hooks.example.com/")
    assert (refused.value.status, refused.value.code, refused.value.retry_after) == (503, "database_unavailable", 2.0)
    assert refused.value.request_id == "req-1"
    assert waits == [] and len(seen) == 1


def test_retries_stop_after_the_policy_s_attempts_and_each_wait_is_cut_to_its_longest(waits: list[float]) -> None:
    seen: list[httpx.Request] = []
    api = client([unavailable("120"), unavailable("120"), unavailable("120")], seen, attempts=3, max_wait=5.0)
    with pytest.raises(ApiError) as refused:
        api.get_run(RUN["id"])
    assert refused.value.status == 503
    assert waits == [5.0, 5.0] and len(seen) == 3


def test_other_errors_are_raised_at_once(waits: list[float]) -> None:
    seen: list[httpx.Request] = []
    conflict = httpx.Response(409, json={**UNAVAILABLE, "status": 409, "code": "already_decided"})
    api = client([conflict], seen)
    with pytest.raises(ApiError) as refused:
        api.deny(RUN["id"], "0" * 64, 7)
    assert (refused.value.status, refused.value.code, refused.value.retry_after) == (409, "already_decided", None)
    assert waits == [] and len(seen) == 1


def test_a_refused_connection_is_tried_again_whatever_the_call(waits: list[float]) -> None:
    seen: list[httpx.Request] = []
    created: dict[str, Any] = {"id": "x", "secret": "whsec_AAAA"}
    api = client([httpx.ConnectError("refused"), httpx.Response(201, json=created)], seen)
    assert api.create_webhook("https://hooks.example.com/") == created
    assert waits == [0.5] and len(seen) == 2


def test_an_answer_that_is_no_problem_document_is_still_an_api_error(waits: list[float]) -> None:
    seen: list[httpx.Request] = []
    api = client([httpx.Response(502, text="<html>Bad Gateway</html>", headers={"x-request-id": "edge-9"})], seen)
    with pytest.raises(ApiError) as refused:
        api.healthz()
    assert (refused.value.status, refused.value.code, refused.value.request_id) == (502, None, "edge-9")
    assert "Bad Gateway" in refused.value.detail


def test_the_async_client_waits_for_retry_after_too(monkeypatch: pytest.MonkeyPatch) -> None:
    recorded: list[float] = []

    async def sleep(seconds: float) -> None:
        recorded.append(seconds)

    monkeypatch.setattr(asyncio, "sleep", sleep)
    seen: list[httpx.Request] = []
    transport = service([unavailable("3"), httpx.Response(200, json=RUN)], seen)

    async def call() -> object:
        async with httpx.AsyncClient(transport=transport) as http:
            return await AsyncClient("http://service.invalid", "ar_key", http=http).complete_run(RUN["id"])

    assert asyncio.run(call()) == RUN
    assert recorded == [3.0] and len(seen) == 2


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
def test_a_redirect_is_an_error_and_is_not_followed(waits: list[float], status: int) -> None:
    seen: list[httpx.Request] = []
    moved = httpx.Response(status, headers={"location": "http://elsewhere.invalid/v1/webhooks/w-1"})
    # A client of the caller's own that would follow redirects: the package still does not.
    http = httpx.Client(transport=service([moved], seen), follow_redirects=True)
    api = Client("http://service.invalid", "ar_key", http=http)
    with pytest.raises(ApiError) as refused:
        api.remove_webhook("w-1")
    assert (refused.value.status, refused.value.code) == (status, None)
    assert "redirect to http://elsewhere.invalid/v1/webhooks/w-1" in refused.value.detail
    assert [request.url.host for request in seen] == ["service.invalid"]


def test_the_async_client_does_not_follow_a_redirect_either() -> None:
    seen: list[httpx.Request] = []
    transport = service([httpx.Response(307, headers={"location": "http://elsewhere.invalid/"})], seen)

    async def call() -> object:
        async with httpx.AsyncClient(transport=transport, follow_redirects=True) as http:
            return await AsyncClient("http://service.invalid", "ar_key", http=http).complete_run(RUN["id"])

    with pytest.raises(ApiError) as refused:
        asyncio.run(call())
    assert refused.value.status == 307 and len(seen) == 1
