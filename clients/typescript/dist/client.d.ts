import { type DecideOptions, type TurnDecideOptions, type Verdict } from "./decisions.js";
import { Feed, type FeedOptions } from "./feed.js";
import type { AppendTurn, ApprovalLink, ApprovalsQuery, CreateWebhook, DecisionAnswer, DecisionBody, DenialReason, EventsPage, EventsQuery, InboxItem, InboxPage, ModelInput, ModelInputFormat, OwnerRule, PostedResult, PutUser, RegisterRun, ReleasedCall, RunAudit, RotateWebhookSecret, Rule, RunRule, RunView, UserView, WebhookCreated, WebhookSubscription } from "./schemas.js";
export interface ClientOptions {
    /** Where the service listens, e.g. `http://127.0.0.1:8080`. */
    baseUrl: string;
    /**
     * An API key (`ar_…`, with the scopes `clients add` gave it), or a decision token (docs/design.md §13), which may
     * only read and decide its user's runs.
     */
    credential: string;
    /** Another fetch (a test double, a fetch with a proxy agent); globalThis.fetch when absent. */
    fetch?: (request: Request) => Promise<Response>;
    /**
     * Milliseconds a request may take before it is aborted ({@link DEFAULT_TIMEOUT_MS} when absent; `null`: no
     * limit). A feed read adds the seconds it asks the service to wait.
     */
    timeoutMs?: number | null;
}
/** How long a request may take unless the client or the call says otherwise: 30 s. */
export declare const DEFAULT_TIMEOUT_MS = 30000;
/** Options every call takes. */
export interface CallOptions {
    signal?: AbortSignal;
    /** This call's limit in milliseconds, in place of the client's (`null`: none). */
    timeoutMs?: number | null;
}
/**
 * A claim on a run's released calls (docs/design.md §15): the worker that holds it runs them, and posts their results
 * with its `claim_id`, until `until` (RFC 3339, the service's clock) unless it renews it.
 */
export interface Claim {
    claim_id: string;
    until: string;
    released_calls: ReleasedCall[];
}
export declare class ApprovalResumeClient {
    #private;
    constructor(options: ClientOptions);
    /** Creates or replaces a backend user (scope `users:write`). */
    putUser(uid: number, user: PutUser, options?: CallOptions): Promise<UserView>;
    /**
     * Registers a run suspended on its last assistant turn (scope `runs:write`): 201, or 200 with the run for the
     * same body again; another body under a taken id throws 409 `run_exists`. Draw run ids at random (UUID v4). With
     * `format` (docs/design.md §14) the run is registered in a provider's own format with that format's members
     * (`system` + `messages`, `instructions` + `input`, `system_instruction` + `contents`), kept byte for byte.
     */
    registerRun(run: RegisterRun, options?: CallOptions): Promise<RunView>;
    /**
     * The run, its current turn (with the digest a decision names) and that turn's decision (scope `runs:read`).
     * `includeWorkerState`: with the run's `worker_state` as the worker sent it (`null`: none; API keys only).
     */
    getRun(id: string, options?: CallOptions & {
        includeWorkerState?: boolean;
    }): Promise<RunView>;
    /**
     * Posts a decision body as it is (scope `decisions:write`, or `decisions:anonymous` with `decider_uid: null`).
     * {@link approveTurn}, {@link denyTurn} and {@link decideCalls} build it for you.
     */
    decide(id: string, body: DecisionBody, options?: CallOptions & {
        format?: ModelInputFormat;
    }): Promise<DecisionAnswer>;
    /**
     * Approves every pending call of the turn named by its digest. `remember: "run"` also allows each of its tools
     * for the run's later turns ("allow for this conversation"; docs/design.md §18), `"owner"` for the owner's runs
     * until `rememberUntil`.
     */
    approveTurn(id: string, turnDigest: string, options?: TurnDecideOptions): Promise<DecisionAnswer>;
    /**
     * Denies the whole turn; `reason` `variant` asks for another version, `skip` not to propose it again.
     * `remember: "run"` also denies each of its tools in the run's later turns ("never in this conversation").
     */
    denyTurn(id: string, turnDigest: string, options?: TurnDecideOptions & {
        reason?: DenialReason;
    }): Promise<DecisionAnswer>;
    /**
     * A verdict per call: every pending call exactly once, approved (as proposed or edited) or denied, each
     * remembered as a rule where it says `remember` (`rememberUntil`: the end of the `owner` scope ones).
     */
    decideCalls(id: string, turnDigest: string, verdicts: readonly Verdict[], options?: DecideOptions): Promise<DecisionAnswer>;
    /**
     * Remembers a decision for the later turns of a run (docs/design.md §18): a `run` scope rule, by which the turns
     * registered after it have their calls of `tool` (with exactly `arguments`, when given) approved or denied at
     * once, as `created_by` would decide them; answered 201 with the rule. Scope `decisions:write` with
     * `created_by`; a decision token makes it as its user. Refused as the decision it stands for would be (403
     * `unknown_decider`, `decider_not_permitted`, `second_approver_required` for the owner's approval under four-eyes,
     * `tool_not_approvable`…). Making it twice makes two rules.
     */
    makeRunRule(runId: string, rule: RunRule, options?: CallOptions): Promise<Rule>;
    /**
     * Remembers a decision for every run of `owner_uid` of one tool until `expires_at` (an `owner` scope rule; at most
     * `MAX_RULE_TTL_DAYS` ahead, else 422 `rule_ttl_too_long`), by the owner or an admin (else 403
     * `rule_not_permitted`). Scope `decisions:write`; a decision token may not (403 `token_not_allowed`).
     */
    makeOwnerRule(rule: OwnerRule, options?: CallOptions): Promise<Rule>;
    /**
     * The run's `run` scope rules, newest first, revoked and expired ones included (`live` says which decide). Scope
     * `runs:read` or `decisions:write`, or a decision token of a user who may decide the run.
     */
    listRunRules(runId: string, options?: CallOptions): Promise<Rule[]>;
    /** Every rule of the owner's runs (both scopes), newest first, revoked and expired ones included. */
    listOwnerRules(ownerUid: number, options?: CallOptions): Promise<Rule[]>;
    /**
     * Revokes a rule, answered with it revoked (one revoked already: as it stands). By its author, the owner (the
     * run's, for `run` scope) or an admin, named by `revokedBy` with a key (else 403 `rule_not_revocable`); a
     * decision token revokes its own user's rules (any other: 404). A turn registered after the answer never uses
     * it; the decisions it made stay.
     */
    revokeRule(ruleId: string, options?: CallOptions & {
        revokedBy?: number;
    }): Promise<Rule>;
    /**
     * The last resumed model input (scope `runs:read`), in `format` or else the run's own; 409 `not_resumed` before a
     * decision, 422 `format_not_representable` for a format the transcript holds something it cannot say.
     */
    modelInput(id: string, options?: CallOptions & {
        format?: ModelInputFormat;
    }): Promise<ModelInput>;
    /**
     * Suspends a resumed run again (scope `runs:write`): what followed the model input, ending with the next
     * assistant turn; the run waits with a new digest.
     */
    appendTurn(id: string, turn: AppendTurn, options?: CallOptions): Promise<RunView>;
    /**
     * Posts the results of released calls (docs/design.md §15; scope `runs:write`): the calls of tools declared
     * `executor: "worker"` that a decision approved, which the worker ran itself, some or all at a time. The run
     * answers `released` while a released call still lacks its result, `resumed` once none does. The same result
     * again is accepted (a replay, whatever the claim's state); a different one for a call that has one throws 409
     * `result_conflict`, a call that was not released 422 `call_not_released`. `claimId`: the live claim of this worker
     * ({@link claim}); without one 409 {@link ClaimRequiredError}, under another's {@link ClaimedError}, under a
     * lapsed one {@link ClaimLapsedError}.
     */
    postResults(id: string, results: readonly PostedResult[], options?: CallOptions & {
        claimId?: string;
    }): Promise<RunView>;
    /**
     * Claims a released run's calls for this worker (docs/design.md §15; scope `runs:write`): the answer's
     * `claim_id` posts their results until `until`. With `claimId`, renews that claim (before `until`; a long tool).
     * Refusals are 409: {@link ClaimedError} (another worker holds the run, with its `until`), {@link ClaimLapsedError}
     * (this claim lapsed: its unposted calls were interrupted), `not_released` (the run waits or resumes, with its
     * `status` in the problem) or `run_cancelled`.
     */
    claim(id: string, claimId?: string, options?: CallOptions): Promise<Claim>;
    /**
     * Makes an approval link (docs/design.md §20) for `uid`, who must be allowed to decide the run (docs/design.md §4),
     * to decide its waiting turn from the service's page (scope `decisions:write`; the service needs `PUBLIC_URL`).
     * The answer's `url` is shown only here and decides as `uid`, once: hand it to that person only, never where a
     * model can read it.
     */
    createLink(id: string, uid: number, options?: CallOptions): Promise<ApprovalLink>;
    /** Revokes an approval link (scope `decisions:write`): it decides nothing from now on. Again: the same. */
    revokeLink(id: string, linkId: string, options?: CallOptions): Promise<void>;
    /** Abandons a run (scope `runs:write`). */
    cancelRun(id: string, options?: CallOptions): Promise<RunView>;
    /** Ends a resumed run (scope `runs:write`). */
    completeRun(id: string, options?: CallOptions): Promise<RunView>;
    /**
     * `GET /v1/runs/{id}/events`, the audit record of a run: its approval and tool events and the turns that expired
     * (scope `runs:read`). Not the feed ({@link events}).
     */
    runEvents(id: string, options?: CallOptions): Promise<RunAudit>;
    /**
     * One page of the approvals inbox (scope `approvals:read`): the runs waiting for approval that `acting_uid` may
     * decide, newest first; pass `next_cursor` back as `cursor` until it is `null`.
     */
    approvals(query: ApprovalsQuery, options?: CallOptions): Promise<InboxPage>;
    /** Every item of the inbox, page after page. */
    allApprovals(query: Omit<ApprovalsQuery, "cursor">, options?: CallOptions): AsyncGenerator<InboxItem>;
    /** Subscribes a URL to the tenant's events (scope `webhooks:write`); the answer's `secret` is shown this once. */
    createWebhook(subscription: CreateWebhook, options?: CallOptions): Promise<WebhookCreated>;
    /** The tenant's subscriptions with their delivery state (scope `webhooks:write`); never their secrets. */
    listWebhooks(options?: CallOptions): Promise<WebhookSubscription[]>;
    /**
     * Gives a subscription a new signing secret (scope `webhooks:write`), in the answer's `secret` this once. The old
     * one signs beside it for `overlap_secs` (absent: the service's WEBHOOK_SECRET_OVERLAP_SECS; 0: it retires at
     * once), so receivers can switch meanwhile; 404 `not_found` for a subscription the tenant does not have.
     */
    rotateWebhookSecret(id: string, rotation?: RotateWebhookSecret, options?: CallOptions): Promise<WebhookCreated>;
    /** Removes a subscription (scope `webhooks:write`); 404 `not_found` for one the tenant does not have. */
    removeWebhook(id: string, options?: CallOptions): Promise<void>;
    /**
     * One read of the feed (scope `events:read`): the events after `after`, waiting up to `wait` seconds for one.
     * {@link feed} follows it for you.
     */
    events(query?: EventsQuery, options?: CallOptions): Promise<EventsPage>;
    /** The feed as an async iterable that keeps its place in `options.store` (see {@link Feed}). */
    feed(options?: FeedOptions): Feed;
    /** `GET /healthz`: the process answers. */
    healthz(options?: CallOptions): Promise<{
        status: "ok";
    }>;
    /** `GET /readyz`: the database is reachable and migrated; 503 `not_migrated` or `database_unavailable` if not. */
    readyz(options?: CallOptions): Promise<{
        status: "ready";
    }>;
    /** `GET /metrics` in the Prometheus text format (scope `metrics:read`). */
    metrics(options?: CallOptions): Promise<string>;
}
//# sourceMappingURL=client.d.ts.map