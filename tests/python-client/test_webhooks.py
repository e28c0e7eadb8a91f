"""Webhooks through the package: a subscription made with the API, a delivery the real service signed and sent to
a loopback receiver verified by `WebhookVerifier` (the standardwebhooks library), and altered or foreign
deliveries refused."""

import asyncio
import base64
import time
import uuid

import pytest
from conftest import Service, chat_transcript, new_run_id

from approval_resume import (
    ApiError,
    AsyncClient,
    Client,
    WebhookVerificationError,
    WebhookVerifier,
    models,
    verify_webhook,
)

SCOPES = ["users:write", "runs:write", "webhooks:write"]


def test_a_delivery_the_service_signed_verifies_and_an_altered_one_is_refused(service: Service) -> None:
    tenant = f"hooks-{uuid.uuid4().hex[:12]}"
    api_key = service.add_key(f"python-{uuid.uuid4().hex[:12]}", SCOPES, tenant)
    api = Client(service.base_url, api_key)
    subscription = api.create_webhook(service.receiver_url, ["run.waiting"])
    assert subscription["secret"].startswith("whsec_") and subscription["event_types"] == ["run.waiting"]
    assert subscription["url"] == service.receiver_url
    api.put_user(7, {"username": "ada", "is_admin": False, "can_approve_others": False, "disabled": False})
    run = api.register_run({"id": new_run_id(), "owner_uid": 7, "messages": chat_transcript(("call_1", "{}"))})

    def delivered(requests: list[tuple[str, dict[str, str], bytes]]) -> bool:
        return any(run["id"].encode() in body for _, _, body in requests)

    [(path, headers, body)] = [r for r in service.receiver.wait_for(delivered) if run["id"].encode() in r[2]]
    assert path == "/hooks"
    verifier = WebhookVerifier(subscription["secret"])
    event = verifier.verify(body, headers)
    data = models.run_data(event)
    assert data is not None, "a run's event carries a run's data"
    assert (event["type"], data["run_id"], data["status"]) == ("run.waiting", run["id"], "waiting_for_approval")
    assert event["id"] == headers["webhook-id"] and data["turn"]["digest"] == run["turn"]["digest"]
    assert verify_webhook(subscription["secret"], body.decode(), headers) == event

    altered = body.replace(b'"run.waiting"', b'"run.resumed"')
    assert altered != body
    with pytest.raises(WebhookVerificationError):
        verifier.verify(altered, headers)
    with pytest.raises(WebhookVerificationError):
        verifier.verify(body, {**headers, "webhook-id": "evt_" + "0" * 32})
    with pytest.raises(WebhookVerificationError):
        verifier.verify(body, {**headers, "webhook-signature": "v1,not base64!"})
    with pytest.raises(WebhookVerificationError):
        verifier.verify(body, {key: value for key, value in headers.items() if key != "webhook-signature"})
    foreign = "whsec_" + base64.b64encode(b"another subscription's secret!!").decode()
    with pytest.raises(WebhookVerificationError):
        WebhookVerifier(foreign).verify(body, headers)
    # Signed long ago: the library refuses a timestamp over five minutes off, so a captured request is not replayed.
    stale = {**headers, "webhook-timestamp": str(int(time.time()) - 3600)}
    with pytest.raises(WebhookVerificationError):
        verifier.verify(body, stale)

    # A rotation: the new secret is shown once, and while the old one overlaps, both sign each delivery, the very
    # next one included (the service reads the secrets again before it sends).
    rotated = api.rotate_webhook_secret(subscription["id"], overlap_secs=600)
    assert rotated["id"] == subscription["id"] and rotated["secret"].startswith("whsec_")
    assert rotated["secret"] != subscription["secret"] and rotated["previous_secret_expires_at"] is not None
    assert rotated["backlog_capped"] is False
    following = api.register_run({"id": new_run_id(), "owner_uid": 7, "messages": chat_transcript(("call_1", "{}"))})

    def delivered_following(requests: list[tuple[str, dict[str, str], bytes]]) -> bool:
        return any(following["id"].encode() in body for _, _, body in requests)

    [(_, headers, body)] = [
        r for r in service.receiver.wait_for(delivered_following) if following["id"].encode() in r[2]
    ]
    assert WebhookVerifier(rotated["secret"]).verify(body, headers)["data"]["run_id"] == following["id"]
    assert verifier.verify(body, headers)["data"]["run_id"] == following["id"], "the old secret overlaps"

    async def rotate_at_once() -> None:
        async with AsyncClient(service.base_url, api_key) as client:
            again = await client.rotate_webhook_secret(subscription["id"], overlap_secs=0)
            assert again["secret"] not in (subscription["secret"], rotated["secret"])
            assert again["previous_secret_expires_at"] is None, "an overlap of 0 retires the old secret at once"

    asyncio.run(rotate_at_once())

    listed = api.list_webhooks()["subscriptions"]
    assert [s["id"] for s in listed] == [subscription["id"]] and "secret" not in listed[0]
    api.remove_webhook(subscription["id"])
    assert api.list_webhooks()["subscriptions"] == []
    with pytest.raises(ApiError) as gone:
        api.remove_webhook(subscription["id"])
    assert (gone.value.status, gone.value.code) == (404, "not_found")
    api.close()
