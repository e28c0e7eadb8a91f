"""Every operation of openapi.yaml, once: its method, path and whether a repeat is safe, and how each client
method turns its arguments into a request. `Client` and `AsyncClient` send what these build, so the two cannot
drift apart, and tests/python-client/test_spec.py holds `OPERATIONS` to the spec's paths.
"""

from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import quote

from .models import (
    AppendTurn,
    ClaimRun,
    CreateWebhook,
    DecisionBody,
    MakeLink,
    ModelInputFormat,
    OwnerRuleBody,
    PostResults,
    PutUser,
    RegisterRun,
    RotateWebhookSecret,
    RunRuleBody,
)

Answer = Literal["json", "text", "none"]


@dataclass(frozen=True)
class Operation:
    operation_id: str
    method: str
    #: The path as openapi.yaml writes it, with `{name}` parameters.
    path: str
    #: A repeat answers as the first did (retry.py says which calls qualify and why).
    idempotent: bool
    #: What a success carries: a JSON document, a text (YAML, JavaScript, metrics), or nothing (204).
    answer: Answer = "json"


def _op(operation_id: str, method: str, path: str, idempotent: bool, answer: Answer = "json") -> Operation:
    return Operation(operation_id, method, path, idempotent, answer)


#: The client method name of each operation of openapi.yaml (`paths`); the webhook `receiveEvent` is received,
#: not called, and is verified by `approval_resume.webhooks`. The approval page's operations (`showApprovalPage`,
#: `submitApprovalPage`, `getApprovalPageStyle`) are a person's browser's: the link is that person's credential,
#: which a backend holding API keys does not use (it makes links with `create_link`).
BROWSER_OPERATIONS = {"showApprovalPage", "submitApprovalPage", "getApprovalPageStyle"}
OPERATIONS: dict[str, Operation] = {
    "put_user": _op("putUser", "PUT", "/v1/users/{uid}", True),
    "register_run": _op("registerRun", "POST", "/v1/runs", True),
    "get_run": _op("getRun", "GET", "/v1/runs/{id}", True),
    "decide": _op("decide", "POST", "/v1/runs/{id}/decision", True),
    "get_model_input": _op("getModelInput", "GET", "/v1/runs/{id}/model-input", True),
    "append_turn": _op("appendTurn", "POST", "/v1/runs/{id}/turns", True),
    "list_events": _op("listEvents", "GET", "/v1/runs/{id}/events", True),
    "cancel_run": _op("cancelRun", "POST", "/v1/runs/{id}/cancel", True),
    "complete_run": _op("completeRun", "POST", "/v1/runs/{id}/complete", True),
    # Not idempotent: a new claim sent again after its answer was lost finds that claim live (409 `claimed`).
    "claim": _op("claimRun", "POST", "/v1/runs/{id}/claim", False),
    # Idempotent: the same result again answers 200 and records nothing (another one is 409 `result_conflict`).
    "post_results": _op("postResults", "POST", "/v1/runs/{id}/results", True),
    # Not idempotent: each post makes a rule, a repeat a second one beside the first.
    "make_run_rule": _op("makeRunRule", "POST", "/v1/runs/{id}/rules", False),
    "list_run_rules": _op("listRunRules", "GET", "/v1/runs/{id}/rules", True),
    "make_owner_rule": _op("makeOwnerRule", "POST", "/v1/rules", False),
    "list_owner_rules": _op("listOwnerRules", "GET", "/v1/rules", True),
    # Idempotent: a rule revoked already is answered as it stands.
    "revoke_rule": _op("revokeRule", "DELETE", "/v1/rules/{id}", True),
    # Not idempotent: each post makes another link (the first one's URL is shown only in its lost answer).
    "create_link": _op("makeApprovalLink", "POST", "/v1/runs/{id}/links", False),
    # Idempotent: a link revoked already is answered 204 again.
    "revoke_link": _op("revokeApprovalLink", "DELETE", "/v1/runs/{id}/links/{link_id}", True, "none"),
    "list_approvals": _op("listApprovals", "GET", "/v1/approvals", True),
    "follow_events": _op("followEvents", "GET", "/v1/events", True),
    "list_webhooks": _op("listWebhooks", "GET", "/v1/webhooks", True),
    "create_webhook": _op("createWebhook", "POST", "/v1/webhooks", False),
    "remove_webhook": _op("removeWebhook", "DELETE", "/v1/webhooks/{id}", False, "none"),
    # Not idempotent: a repeat rotates again, retiring the secret the first one kept overlapping.
    "rotate_webhook_secret": _op("rotateWebhookSecret", "POST", "/v1/webhooks/{id}/rotate-secret", False),
    "healthz": _op("healthz", "GET", "/healthz", True),
    "readyz": _op("readyz", "GET", "/readyz", True),
    "metrics": _op("metrics", "GET", "/metrics", True, "text"),
    "get_approval_card": _op("getApprovalCard", "GET", "/ui/approval-card.js", True, "text"),
    "get_openapi": _op("getOpenapi", "GET", "/openapi.yaml", True, "text"),
}


@dataclass(frozen=True)
class Request:
    operation: Operation
    path: str
    params: dict[str, str | int] = field(default_factory=dict)
    json: Any = None
    #: Seconds to wait for the answer, when the call needs longer than the client's default (a long poll).
    timeout: float | None = None


def _request(name: str, path_params: dict[str, str | int] | None = None, **rest: Any) -> Request:
    operation = OPERATIONS[name]
    path = operation.path
    for key, value in (path_params or {}).items():
        path = path.replace("{" + key + "}", quote(str(value), safe=""))
    return Request(operation, path, **rest)


def _query(**values: str | int | None) -> dict[str, str | int]:
    return {key: value for key, value in values.items() if value is not None}


def put_user(uid: int, user: PutUser) -> Request:
    return _request("put_user", {"uid": uid}, json=user)


def register_run(run: RegisterRun) -> Request:
    return _request("register_run", json=run)


def get_run(run_id: str, include_worker_state: bool = False) -> Request:
    include = "worker_state" if include_worker_state else None
    return _request("get_run", {"id": run_id}, params=_query(include=include))


def decide(run_id: str, body: DecisionBody, format: ModelInputFormat | None = None) -> Request:
    return _request("decide", {"id": run_id}, params=_query(format=format), json=body)


def get_model_input(run_id: str, format: ModelInputFormat | None = None) -> Request:
    return _request("get_model_input", {"id": run_id}, params=_query(format=format))


def append_turn(run_id: str, turn: AppendTurn) -> Request:
    return _request("append_turn", {"id": run_id}, json=turn)


def list_events(run_id: str) -> Request:
    return _request("list_events", {"id": run_id})


def cancel_run(run_id: str) -> Request:
    return _request("cancel_run", {"id": run_id})


def complete_run(run_id: str) -> Request:
    return _request("complete_run", {"id": run_id})


def claim(run_id: str, body: ClaimRun) -> Request:
    return _request("claim", {"id": run_id}, json=body)


def post_results(run_id: str, body: PostResults) -> Request:
    return _request("post_results", {"id": run_id}, json=body)


def make_run_rule(run_id: str, rule: RunRuleBody) -> Request:
    return _request("make_run_rule", {"id": run_id}, json=rule)


def list_run_rules(run_id: str) -> Request:
    return _request("list_run_rules", {"id": run_id})


def make_owner_rule(rule: OwnerRuleBody) -> Request:
    return _request("make_owner_rule", json=rule)


def list_owner_rules(owner_uid: int) -> Request:
    return _request("list_owner_rules", params=_query(owner_uid=owner_uid))


def revoke_rule(rule_id: str, revoked_by: int | None) -> Request:
    return _request("revoke_rule", {"id": rule_id}, params=_query(revoked_by=revoked_by))


def create_link(run_id: str, body: MakeLink) -> Request:
    return _request("create_link", {"id": run_id}, json=body)


def revoke_link(run_id: str, link_id: str) -> Request:
    return _request("revoke_link", {"id": run_id, "link_id": link_id})


def list_approvals(
    acting_uid: int,
    *,
    owner_uid: int | None = None,
    tool: str | None = None,
    limit: int | None = None,
    cursor: str | None = None,
) -> Request:
    params = _query(acting_uid=acting_uid, owner_uid=owner_uid, tool=tool, limit=limit, cursor=cursor)
    return _request("list_approvals", params=params)


#: Seconds a long poll's answer may take beyond the wait it asked for.
LONG_POLL_MARGIN = 15.0


def follow_events(after: str | None = None, *, wait: int = 0, limit: int | None = None) -> Request:
    params = _query(after=after, wait=wait, limit=limit)
    return _request("follow_events", params=params, timeout=wait + LONG_POLL_MARGIN)


def list_webhooks() -> Request:
    return _request("list_webhooks")


def create_webhook(subscription: CreateWebhook) -> Request:
    return _request("create_webhook", json=subscription)


def remove_webhook(subscription_id: str) -> Request:
    return _request("remove_webhook", {"id": subscription_id})


def rotate_webhook_secret(subscription_id: str, rotation: RotateWebhookSecret) -> Request:
    return _request("rotate_webhook_secret", {"id": subscription_id}, json=rotation)


def healthz() -> Request:
    return _request("healthz")


def readyz() -> Request:
    return _request("readyz")


def metrics() -> Request:
    return _request("metrics")


def get_approval_card() -> Request:
    return _request("get_approval_card")


def get_openapi() -> Request:
    return _request("get_openapi")
