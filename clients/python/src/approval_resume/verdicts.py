"""Decision bodies (docs/design.md §5, §8): the whole turn, or a verdict per call with edited arguments. Pure: the
clients send what these build."""

import json
from collections.abc import Iterable, Mapping
from typing import Any

from .models import CallVerdictBody, DecisionBody, DenialReason


def whole_turn(
    turn_digest: str, decider_uid: int | None, approved: bool, reason: DenialReason | None = None
) -> DecisionBody:
    """The same verdict for every pending call. `decider_uid=None` is a decision by nobody (`decided_by:
    unknown`, scope `decisions:anonymous`); `reason` goes with a denial only."""
    body: DecisionBody = {"approved": approved, "decider_uid": decider_uid, "turn_digest": turn_digest}
    if reason is not None:
        body["reason"] = reason
    return body


def per_call(turn_digest: str, decider_uid: int | None, calls: Iterable[CallVerdictBody]) -> DecisionBody:
    """A verdict for each pending call, every one exactly once, in any order."""
    return {"decider_uid": decider_uid, "turn_digest": turn_digest, "calls": list(calls)}


def approve_call(call_id: str, arguments: str | Mapping[str, Any] | None = None) -> CallVerdictBody:
    """Approve one call, as proposed or with edited `arguments`: the text of a JSON object, or a mapping that is
    sent as one. The tool runs with them and the model reads the edit note first (docs/design.md §3)."""
    verdict: CallVerdictBody = {"call_id": call_id, "approved": True}
    if arguments is not None:
        verdict["arguments"] = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return verdict


def deny_call(call_id: str, reason: DenialReason | None = None) -> CallVerdictBody:
    """Deny one call; `reason` is rendered only on a `write` tool's result."""
    verdict: CallVerdictBody = {"call_id": call_id, "approved": False}
    if reason is not None:
        verdict["reason"] = reason
    return verdict
