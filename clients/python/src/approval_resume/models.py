"""The wire shapes of openapi.yaml as `TypedDict`s and `Literal`s, named as the spec names its schemas.

Why TypedDicts: a body is sent and an answer read as the JSON it is, with no copy into objects and no runtime
dependency, while a type checker still checks every member name and type. Transcripts (messages, items, contents)
stay plain JSON objects: the service keeps them whole (docs/design.md §14), so the client must not narrow or rebuild
them. Enums are `Literal`s: a value the service adds later still arrives as the string it is.

tests/python-client/test_spec.py holds these names, members and enums to openapi.yaml, with no departure.
"""

from typing import Any, Literal, NotRequired, TypedDict, cast

JsonObject = dict[str, Any]
"""A JSON object passed through as it is: a message, an item, a content, a block."""

# Enums (components/schemas).
DecidedBy = Literal["run_owner", "other_user", "unknown"]
DenialReason = Literal["variant", "skip"]
Outcome = Literal["ok", "failed", "denied", "not_permitted", "interrupted", "expired"]
Effect = Literal["read", "write"]
Executor = Literal["service", "worker"]
"""Who runs an approved call: the service's configured HTTP executor, or the worker, which posts its result
(docs/design.md §15)."""
RunStatus = Literal["waiting_for_approval", "resuming", "released", "resumed", "cancelled", "completed"]
PrivacyLevel = Literal["none", "metadata", "redacted", "full"]
Scope = Literal[
    "runs:write",
    "runs:read",
    "users:write",
    "decisions:write",
    "decisions:anonymous",
    "approvals:read",
    "metrics:read",
    "events:read",
    "webhooks:write",
]
EventType = Literal[
    "run.waiting",
    "run.released",
    "run.resumed",
    "run.expired",
    "run.cancelled",
    "run.completed",
    "rule.created",
    "rule.revoked",
]
ModelInputFormat = Literal["openai-chat", "anthropic", "openai-responses", "gemini"]
RuleScope = Literal["run", "owner"]
"""A remembered decision's reach (docs/design.md §18): `run`, the later turns of one run; `owner`, the owner's runs of
one tool until the rule's `expires_at`."""
RuleVerdict = Literal["approve", "deny"]
NotifySkipReason = Literal["unknown_user", "disabled", "may_not_decide", "no_email"]
"""Why a person named in `notify` gets no mail for the turn (docs/design.md §20)."""
ApprovalPageAction = Literal["approve", "approve_for_conversation", "deny", "never_in_conversation"]

ChatMessage = JsonObject
"""An OpenAI chat message, kept as it came (open in the spec: any other member is kept)."""
ToolCall = JsonObject
ToolName = str
"""`^[A-Za-z0-9_.-]{1,128}$`, MCP's rule (the gate's `github.create_issue`); the service refuses other names. A name
outside the model providers' `^[A-Za-z0-9_-]{1,64}$` answers only in the run's own format."""
ApprovableTools = list[ToolName] | None
RunSource = str
"""`^[A-Za-z0-9_.:-]{1,64}$`: where a run came from (`mcp:github`, `chat`, `ai-tasks`), shown in its view, the
inbox, its events and its approval mail (docs/design.md §2)."""
NativeEntry = JsonObject
"""An entry of a transcript registered in a provider's format (docs/design.md §14), kept by the service as it came."""
NativeSystem = str | list[NativeEntry]
"""Anthropic's `system`: a string or text blocks."""


# Users.
class PutUser(TypedDict):
    username: str
    is_admin: bool
    can_approve_others: bool
    disabled: bool
    approvable_tools: NotRequired[ApprovableTools]
    #: A bare address (`local@domain`) for the mail of `notify` (docs/design.md §20); absent or `None`: no mail.
    email: NotRequired[str | None]


class UserView(TypedDict):
    uid: int
    username: str
    is_admin: bool
    can_approve_others: bool
    disabled: bool
    approvable_tools: ApprovableTools
    email: str | None
    created_at: str
    updated_at: str


# Runs.
class DeclaredTool(TypedDict):
    name: str
    effect: Effect
    #: `worker`: an approved call is released to the worker, which posts its result (`post_results`).
    executor: NotRequired[Executor]
    #: `False`: a verdict that edits the arguments is refused 422 `not_editable` (the loop cannot run edits).
    editable: NotRequired[bool]


class RegisterRun(TypedDict):
    """A suspended run. `format` picks the transcript's members (docs/design.md §14): `openai-chat` (the default)
    `messages`; `anthropic` `system?` and `messages`; `openai-responses` `instructions?` and `input`; `gemini`
    `system_instruction?` and `contents`."""

    id: str
    owner_uid: int
    messages: NotRequired[list[ChatMessage]]
    tools: NotRequired[list[DeclaredTool]]
    privacy_level: NotRequired[PrivacyLevel]
    require_second_approver: NotRequired[bool]
    expires_at: NotRequired[str]
    approval_ttl_secs: NotRequired[int]
    format: NotRequired[ModelInputFormat]
    system: NotRequired[NativeSystem]
    instructions: NotRequired[str]
    input: NotRequired[list[NativeEntry]]
    system_instruction: NotRequired[NativeEntry]
    contents: NotRequired[list[NativeEntry]]
    #: The worker's state (DESIGN.md §15): any JSON, given back only by `get_run(..., include_worker_state=True)`.
    worker_state: NotRequired[Any]
    #: The people to mail a link when the turn waits (docs/design.md §20); the answer's `notify` says who is.
    notify: NotRequired["Notify"]
    #: Where the run came from; other labels are refused 422 `invalid_source`.
    source: NotRequired[RunSource]


class AppendTurn(TypedDict):
    """What followed the resumed model input, in the run's format, ending with the next turn that waits."""

    messages: NotRequired[list[ChatMessage]]
    expires_at: NotRequired[str]
    approval_ttl_secs: NotRequired[int]
    input: NotRequired[list[NativeEntry]]
    contents: NotRequired[list[NativeEntry]]
    #: The worker's state at this turn: replaces the run's; a turn without one leaves the run without one.
    worker_state: NotRequired[Any]
    #: The people to mail a link when the new turn waits, as at registration.
    notify: NotRequired["Notify"]


class DecidingRule(TypedDict):
    """While the turn waits, the remembered decision that would decide a pending call now; never its arguments."""

    id: str
    scope: RuleScope
    verdict: RuleVerdict
    reason: DenialReason | None
    created_by: int
    created_at: str
    expires_at: str | None


class PendingCall(TypedDict):
    """`arguments` always reaches an API key; a decision token only where the run's privacy level shows payloads."""

    id: str
    name: str
    arguments: NotRequired[str]
    effect: Effect
    executor: Executor
    editable: bool
    #: While the turn waits, the rule that would decide this call now; absent when none would.
    rule: NotRequired[DecidingRule]


class TurnView(TypedDict):
    index: int
    digest: str
    pending_calls: list[PendingCall]


class CallVerdictView(TypedDict):
    call_id: str
    approved: bool
    reason: DenialReason | None
    edited: bool
    #: The remembered decision that gave this verdict; absent when a person posted it.
    rule_id: NotRequired[str]


class DecisionView(TypedDict):
    approved: bool | None
    decided_by: DecidedBy
    decider_uid: int | None
    reason: DenialReason | None
    turn_digest: str
    decided_at: str
    calls: list[CallVerdictView]


class ReleasedResult(TypedDict):
    """The worker's result of a released call, as posted; `content` is absent to a decision token where the run's
    privacy level (`metadata`, `none`) hides payloads."""

    content: NotRequired[str]
    is_error: bool


class ReleasedCall(TypedDict):
    """A call released to the worker (docs/design.md §15): run it with `arguments` (the edited ones where
    `edited`), once, then post its result; `result` is present once it has been posted."""

    call_id: str
    tool: str
    arguments: NotRequired[str]
    edited: bool
    result: NotRequired[ReleasedResult]


class RunView(TypedDict):
    id: str
    owner_uid: int
    status: RunStatus
    privacy_level: PrivacyLevel
    format: ModelInputFormat
    require_second_approver: bool
    expires_at: str | None
    turn: TurnView
    decision: NotRequired[DecisionView]
    #: The current turn's results so far (every call's once resumed); absent while the turn waits. A registration
    #: whose turn remembered decisions decided answers with them (docs/design.md §18).
    results: NotRequired[list["ToolResult"]]
    #: The current turn's calls released to the worker; present whenever it has any.
    released_calls: NotRequired[list[ReleasedCall]]
    created_at: str
    updated_at: str
    #: Only from `get_run(..., include_worker_state=True)` with an API key; `None` when the run has none.
    worker_state: NotRequired[Any]
    #: Only in the answer of a registration or new turn that named `notify`, when its turn waits.
    notify: NotRequired["NotifyOutcome"]
    #: The run's label, absent when it has none.
    source: NotRequired[RunSource]


# Approval links and mail (docs/design.md §20).
Notify = list[int]
"""The uids to mail a link of their own when the turn waits: at most 10."""


class NotifySkipped(TypedDict):
    uid: int
    reason: NotifySkipReason


class NotifyOutcome(TypedDict):
    """Whose mail is queued (sent after the commit), and why each other named person gets none."""

    queued: list[int]
    skipped: list[NotifySkipped]


class MakeLink(TypedDict):
    uid: int


class ApprovalLink(TypedDict):
    """A link with which `uid` decides the waiting turn from the service's page; `url` is shown only in this answer
    and decides as that person: hand it to them only, never where a model can read it."""

    id: str
    url: str
    expires_at: str


class ApprovalPageForm(TypedDict):
    """What the page's own form posts (a person's browser, not this client: the link is their credential)."""

    nonce: str
    action: ApprovalPageAction


# Decisions.
class CallVerdictBody(TypedDict):
    call_id: str
    approved: bool
    reason: NotRequired[DenialReason | None]
    arguments: NotRequired[str | None]
    #: Remember this verdict as a rule (docs/design.md §18); refused 422 `remember_edited` beside edited arguments.
    remember: NotRequired[RuleScope]


class DecisionBody(TypedDict):
    """One of two forms: the whole turn (`approved`, `reason` on a denial) or a verdict per call (`calls`).
    `remember` (whole-turn form) makes every call's verdict a rule; `owner` scope needs `remember_until`."""

    approved: NotRequired[bool]
    decider_uid: NotRequired[int | None]
    turn_digest: str
    reason: NotRequired[DenialReason | None]
    calls: NotRequired[list[CallVerdictBody]]
    remember: NotRequired[RuleScope]
    remember_until: NotRequired[str]


class PostedResult(TypedDict):
    """The worker's result of one released call."""

    call_id: str
    content: str
    is_error: bool


class PostResults(TypedDict):
    #: The poster's live claim (`claim`); without one the service answers 409 `claim_required`.
    claim_id: NotRequired[str]
    results: list[PostedResult]


class ClaimRun(TypedDict):
    """Empty for a new claim; `claim_id` renews that claim (it must be the live one)."""

    claim_id: NotRequired[str]


class Claim(TypedDict):
    """A lease on a released turn (docs/design.md §15): while it lives, no other worker may claim the run or post its
    results. Renew it before `until` (RFC 3339, the database's clock) while a tool runs long."""

    claim_id: str
    until: str
    released_calls: list[ReleasedCall]


class ToolResult(TypedDict):
    """`content` always reaches an API key; to a decision token where the run's privacy level (`metadata`, `none`)
    hides it, it is absent when it holds what a tool or worker answered or an edit note."""

    call_id: str
    tool: str
    outcome: Outcome
    is_error: bool
    content: NotRequired[str]
    edited: bool


# The resumed model input: the transcript's own members are passed through as JSON (docs/design.md §14).
class OpenAiChatInput(TypedDict):
    format: Literal["openai-chat"]
    messages: list[ChatMessage]


class AnthropicInput(TypedDict):
    format: Literal["anthropic"]
    system: NotRequired[NativeSystem]
    messages: list[JsonObject]


class OpenAiResponsesInput(TypedDict):
    format: Literal["openai-responses"]
    instructions: NotRequired[str]
    input: list[JsonObject]


class GeminiInput(TypedDict):
    format: Literal["gemini"]
    system_instruction: NotRequired[NativeEntry]
    contents: list[NativeEntry]


ModelInput = OpenAiChatInput | AnthropicInput | OpenAiResponsesInput | GeminiInput


class DecisionAnswer(TypedDict):
    """`format` is the run's own; `model_input` is in the one asked for, and absent to a decision token where the
    run's privacy level (`metadata`, `none`) hides it."""

    run_id: str
    status: RunStatus
    format: ModelInputFormat
    decision: DecisionView
    results: list[ToolResult]
    #: The calls the decision released to the worker; `model_input` is absent until their results are posted.
    released_calls: NotRequired[list[ReleasedCall]]
    model_input: NotRequired[ModelInput]


# The approvals inbox.
class InboxCall(TypedDict):
    id: str
    name: str
    effect: Effect
    approvable: bool
    arguments: NotRequired[str]
    arguments_omitted: NotRequired[bool]
    executor: Executor
    editable: bool
    rule: NotRequired[DecidingRule]


class InboxTurn(TypedDict):
    index: int
    digest: str
    pending_calls: list[InboxCall]


class InboxItem(TypedDict):
    expires_at: str | None
    run_id: str
    owner_uid: int
    privacy_level: PrivacyLevel
    format: ModelInputFormat
    require_second_approver: bool
    created_at: str
    turn: InboxTurn
    #: The run's label, absent when it has none.
    source: NotRequired[RunSource]


class InboxPage(TypedDict):
    items: list[InboxItem]
    next_cursor: str | None


# A run's audit records.
class ApprovalCall(TypedDict):
    call_id: str
    approved: bool
    reason: DenialReason | None
    edited: bool
    arguments_sha256: str | None
    #: The remembered decision that gave this verdict; absent when a person posted it.
    rule_id: NotRequired[str]
    #: The scope the decision asked this verdict remembered in; absent when it asked none.
    remember: NotRequired[RuleScope]


class ApprovalEvent(TypedDict):
    turn_index: int
    approved: bool | None
    decider_uid: int | None
    decided_by: DecidedBy
    reason: DenialReason | None
    turn_digest: str
    client_name: str
    credential: Literal["api_key", "token"]
    token_kid: str | None
    decided_at: str
    calls: list[ApprovalCall]


class Expiry(TypedDict):
    turn_index: int
    expires_at: str
    expired_at: str


class ToolEvent(TypedDict):
    turn_index: int
    position: int
    call_id: str
    tool: str
    outcome: Outcome
    is_error: bool
    decided_by: DecidedBy
    privacy_level: PrivacyLevel
    arguments_bytes: int
    result_bytes: int
    arguments: str | None
    result: str | None
    started_at: str | None
    finished_at: str | None
    recorded_at: str


class EventsView(TypedDict):
    run_id: str
    approval_events: list[ApprovalEvent]
    tool_events: list[ToolEvent]
    expiries: list[Expiry]


# Events: the feed and webhooks (docs/design.md §10).
class EventTurn(TypedDict):
    index: int
    digest: str


class EventDecision(TypedDict):
    approved: bool | None
    decided_by: DecidedBy
    decider_uid: int | None


class EventData(TypedDict):
    run_id: str
    tenant: str
    status: RunStatus
    format: ModelInputFormat
    turn: EventTurn
    decision: NotRequired[EventDecision]
    outcomes: NotRequired[dict[Outcome, int]]
    #: `run.released` only: the ids of the calls released to the worker.
    released_call_ids: NotRequired[list[str]]
    #: The run's label, absent when it has none.
    source: NotRequired[RunSource]


class RuleEventData(TypedDict):
    """The data of `rule.created` and `rule.revoked`: never the rule's arguments; no `run_id` for `owner` scope."""

    rule_id: str
    tenant: str
    scope: RuleScope
    run_id: NotRequired[str]
    owner_uid: int
    tool: str
    verdict: RuleVerdict
    created_by: int
    revoked_by: NotRequired[int]


class Event(TypedDict):
    """One event, as the feed lists it and as a webhook's body: ids and metadata only. `data` is `RuleEventData` for
    the `rule.*` types, `EventData` for the `run.*` ones (`run_data` tells them apart for a type checker)."""

    id: str
    type: EventType
    timestamp: str
    data: EventData | RuleEventData


class EventsPage(TypedDict):
    events: list[Event]
    next_cursor: str


class CreateWebhook(TypedDict):
    url: str
    event_types: NotRequired[list[EventType] | None]


class WebhookSubscription(TypedDict):
    id: str
    tenant: str
    url: str
    event_types: list[EventType]
    state: Literal["active", "failing"]
    attempts: int
    failing_since: str | None
    last_error: str | None
    next_attempt_at: str
    delivered_total: int
    backlog: int
    backlog_capped: bool
    previous_secret_expires_at: str | None
    created_at: str


class WebhookCreated(WebhookSubscription):
    """A subscription with its signing secret: the answer to its creation, or to a rotation of its secret."""

    secret: str


class RotateWebhookSecret(TypedDict):
    overlap_secs: NotRequired[int | None]


class WebhookSubscriptions(TypedDict):
    subscriptions: list[WebhookSubscription]


# Remembered decisions (docs/design.md §18).
class RunRuleBody(TypedDict):
    """A `run` scope rule: the run's later turns have their calls of `tool` (with exactly `arguments`, when given)
    decided at once. `created_by`: the author, required with a key, absent or the token's user with a token."""

    created_by: NotRequired[int | None]
    tool: ToolName
    arguments: NotRequired[JsonObject]
    verdict: RuleVerdict
    #: A deny rule's reason; `skip` for "never".
    reason: NotRequired[DenialReason]


class OwnerRuleBody(TypedDict):
    """An `owner` scope rule: every run of `owner_uid` has its calls of `tool` decided at once until `expires_at`
    (RFC 3339, at most the service's MAX_RULE_TTL_DAYS ahead). By the owner or an admin, with a key only."""

    owner_uid: int
    created_by: int
    expires_at: str
    tool: ToolName
    arguments: NotRequired[JsonObject]
    verdict: RuleVerdict
    reason: NotRequired[DenialReason]


class Rule(TypedDict):
    """A remembered decision; `live`: neither revoked nor expired. `arguments` is `None` for any call of the tool, or
    where the privacy level hides it from a decision token."""

    id: str
    scope: RuleScope
    run_id: str | None
    owner_uid: int
    tool: str
    arguments: str | None
    verdict: RuleVerdict
    reason: DenialReason | None
    created_by: int
    created_at: str
    expires_at: str | None
    revoked_at: str | None
    revoked_by: int | None
    live: bool


class RuleList(TypedDict):
    """Newest first, revoked and expired ones included."""

    rules: list[Rule]


def run_data(event: Event) -> EventData | None:
    """The data of a run's event (`run.*`), or `None` for a remembered decision's (`rule.*`, `RuleEventData`)."""
    if event["type"].startswith("rule."):
        return None
    return cast(EventData, event["data"])


# Errors (RFC 9457); errors.ApiError carries one.
class Problem(TypedDict):
    type: str
    title: str
    status: int
    detail: str
    #: With `claimed`: when the live claim lapses unless renewed (RFC 3339).
    until: NotRequired[str]
    #: Where the run is now, on `stale_turn`, `not_released` (from a results post or `claim`: `waiting_for_approval`,
    #: `resuming`: it may still release; from `claim` also `resumed`, `completed`: never) and `run_resumed`.
    run_status: NotRequired[RunStatus]
    code: str
    request_id: NotRequired[str]
