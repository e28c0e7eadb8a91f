"""Webhooks through the package: a subscription made with the API, a delivery the real service signed and sent to
a loopback receiver verified by `WebhookVerifier` (the standardwebhooks library), and altered or foreign
deliveries refused."""

import base64
import time
import uuid

import pytest
from conftest import Service, chat_transcript, new_run_id

from approval_resume import ApiError, WebhookVerificationError, WebhookVerifier, verify_webhook

SCOPES = ["users:write", "runs:write", "webhooks:write"]


def test_a_delivery_the_service_signed_verifies_and_an_altered_one_is_refused(service: Service) -> None:
    api = service.client(SCOPES, tenant=f"hooks-{uuid.uuid4().hex[:12]}")
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
    assert (event["type"], event["data"]["run_id"], event["data"]["status"]) == ("run.waiting", run["id"], "waiting_for_approval")
    assert event["id"] == headers["webhook-id"] and event["data"]["turn"]["digest"] == run["turn"]["digest"]
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

    listed = api.list_webhooks()["subscriptions"]
    assert [s["id"] for s in listed] == [subscription["id"]] and "secret" not in listed[0]
    api.remove_webhook(subscription["id"])
    assert api.list_webhooks()["subscriptions"] == []
    with pytest.raises(ApiError) as gone:
        api.remove_webhook(subscription["id"])
    assert (gone.value.status, gone.value.code) == (404, "not_found")
    api.close()
