"""`AsyncClient`: the API of `Client` (client.py) for asyncio, over one `httpx.AsyncClient`; every method is
the same operation with the same arguments and answers, awaited. Agent frameworks run their loops on asyncio, so
their adapters use this one."""

import asyncio
from collections.abc import AsyncIterator, Iterable
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


class AsyncClient:
    """A client of one service, with one API key (its scopes decide which methods work)."""

    def __init__(
        self,
        base_url: str,
        key: str,
        *,
        timeout: float = 30.0,
        retry: RetryPolicy | None = None,
        headers: dict[str, str] | None = None,
        http: httpx.AsyncClient | None = None,
    ) -> None:
        """`http`: a client of your own (proxies, TLS settings, a mock transport); closed by you, not by `aclose`."""
        self._own_http = http is None
        self._http = http or httpx.AsyncClient(timeout=timeout)
        self._base_url = base_url.rstrip("/")
        self._headers = _transport.headers(key, headers)
        self._retry = retry or RetryPolicy()

    async def aclose(self) -> None:
        if self._own_http:
            await self._http.aclose()

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.aclose()

    async def _send(self, request: Request) -> Any:
        attempt = 1
        while True:
            try:
                response = await self._http.request(
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
            await asyncio.sleep(wait)
            attempt += 1

    # Users.
    async def put_user(self, uid: int, user: PutUser) -> UserView:
        return cast(UserView, await self._send(operations.put_user(uid, user)))

    # Runs.
    async def register_run(self, run: RegisterRun) -> RunView:
        """201 new, or 200 for the same body again; another body under the id raises 409 `run_exists`."""
        return cast(RunView, await self._send(operations.register_run(run)))

    async def get_run(self, run_id: str, include_worker_state: bool = False) -> RunView:
        """`include_worker_state`: the answer carries the run's `worker_state`, as the worker sent it (`None`: none)."""
        return cast(RunView, await self._send(operations.get_run(run_id, include_worker_state)))

    async def append_turn(self, run_id: str, turn: AppendTurn) -> RunView:
        return cast(RunView, await self._send(operations.append_turn(run_id, turn)))

    async def list_events(self, run_id: str) -> EventsView:
        """The run's audit records (approval and tool events), not the feed (`follow_events`)."""
        return cast(EventsView, await self._send(operations.list_events(run_id)))

    async def claim(self, run_id: str, claim_id: str | None = None) -> Claim:
        """Claims the run's released calls before the worker runs any (docs/design.md §15): a new claim, or with
        `claim_id` the renewal of that live claim (before its `until`, while a tool runs long). Another worker's live
        claim raises `ClaimedError` (with `until`); a renewal after `until` raises `ClaimLapsedError` (the service
        ended the unposted calls as interrupted); a run not released raises `ApiError` 409 `not_released`."""
        body: ClaimRun = {} if claim_id is None else {"claim_id": claim_id}
        return cast(Claim, await self._send(operations.claim(run_id, body)))

    async def post_results(self, run_id: str, claim_id: str | None, results: Iterable[PostedResult]) -> RunView:
        """The worker's results of calls released to it, some or all at a time, under its live claim (`claim`). The
        same result again is answered 200 (nothing written) whatever the claim's state; once every released call has
        one, the run is `resumed`. `claim_id=None` sends none: the service answers `ClaimRequiredError` (409
        `claim_required`) to anything but such a repeat."""
        body: PostResults = {"results": list(results)}
        if claim_id is not None:
            body["claim_id"] = claim_id
        return cast(RunView, await self._send(operations.post_results(run_id, body)))

    # Approval links (docs/design.md §20).
    async def create_link(self, run_id: str, uid: int) -> ApprovalLink:
        """A link with which `uid` (who must be allowed to decide the run) decides its waiting turn from the service's
        page; the service needs PUBLIC_URL. The `url` is shown only in this answer and decides as `uid`, once: hand it
        to that person only, never where a model can read it."""
        return cast(ApprovalLink, await self._send(operations.create_link(run_id, {"uid": uid})))

    async def revoke_link(self, run_id: str, link_id: str) -> None:
        """The link decides nothing from now on; revoking it again answers the same."""
        await self._send(operations.revoke_link(run_id, link_id))

    async def cancel_run(self, run_id: str) -> RunView:
        return cast(RunView, await self._send(operations.cancel_run(run_id)))

    async def complete_run(self, run_id: str) -> RunView:
        return cast(RunView, await self._send(operations.complete_run(run_id)))

    # Decisions.
    async def decide(self, run_id: str, body: DecisionBody, *, format: ModelInputFormat | None = None) -> DecisionAnswer:
        return cast(DecisionAnswer, await self._send(operations.decide(run_id, body, format)))

    async def approve(
        self, run_id: str, turn_digest: str, decider_uid: int | None, *, format: ModelInputFormat | None = None
    ) -> DecisionAnswer:
        return await self.decide(run_id, verdicts.whole_turn(turn_digest, decider_uid, True), format=format)

    async def deny(
        self,
        run_id: str,
        turn_digest: str,
        decider_uid: int | None,
        reason: DenialReason | None = None,
        *,
        format: ModelInputFormat | None = None,
    ) -> DecisionAnswer:
        return await self.decide(run_id, verdicts.whole_turn(turn_digest, decider_uid, False, reason), format=format)

    async def decide_calls(
        self,
        run_id: str,
        turn_digest: str,
        decider_uid: int | None,
        calls: Iterable[CallVerdictBody],
        *,
        format: ModelInputFormat | None = None,
    ) -> DecisionAnswer:
        """A verdict per call (`verdicts.approve_call`, `verdicts.deny_call`)."""
        return await self.decide(run_id, verdicts.per_call(turn_digest, decider_uid, calls), format=format)

    async def get_model_input(self, run_id: str, *, format: ModelInputFormat | None = None) -> ModelInput:
        return cast(ModelInput, await self._send(operations.get_model_input(run_id, format)))

    # Remembered decisions (docs/design.md §18).
    async def make_run_rule(self, run_id: str, rule: RunRuleBody) -> Rule:
        """A `run` scope rule: the run's later turns have their calls of the tool decided at once, as its author
        would (checked again at each use). A repeat makes a second rule."""
        return cast(Rule, await self._send(operations.make_run_rule(run_id, rule)))

    async def list_run_rules(self, run_id: str) -> RuleList:
        """The run's `run` scope rules, newest first, revoked and expired ones included (`live` says which decide)."""
        return cast(RuleList, await self._send(operations.list_run_rules(run_id)))

    async def make_owner_rule(self, rule: OwnerRuleBody) -> Rule:
        """An `owner` scope rule: the owner's runs of the tool are decided at once until its `expires_at`."""
        return cast(Rule, await self._send(operations.make_owner_rule(rule)))

    async def list_owner_rules(self, owner_uid: int) -> RuleList:
        """Every rule of the owner's runs (both scopes), newest first, revoked and expired ones included."""
        return cast(RuleList, await self._send(operations.list_owner_rules(owner_uid)))

    async def revoke_rule(self, rule_id: str, revoked_by: int | None) -> Rule:
        """`revoked_by`: the backend user revoking it (its author, the owner or an admin), required with a key; `None`
        with a decision token. A turn registered after the answer never uses the rule; decisions made stay."""
        return cast(Rule, await self._send(operations.revoke_rule(rule_id, revoked_by)))

    # The approvals inbox.
    async def list_approvals(
        self,
        acting_uid: int,
        *,
        owner_uid: int | None = None,
        tool: str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> InboxPage:
        request = operations.list_approvals(acting_uid, owner_uid=owner_uid, tool=tool, limit=limit, cursor=cursor)
        return cast(InboxPage, await self._send(request))

    async def iter_approvals(
        self, acting_uid: int, *, owner_uid: int | None = None, tool: str | None = None, limit: int | None = None
    ) -> AsyncIterator[InboxItem]:
        """Every waiting run `acting_uid` may decide, newest first, page after page."""
        cursor: str | None = None
        while True:
            page = await self.list_approvals(acting_uid, owner_uid=owner_uid, tool=tool, limit=limit, cursor=cursor)
            for item in page["items"]:
                yield item
            cursor = page["next_cursor"]
            if cursor is None:
                return

    # Events.
    async def follow_events(self, after: str | None = None, *, wait: int = 0, limit: int | None = None) -> EventsPage:
        """One page of the tenant's events after the cursor `after`; `feed.Feed` follows it with a stored cursor."""
        return cast(EventsPage, await self._send(operations.follow_events(after, wait=wait, limit=limit)))

    async def list_webhooks(self) -> WebhookSubscriptions:
        return cast(WebhookSubscriptions, await self._send(operations.list_webhooks()))

    async def create_webhook(self, url: str, event_types: list[EventType] | None = None) -> WebhookCreated:
        """The subscription with its signing `secret`, shown this once: keep it for `webhooks.WebhookVerifier`."""
        body: CreateWebhook = {"url": url}
        if event_types is not None:
            body["event_types"] = event_types
        return cast(WebhookCreated, await self._send(operations.create_webhook(body)))

    async def remove_webhook(self, subscription_id: str) -> None:
        await self._send(operations.remove_webhook(subscription_id))

    async def rotate_webhook_secret(self, subscription_id: str, overlap_secs: int | None = None) -> WebhookCreated:
        """A new signing `secret`, shown this once; the old one signs beside it for `overlap_secs` (None: the service's
        WEBHOOK_SECRET_OVERLAP_SECS, 0: it retires at once), so receivers can switch meanwhile."""
        body: RotateWebhookSecret = {}
        if overlap_secs is not None:
            body["overlap_secs"] = overlap_secs
        return cast(WebhookCreated, await self._send(operations.rotate_webhook_secret(subscription_id, body)))

    # Ops.
    async def healthz(self) -> dict[str, str]:
        return cast(dict[str, str], await self._send(operations.healthz()))

    async def readyz(self) -> dict[str, str]:
        return cast(dict[str, str], await self._send(operations.readyz()))

    async def metrics(self) -> str:
        return cast(str, await self._send(operations.metrics()))

    async def get_approval_card(self) -> str:
        return cast(str, await self._send(operations.get_approval_card()))

    async def get_openapi(self) -> str:
        return cast(str, await self._send(operations.get_openapi()))
