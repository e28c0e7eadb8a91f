"""Approval links, users' addresses and `notify` (docs/design.md §20) through the package, against the real binary
(PUBLIC_URL is http://approvals.test, no SMTP_URL: mails are queued and none is sent; tests/links/run.sh sends them).
"""

import asyncio
import re
import uuid
from datetime import datetime, timezone
from urllib.parse import urlsplit

import httpx
import pytest
from conftest import PUBLIC_URL, TOOL, Service, chat_transcript, new_run_id

from approval_resume import ApiError, AsyncClient, Client
from approval_resume.models import PutUser, RegisterRun, RunView


def user(name: str, *, can_approve_others: bool = False, disabled: bool = False, email: str | None = None) -> PutUser:
    body: PutUser = {"username": name, "is_admin": False, "can_approve_others": can_approve_others, "disabled": disabled}
    if email is not None:
        body["email"] = email
    return body


def new_uid() -> int:
    return uuid.uuid4().int % 1_000_000_000 + 2_000_000_000


def register(api: Client, owner: int, notify: list[int] | None = None) -> RunView:
    body: RegisterRun = {
        "id": new_run_id(),
        "owner_uid": owner,
        "messages": chat_transcript(("call_1", '{"page": 12}')),
        "tools": [{"name": TOOL, "effect": "write"}],
    }
    if notify is not None:
        body["notify"] = notify
    return api.register_run(body)


def page(service: Service, url: str) -> httpx.Response:
    """The link's page, opened on the service's own address (PUBLIC_URL names none that resolves)."""
    assert url.startswith(f"{PUBLIC_URL}/approve/"), url
    return httpx.get(service.base_url + urlsplit(url).path)


def test_a_users_email_comes_back_and_a_put_without_one_takes_it_away(api: Client) -> None:
    uid = new_uid()
    assert api.put_user(uid, user("olivia", email="olivia@example.com"))["email"] == "olivia@example.com"
    assert api.put_user(uid, user("olivia"))["email"] is None
    with pytest.raises(ApiError) as refused:
        api.put_user(uid, user("olivia", email="Olivia <olivia@example.com>"))
    assert (refused.value.status, refused.value.code) == (422, "invalid_email")


def test_notify_at_registration_and_on_a_new_turn_says_whose_mail_is_queued_and_why_not_the_others(api: Client) -> None:
    owner, approver, outsider, disabled, unknown = (new_uid() for _ in range(5))
    api.put_user(owner, user("olivia", email="olivia@example.com"))
    api.put_user(approver, user("arne", can_approve_others=True))
    api.put_user(outsider, user("otto", email="otto@example.com"))
    api.put_user(disabled, user("dora", can_approve_others=True, disabled=True, email="dora@example.com"))

    run = register(api, owner, notify=[owner, approver, outsider, disabled, unknown])
    assert run["notify"]["queued"] == [owner]
    assert sorted((entry["uid"], entry["reason"]) for entry in run["notify"]["skipped"]) == sorted(
        [(approver, "no_email"), (outsider, "may_not_decide"), (disabled, "disabled"), (unknown, "unknown_user")]
    )
    assert "notify" not in register(api, owner), "no notify asked, none answered"

    api.deny(run["id"], run["turn"]["digest"], owner)
    messages = [chat_transcript(("call_2", '{"page": 13}'))[-1]]
    turn = api.append_turn(run["id"], {"messages": messages, "notify": [owner]})
    assert turn["status"] == "waiting_for_approval"
    assert (turn["notify"]["queued"], turn["notify"]["skipped"]) == ([owner], [])


def test_a_link_for_an_approver_opens_the_page_until_it_is_revoked(service: Service, api: Client) -> None:
    owner, approver = new_uid(), new_uid()
    api.put_user(owner, user("olivia"))
    api.put_user(approver, user("arne", can_approve_others=True))
    run = register(api, owner)

    link = api.create_link(run["id"], approver)
    assert re.fullmatch(rf"{re.escape(PUBLIC_URL)}/approve/{run['id']}/[A-Za-z0-9_-]{{43}}", link["url"]), link
    assert datetime.fromisoformat(link["expires_at"]) > datetime.now(timezone.utc)
    opened = page(service, link["url"])
    assert opened.status_code == 200 and "You decide as <strong>arne</strong>" in opened.text
    assert api.get_run(run["id"])["status"] == "waiting_for_approval", "opening the page decides nothing"

    api.revoke_link(run["id"], link["id"])
    gone = page(service, link["url"])
    assert gone.status_code == 410 and "Link revoked" in gone.text
    api.revoke_link(run["id"], link["id"])  # again: answered the same


def test_the_async_client_makes_and_revokes_links_too(service: Service, api: Client) -> None:
    owner = new_uid()
    api.put_user(owner, user("olivia"))
    run = register(api, owner)

    async def make_and_revoke() -> str:
        async with AsyncClient(service.base_url, service.add_key("python-async-links", ["decisions:write"])) as client:
            link = await client.create_link(run["id"], owner)
            await client.revoke_link(run["id"], link["id"])
            return link["url"]

    assert page(service, asyncio.run(make_and_revoke())).status_code == 410


def test_a_link_for_someone_who_may_not_decide_the_run_is_refused(api: Client) -> None:
    owner, outsider = new_uid(), new_uid()
    api.put_user(owner, user("olivia"))
    api.put_user(outsider, user("otto"))
    run = register(api, owner)
    with pytest.raises(ApiError) as refused:
        api.create_link(run["id"], outsider)
    assert (refused.value.status, refused.value.code) == (403, "decider_not_permitted")
