"""`Client`: the whole HTTP API of approval-resume (openapi.yaml), synchronous, over one `httpx.Client`.

Each method is one operation of `operations.OPERATIONS`, named after it, plus a few conveniences built on them
(`approve`, `deny`, `decide_calls`, `iter_approvals`). An error answer raises `ApiError`; see `retry` for what is
sent again. `AsyncClient` (async_client.py) is the same API for asyncio.
"""

import time
from collections.abc import Iterable, Iterator
from typing import Any, cast

import httpx

from . import _transport, operations, verdicts
from .models import (
    AppendTurn,
    ApprovalLink,
    CallVerdictBody,
    Claim,
    ClaimRun,
    CreateWebhook,
    DecisionAnswer,
    DecisionBody,
    DenialReason,
    EventsPage,
    EventsView,
    EventType,
    InboxItem,
    InboxPage,
    ModelInput,
    ModelInputFormat,
    OwnerRuleBody,
    PostedResult,
    PostResults,
    PutUser,
    RegisterRun,
    RotateWebhookSecret,
    Rule,
    RuleList,
    RunRuleBody,
    RunView,
    UserView,
    WebhookCreated,
    WebhookSubscriptions,
)
from .operations import Request
from .retry import RetryPolicy


class Client:
    """A client of one service, with one API key (its scopes decide which methods work)."""

    def __init__(
        self,
        base_url: str,
        key: str,
        *,
        timeout: float = 30.0,
        retry: RetryPolicy | None = None,
        headers: dict[str, str] | None = None,
        http: httpx.Client | None = None,
    ) -> None:
        """`http`: a client of your own (proxies, TLS settings, a mock transport); closed by you, not by `close`."""
        self._own_http = http is None
        self._http = http or httpx.Client(timeout=timeout)
        self._base_url = base_url.rstrip("/")
        self._headers = _transport.headers(key, headers)
        self._retry = retry or RetryPolicy()

    def close(self) -> None:
        if self._own_http:
            self._http.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def _send(self, request: Request) -> Any:
        attempt = 1
        while True:
            try:
                response = self._http.request(
                    request.operation.method,
                    self._base_url + request.path,
                    headers=self._headers,
                    **_transport.send_arguments(request),
                )
            except httpx.ConnectError:
                wait = self._retry.wait_after_connect_error(attempt)
                if wait is None:
                    raise
            else:
                error = _transport.error(response)
                if error is None:
                    return _transport.decode(request, response)
                wait = self._retry.wait_after_status(
                    attempt, request.operation.idempotent, error.status, error.retry_after
                )
                if wait is None:
                    raise error
            time.sleep(wait)
            attempt += 1

    # Users.
    def put_user(self, uid: int, user: PutUser) -> UserView:
        return cast(UserView, self._send(operations.put_user(uid, user)))

    # Runs.
    def register_run(self, run: RegisterRun) -> RunView:
        """201 new, or 200 for the same body again; another body under the id raises 409 `run_exists`."""
        return cast(RunView, self._send(operations.register_run(run)))

    def get_run(self, run_id: str, include_worker_state: bool = False) -> RunView:
        """`include_worker_state`: the answer carries the run's `worker_state`, as the worker sent it (`None`: none)."""
        return cast(RunView, self._send(operations.get_run(run_id, include_worker_state)))

    def append_turn(self, run_id: str, turn: AppendTurn) -> RunView:
        return cast(RunView, self._send(operations.append_turn(run_id, turn)))

    def list_events(self, run_id: str) -> EventsView:
        """The run's audit records (approval and tool events), not the feed (`follow_events`)."""
        return cast(EventsView, self._send(operations.list_events(run_id)))

    def claim(self, run_id: str, claim_id: str | None = None) -> Claim:
        """Claims the run's released calls before the worker runs any (docs/design.md §15): a new claim, or with
        `claim_id` the renewal of that live claim (before its `until`, while a tool runs long). Another worker's live
        claim raises `ClaimedError` (with `until`); a renewal after `until` raises `ClaimLapsedError` (the service
        ended the unposted calls as interrupted); a run not released raises `ApiError` 409 `not_released`."""
        body: ClaimRun = {} if claim_id is None else {"claim_id": claim_id}
        return cast(Claim, self._send(operations.claim(run_id, body)))

    def post_results(self, run_id: str, claim_id: str | None, results: Iterable[PostedResult]) -> RunView:
        """The worker's results of calls released to it, some or all at a time, under its live claim (`claim`). The
        same result again is answered 200 (nothing written) whatever the claim's state; once every released call has
        one, the run is `resumed`. `claim_id=None` sends none: the service answers `ClaimRequiredError` (409
        `claim_required`) to anything but such a repeat."""
        body: PostResults = {"results": list(results)}
        if claim_id is not None:
            body["claim_id"] = claim_id
        return cast(RunView, self._send(operations.post_results(run_id, body)))

    # Approval links (docs/design.md §20).
    def create_link(self, run_id: str, uid: int) -> ApprovalLink:
        """A link with which `uid` (who must be allowed to decide the run) decides its waiting turn from the service's
        page; the service needs PUBLIC_URL. The `url` is shown only in this answer and decides as `uid`, once: hand it
        to that person only, never where a model can read it."""
        return cast(ApprovalLink, self._send(operations.create_link(run_id, {"uid": uid})))

    def revoke_link(self, run_id: str, link_id: str) -> None:
        """The link decides nothing from now on; revoking it again answers the same."""
        self._send(operations.revoke_link(run_id, link_id))

    def cancel_run(self, run_id: str) -> RunView:
        return cast(RunView, self._send(operations.cancel_run(run_id)))

    def complete_run(self, run_id: str) -> RunView:
        return cast(RunView, self._send(operations.complete_run(run_id)))

    # Decisions.
    def decide(self, run_id: str, body: DecisionBody, *, format: ModelInputFormat | None = None) -> DecisionAnswer:
        return cast(DecisionAnswer, self._send(operations.decide(run_id, body, format)))

    def approve(
        self, run_id: str, turn_digest: str, decider_uid: int | None, *, format: ModelInputFormat | None = None
    ) -> DecisionAnswer:
        return self.decide(run_id, verdicts.whole_turn(turn_digest, decider_uid, True), format=format)

    def deny(
        self,
        run_id: str,
        turn_digest: str,
        decider_uid: int | None,
        reason: DenialReason | None = None,
        *,
        format: ModelInputFormat | None = None,
    ) -> DecisionAnswer:
        return self.decide(run_id, verdicts.whole_turn(turn_digest, decider_uid, False, reason), format=format)

    def decide_calls(
        self,
        run_id: str,
        turn_digest: str,
        decider_uid: int | None,
        calls: Iterable[CallVerdictBody],
        *,
        format: ModelInputFormat | None = None,
    ) -> DecisionAnswer:
        """A verdict per call (`verdicts.approve_call`, `verdicts.deny_call`)."""
        return self.decide(run_id, verdicts.per_call(turn_digest, decider_uid, calls), format=format)

    def get_model_input(self, run_id: str, *, format: ModelInputFormat | None = None) -> ModelInput:
        return cast(ModelInput, self._send(operations.get_model_input(run_id, format)))

    # Remembered decisions (docs/design.md §18).
    def make_run_rule(self, run_id: str, rule: RunRuleBody) -> Rule:
        """A `run` scope rule: the run's later turns have their calls of the tool decided at once, as its author
        would (checked again at each use). A repeat makes a second rule."""
        return cast(Rule, self._send(operations.make_run_rule(run_id, rule)))

    def list_run_rules(self, run_id: str) -> RuleList:
        """The run's `run` scope rules, newest first, revoked and expired ones included (`live` says which decide)."""
        return cast(RuleList, self._send(operations.list_run_rules(run_id)))

    def make_owner_rule(self, rule: OwnerRuleBody) -> Rule:
        """An `owner` scope rule: the owner's runs of the tool are decided at once until its `expires_at`."""
        return cast(Rule, self._send(operations.make_owner_rule(rule)))

    def list_owner_rules(self, owner_uid: int) -> RuleList:
        """Every rule of the owner's runs (both scopes), newest first, revoked and expired ones included."""
        return cast(RuleList, self._send(operations.list_owner_rules(owner_uid)))

    def revoke_rule(self, rule_id: str, revoked_by: int | None) -> Rule:
        """`revoked_by`: the backend user revoking it (its author, the owner or an admin), required with a key; `None`
        with a decision token. A turn registered after the answer never uses the rule; decisions made stay."""
        return cast(Rule, self._send(operations.revoke_rule(rule_id, revoked_by)))

    # The approvals inbox.
    def list_approvals(
        self,
        acting_uid: int,
        *,
        owner_uid: int | None = None,
        tool: str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> InboxPage:
        request = operations.list_approvals(acting_uid, owner_uid=owner_uid, tool=tool, limit=limit, cursor=cursor)
        return cast(InboxPage, self._send(request))

    def iter_approvals(
        self, acting_uid: int, *, owner_uid: int | None = None, tool: str | None = None, limit: int | None = None
    ) -> Iterator[InboxItem]:
        """Every waiting run `acting_uid` may decide, newest first, page after page."""
        cursor: str | None = None
        while True:
            page = self.list_approvals(acting_uid, owner_uid=owner_uid, tool=tool, limit=limit, cursor=cursor)
            yield from page["items"]
            cursor = page["next_cursor"]
            if cursor is None:
                return

    # Events.
    def follow_events(self, after: str | None = None, *, wait: int = 0, limit: int | None = None) -> EventsPage:
        """One page of the tenant's events after the cursor `after`; `feed.Feed` follows it with a stored cursor."""
        return cast(EventsPage, self._send(operations.follow_events(after, wait=wait, limit=limit)))

    def list_webhooks(self) -> WebhookSubscriptions:
        return cast(WebhookSubscriptions, self._send(operations.list_webhooks()))

    def create_webhook(self, url: str, event_types: list[EventType] | None = None) -> WebhookCreated:
        """The subscription with its signing `secret`, shown this once: keep it for `webhooks.WebhookVerifier`."""
        body: CreateWebhook = {"url": url}
        if event_types is not None:
            body["event_types"] = event_types
        return cast(WebhookCreated, self._send(operations.create_webhook(body)))

    def remove_webhook(self, subscription_id: str) -> None:
        self._send(operations.remove_webhook(subscription_id))

    def rotate_webhook_secret(self, subscription_id: str, overlap_secs: int | None = None) -> WebhookCreated:
        """A new signing `secret`, shown this once; the old one signs beside it for `overlap_secs` (None: the service's
        WEBHOOK_SECRET_OVERLAP_SECS, 0: it retires at once), so receivers can switch meanwhile."""
        body: RotateWebhookSecret = {}
        if overlap_secs is not None:
            body["overlap_secs"] = overlap_secs
        return cast(WebhookCreated, self._send(operations.rotate_webhook_secret(subscription_id, body)))

    # Ops.
    def healthz(self) -> dict[str, str]:
        return cast(dict[str, str], self._send(operations.healthz()))

    def readyz(self) -> dict[str, str]:
        return cast(dict[str, str], self._send(operations.readyz()))

    def metrics(self) -> str:
        return cast(str, self._send(operations.metrics()))

    def get_approval_card(self) -> str:
        return cast(str, self._send(operations.get_approval_card()))

    def get_openapi(self) -> str:
        return cast(str, self._send(operations.get_openapi()))
