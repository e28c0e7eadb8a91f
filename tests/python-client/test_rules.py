"""Remembered decisions (docs/design.md §18) through the package, against the real binary: a `run` scope rule made,
listed (sync and async), deciding the run's next turn as its author would when `append_turn` registers it, recorded
in the audit and the feed, then revoked, after which a turn waits for a person again."""

import asyncio
import json
import uuid

from conftest import TOOL, Service, chat_transcript, new_run_id

from approval_resume import AsyncClient, models
from approval_resume.models import PutUser, RuleList

ARGUMENTS = '{"page": 12, "description": "Fresh bread daily."}'


def test_a_run_rule_decides_the_next_turn_at_once_until_it_is_revoked(service: Service) -> None:
    tenant = f"rules-{uuid.uuid4().hex[:12]}"
    api = service.client(tenant=tenant)
    owner = uuid.uuid4().int % 1_000_000_000 + 1000
    user: PutUser = {"username": f"owner-{owner}", "is_admin": False, "can_approve_others": False, "disabled": False}
    api.put_user(owner, user)
    run = api.register_run(
        {
            "id": new_run_id(),
            "owner_uid": owner,
            "messages": chat_transcript(("call_1", ARGUMENTS)),
            "tools": [{"name": TOOL, "effect": "write"}],
            "privacy_level": "full",
        }
    )

    rule = api.make_run_rule(run["id"], {"created_by": owner, "tool": TOOL, "verdict": "approve"})
    assert (rule["scope"], rule["run_id"], rule["owner_uid"], rule["tool"]) == ("run", run["id"], owner, TOOL)
    assert (rule["verdict"], rule["arguments"], rule["created_by"], rule["live"]) == ("approve", None, owner, True)
    assert (rule["revoked_at"], rule["revoked_by"], rule["expires_at"]) == (None, None, None)
    assert api.list_run_rules(run["id"]) == {"rules": [rule]}

    reader = service.add_key(f"python-{uuid.uuid4().hex[:12]}", ["runs:read"], tenant)

    async def listed() -> RuleList:
        async with AsyncClient(service.base_url, reader) as client:
            return await client.list_owner_rules(owner)

    assert asyncio.run(listed()) == {"rules": [rule]}

    # The turn waiting already is not the rule's: rules decide the turns registered after them.
    assert api.get_run(run["id"])["status"] == "waiting_for_approval"
    api.deny(run["id"], run["turn"]["digest"], owner)
    decided = api.append_turn(run["id"], {"messages": chat_transcript(("call_2", ARGUMENTS))[-1:]})
    assert (decided["status"], decided["turn"]["index"]) == ("resumed", 1)
    decision = decided["decision"]
    assert (decision["approved"], decision["decider_uid"], decision["decided_by"]) == (True, owner, "run_owner")
    assert [(call["call_id"], call["approved"], call.get("rule_id")) for call in decision["calls"]] == [
        ("call_2", True, rule["id"])
    ]
    call_2 = f"{run['id']}:call_2"
    ran = [body for _, headers, body in service.executor.requests if headers["idempotency-key"] == call_2]
    assert [json.loads(body)["arguments"] for body in ran] == [json.loads(ARGUMENTS)], "the executor ran it once"
    [_, by_rule] = api.list_events(run["id"])["approval_events"]
    assert [call.get("rule_id") for call in by_rule["calls"]] == [rule["id"]]

    revoked = api.revoke_rule(rule["id"], owner)
    assert (revoked["id"], revoked["revoked_by"], revoked["live"]) == (rule["id"], owner, False)
    assert revoked["revoked_at"] is not None
    assert api.revoke_rule(rule["id"], owner) == revoked, "a rule revoked already is answered as it stands"
    assert api.list_run_rules(run["id"]) == {"rules": [revoked]}
    waiting = api.append_turn(run["id"], {"messages": chat_transcript(("call_3", ARGUMENTS))[-1:]})
    assert (waiting["status"], waiting["turn"]["index"], "decision" not in waiting) == ("waiting_for_approval", 2, True)

    events = api.follow_events()["events"]
    rule_events = [(event["type"], event["data"]) for event in events if models.run_data(event) is None]
    expected = {"created_by": owner, "owner_uid": owner, "run_id": run["id"], "tool": TOOL, "verdict": "approve"}
    assert [(kind, {member: data.get(member) for member in expected}) for kind, data in rule_events] == [
        ("rule.created", expected),
        ("rule.revoked", expected),
    ]
