/**
 * The HTTP API of approval-resume (docs/design.md §8; openapi.yaml) over `fetch`, through openapi-fetch: every path,
 * parameter, body and answer is checked at compile time against the types generated from openapi.yaml, and every
 * non-2xx answer throws {@link ApiError}.
 * @module
 */
import createClient, { type Client } from "openapi-fetch";

import {
    type DecideOptions,
    type TurnDecideOptions,
    type Verdict,
    perCallBody,
    wholeTurnBody,
} from "./decisions.js";
import { ApiError } from "./errors.js";
import { Feed, type FeedOptions } from "./feed.js";
import type {
    AppendTurn,
    ApprovalLink,
    ApprovalsQuery,
    CreateWebhook,
    DecisionAnswer,
    DecisionBody,
    DenialReason,
    EventsPage,
    EventsQuery,
    InboxItem,
    InboxPage,
    ModelInput,
    ModelInputFormat,
    OwnerRule,
    PostedResult,
    PostResults,
    PutUser,
    RegisterRun,
    ReleasedCall,
    RunAudit,
    RotateWebhookSecret,
    Rule,
    RunRule,
    RunView,
    UserView,
    WebhookCreated,
    WebhookSubscription,
    components,
    paths,
} from "./schemas.js";

type Schemas = components["schemas"];

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
export const DEFAULT_TIMEOUT_MS = 30_000;

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

/** What openapi-fetch answers: the parsed body of a success, or of a refusal, and the response. */
type Answer<T> = { data: T; error?: never; response: Response } | { data?: never; error: unknown; response: Response };

export class ApprovalResumeClient {
    readonly #api: Client<paths>;
    readonly #baseUrl: string;
    readonly #credential: string;
    readonly #fetch: (request: Request) => Promise<Response>;
    readonly #timeoutMs: number | null;

    constructor(options: ClientOptions) {
        this.#baseUrl = options.baseUrl.replace(/\/+$/, "");
        this.#credential = options.credential;
        this.#fetch = options.fetch ?? ((request) => globalThis.fetch(request));
        this.#timeoutMs = options.timeoutMs === undefined ? DEFAULT_TIMEOUT_MS : options.timeoutMs;
        this.#api = createClient<paths>({
            baseUrl: this.#baseUrl,
            headers: { authorization: `Bearer ${options.credential}`, accept: "application/json" },
            fetch: (request) => this.#send(request),
        });
    }

    /**
     * Every request goes out here. Redirects are not followed: a 3xx is answered as it came (an {@link ApiError}),
     * since following one would send the credential and the body (a decision, results, worker state) to wherever the
     * `Location` points. A request that outlasts its timeout is aborted (fetch's own `TimeoutError`).
     */
    #send(request: Request): Promise<Response> {
        return this.#fetch(new Request(request, { redirect: "manual" }));
    }

    /** The call's signal joined with its timeout (the call's `timeoutMs`, else the client's; `extraMs` added). */
    #signal(options: CallOptions, extraMs = 0): { signal?: AbortSignal } {
        const limit = options.timeoutMs === undefined ? this.#timeoutMs : options.timeoutMs;
        const signals = [
            ...(options.signal === undefined ? [] : [options.signal]),
            ...(limit === null ? [] : [AbortSignal.timeout(limit + extraMs)]),
        ];
        return signals.length === 0 ? {} : { signal: signals.length === 1 ? signals[0]! : AbortSignal.any(signals) };
    }

    /** Creates or replaces a backend user (scope `users:write`). */
    putUser(uid: number, user: PutUser, options: CallOptions = {}): Promise<UserView> {
        return unwrap(
            this.#api.PUT("/v1/users/{uid}", { params: { path: { uid } }, body: user, ...this.#signal(options) }),
        );
    }

    /**
     * Registers a run suspended on its last assistant turn (scope `runs:write`): 201, or 200 with the run for the
     * same body again; another body under a taken id throws 409 `run_exists`. Draw run ids at random (UUID v4). With
     * `format` (docs/design.md §14) the run is registered in a provider's own format with that format's members
     * (`system` + `messages`, `instructions` + `input`, `system_instruction` + `contents`), kept byte for byte.
     */
    registerRun(run: RegisterRun, options: CallOptions = {}): Promise<RunView> {
        return unwrap(this.#api.POST("/v1/runs", { body: run, ...this.#signal(options) }));
    }

    /**
     * The run, its current turn (with the digest a decision names) and that turn's decision (scope `runs:read`).
     * `includeWorkerState`: with the run's `worker_state` as the worker sent it (`null`: none; API keys only).
     */
    getRun(id: string, options: CallOptions & { includeWorkerState?: boolean } = {}): Promise<RunView> {
        const { includeWorkerState, ...call } = options;
        const query = includeWorkerState === true ? { include: "worker_state" as const } : {};
        return unwrap(this.#api.GET("/v1/runs/{id}", { params: { path: { id }, query }, ...this.#signal(call) }));
    }

    /**
     * Posts a decision body as it is (scope `decisions:write`, or `decisions:anonymous` with `decider_uid: null`).
     * {@link approveTurn}, {@link denyTurn} and {@link decideCalls} build it for you.
     */
    decide(
        id: string,
        body: DecisionBody,
        options: CallOptions & { format?: ModelInputFormat } = {},
    ): Promise<DecisionAnswer> {
        const { format, ...call } = options;
        const query = format === undefined ? {} : { format };
        return unwrap(
            this.#api.POST("/v1/runs/{id}/decision", {
                params: { path: { id }, query },
                body,
                ...this.#signal(call),
            }),
        );
    }

    /**
     * Approves every pending call of the turn named by its digest. `remember: "run"` also allows each of its tools
     * for the run's later turns ("allow for this conversation"; docs/design.md §18), `"owner"` for the owner's runs
     * until `rememberUntil`.
     */
    approveTurn(id: string, turnDigest: string, options: TurnDecideOptions = {}): Promise<DecisionAnswer> {
        const body = wholeTurnBody(turnDigest, true, options.deciderUid, undefined, options);
        return this.decide(id, body, options);
    }

    /**
     * Denies the whole turn; `reason` `variant` asks for another version, `skip` not to propose it again.
     * `remember: "run"` also denies each of its tools in the run's later turns ("never in this conversation").
     */
    denyTurn(
        id: string,
        turnDigest: string,
        options: TurnDecideOptions & { reason?: DenialReason } = {},
    ): Promise<DecisionAnswer> {
        const body = wholeTurnBody(turnDigest, false, options.deciderUid, options.reason, options);
        return this.decide(id, body, options);
    }

    /**
     * A verdict per call: every pending call exactly once, approved (as proposed or edited) or denied, each
     * remembered as a rule where it says `remember` (`rememberUntil`: the end of the `owner` scope ones).
     */
    decideCalls(
        id: string,
        turnDigest: string,
        verdicts: readonly Verdict[],
        options: DecideOptions = {},
    ): Promise<DecisionAnswer> {
        return this.decide(id, perCallBody(turnDigest, verdicts, options.deciderUid, options.rememberUntil), options);
    }

    /**
     * Remembers a decision for the later turns of a run (docs/design.md §18): a `run` scope rule, by which the turns
     * registered after it have their calls of `tool` (with exactly `arguments`, when given) approved or denied at
     * once, as `created_by` would decide them; answered 201 with the rule. Scope `decisions:write` with
     * `created_by`; a decision token makes it as its user. Refused as the decision it stands for would be (403
     * `unknown_decider`, `decider_not_permitted`, `second_approver_required` for the owner's approval under four-eyes,
     * `tool_not_approvable`…). Making it twice makes two rules.
     */
    makeRunRule(runId: string, rule: RunRule, options: CallOptions = {}): Promise<Rule> {
        return unwrap(
            this.#api.POST("/v1/runs/{id}/rules", {
                params: { path: { id: runId } },
                // The open `arguments` of RunRule (see schemas.ts) is what the spec's body means.
                body: rule as Schemas["RunRuleBody"],
                ...this.#signal(options),
            }),
        );
    }

    /**
     * Remembers a decision for every run of `owner_uid` of one tool until `expires_at` (an `owner` scope rule; at most
     * `MAX_RULE_TTL_DAYS` ahead, else 422 `rule_ttl_too_long`), by the owner or an admin (else 403
     * `rule_not_permitted`). Scope `decisions:write`; a decision token may not (403 `token_not_allowed`).
     */
    makeOwnerRule(rule: OwnerRule, options: CallOptions = {}): Promise<Rule> {
        return unwrap(
            this.#api.POST("/v1/rules", { body: rule as Schemas["OwnerRuleBody"], ...this.#signal(options) }),
        );
    }

    /**
     * The run's `run` scope rules, newest first, revoked and expired ones included (`live` says which decide). Scope
     * `runs:read` or `decisions:write`, or a decision token of a user who may decide the run.
     */
    async listRunRules(runId: string, options: CallOptions = {}): Promise<Rule[]> {
        const list = await unwrap(
            this.#api.GET("/v1/runs/{id}/rules", { params: { path: { id: runId } }, ...this.#signal(options) }),
        );
        return list.rules;
    }

    /** Every rule of the owner's runs (both scopes), newest first, revoked and expired ones included. */
    async listOwnerRules(ownerUid: number, options: CallOptions = {}): Promise<Rule[]> {
        const list = await unwrap(
            this.#api.GET("/v1/rules", { params: { query: { owner_uid: ownerUid } }, ...this.#signal(options) }),
        );
        return list.rules;
    }

    /**
     * Revokes a rule, answered with it revoked (one revoked already: as it stands). By its author, the owner (the
     * run's, for `run` scope) or an admin, named by `revokedBy` with a key (else 403 `rule_not_revocable`); a
     * decision token revokes its own user's rules (any other: 404). A turn registered after the answer never uses
     * it; the decisions it made stay.
     */
    revokeRule(ruleId: string, options: CallOptions & { revokedBy?: number } = {}): Promise<Rule> {
        const { revokedBy, ...call } = options;
        const query = revokedBy === undefined ? {} : { revoked_by: revokedBy };
        return unwrap(
            this.#api.DELETE("/v1/rules/{id}", { params: { path: { id: ruleId }, query }, ...this.#signal(call) }),
        );
    }

    /**
     * The last resumed model input (scope `runs:read`), in `format` or else the run's own; 409 `not_resumed` before a
     * decision, 422 `format_not_representable` for a format the transcript holds something it cannot say.
     */
    modelInput(
        id: string,
        options: CallOptions & { format?: ModelInputFormat } = {},
    ): Promise<ModelInput> {
        const { format, ...call } = options;
        const query = format === undefined ? {} : { format };
        return unwrap(
            this.#api.GET("/v1/runs/{id}/model-input", {
                params: { path: { id }, query },
                ...this.#signal(call),
            }),
        );
    }

    /**
     * Suspends a resumed run again (scope `runs:write`): what followed the model input, ending with the next
     * assistant turn; the run waits with a new digest.
     */
    appendTurn(id: string, turn: AppendTurn, options: CallOptions = {}): Promise<RunView> {
        return unwrap(
            this.#api.POST("/v1/runs/{id}/turns", {
                params: { path: { id } },
                body: turn,
                ...this.#signal(options),
            }),
        );
    }

    /**
     * Posts the results of released calls (docs/design.md §15; scope `runs:write`): the calls of tools declared
     * `executor: "worker"` that a decision approved, which the worker ran itself, some or all at a time. The run
     * answers `released` while a released call still lacks its result, `resumed` once none does. The same result
     * again is accepted (a replay, whatever the claim's state); a different one for a call that has one throws 409
     * `result_conflict`, a call that was not released 422 `call_not_released`. `claimId`: the live claim of this worker
     * ({@link claim}); without one 409 {@link ClaimRequiredError}, under another's {@link ClaimedError}, under a
     * lapsed one {@link ClaimLapsedError}.
     */
    postResults(
        id: string,
        results: readonly PostedResult[],
        options: CallOptions & { claimId?: string } = {},
    ): Promise<RunView> {
        const { claimId, ...call } = options;
        // `claim_id` is the claims contract's member (docs/design.md §15), sent as it names it.
        const body = { ...(claimId === undefined ? {} : { claim_id: claimId }), results: [...results] } as PostResults;
        return unwrap(
            this.#api.POST("/v1/runs/{id}/results", {
                params: { path: { id } },
                body,
                ...this.#signal(call),
            }),
        );
    }

    /**
     * Claims a released run's calls for this worker (docs/design.md §15; scope `runs:write`): the answer's
     * `claim_id` posts their results until `until`. With `claimId`, renews that claim (before `until`; a long tool).
     * Refusals are 409: {@link ClaimedError} (another worker holds the run, with its `until`), {@link ClaimLapsedError}
     * (this claim lapsed: its unposted calls were interrupted), `not_released` (the run waits or resumes, with its
     * `status` in the problem) or `run_cancelled`.
     */
    async claim(id: string, claimId?: string, options: CallOptions = {}): Promise<Claim> {
        // Not in openapi-fetch's typed paths: the claims route is the lead's fixed contract, and this is its shape.
        const request = new Request(`${this.#baseUrl}/v1/runs/${encodeURIComponent(id)}/claim`, {
            method: "POST",
            headers: {
                authorization: `Bearer ${this.#credential}`,
                accept: "application/json",
                "content-type": "application/json",
            },
            body: JSON.stringify(claimId === undefined ? {} : { claim_id: claimId }),
            ...this.#signal(options),
        });
        const response = await this.#send(request);
        const text = await response.text();
        let body: unknown = text;
        try {
            body = JSON.parse(text);
        } catch {
            // Not JSON: described by ApiError from its status and content type.
        }
        if (!response.ok) {
            throw ApiError.fromResponse(response, body);
        }
        return body as Claim;
    }

    /**
     * Makes an approval link (docs/design.md §20) for `uid`, who must be allowed to decide the run (docs/design.md §4),
     * to decide its waiting turn from the service's page (scope `decisions:write`; the service needs `PUBLIC_URL`).
     * The answer's `url` is shown only here and decides as `uid`, once: hand it to that person only, never where a
     * model can read it.
     */
    createLink(id: string, uid: number, options: CallOptions = {}): Promise<ApprovalLink> {
        return unwrap(
            this.#api.POST("/v1/runs/{id}/links", { params: { path: { id } }, body: { uid }, ...this.#signal(options) }),
        );
    }

    /** Revokes an approval link (scope `decisions:write`): it decides nothing from now on. Again: the same. */
    async revokeLink(id: string, linkId: string, options: CallOptions = {}): Promise<void> {
        await unwrap(
            this.#api.DELETE("/v1/runs/{id}/links/{link_id}", {
                params: { path: { id, link_id: linkId } },
                ...this.#signal(options),
            }),
        );
    }

    /** Abandons a run (scope `runs:write`). */
    cancelRun(id: string, options: CallOptions = {}): Promise<RunView> {
        return unwrap(this.#api.POST("/v1/runs/{id}/cancel", { params: { path: { id } }, ...this.#signal(options) }));
    }

    /** Ends a resumed run (scope `runs:write`). */
    completeRun(id: string, options: CallOptions = {}): Promise<RunView> {
        return unwrap(this.#api.POST("/v1/runs/{id}/complete", { params: { path: { id } }, ...this.#signal(options) }));
    }

    /**
     * `GET /v1/runs/{id}/events`, the audit record of a run: its approval and tool events and the turns that expired
     * (scope `runs:read`). Not the feed ({@link events}).
     */
    runEvents(id: string, options: CallOptions = {}): Promise<RunAudit> {
        return unwrap(this.#api.GET("/v1/runs/{id}/events", { params: { path: { id } }, ...this.#signal(options) }));
    }

    /**
     * One page of the approvals inbox (scope `approvals:read`): the runs waiting for approval that `acting_uid` may
     * decide, newest first; pass `next_cursor` back as `cursor` until it is `null`.
     */
    approvals(query: ApprovalsQuery, options: CallOptions = {}): Promise<InboxPage> {
        return unwrap(this.#api.GET("/v1/approvals", { params: { query }, ...this.#signal(options) }));
    }

    /** Every item of the inbox, page after page. */
    async *allApprovals(query: Omit<ApprovalsQuery, "cursor">, options: CallOptions = {}): AsyncGenerator<InboxItem> {
        let cursor: string | null = null;
        do {
            const page = await this.approvals(cursor === null ? query : { ...query, cursor }, options);
            yield* page.items;
            cursor = page.next_cursor;
        } while (cursor !== null);
    }

    /** Subscribes a URL to the tenant's events (scope `webhooks:write`); the answer's `secret` is shown this once. */
    createWebhook(subscription: CreateWebhook, options: CallOptions = {}): Promise<WebhookCreated> {
        return unwrap(this.#api.POST("/v1/webhooks", { body: subscription, ...this.#signal(options) }));
    }

    /** The tenant's subscriptions with their delivery state (scope `webhooks:write`); never their secrets. */
    async listWebhooks(options: CallOptions = {}): Promise<WebhookSubscription[]> {
        return (await unwrap(this.#api.GET("/v1/webhooks", this.#signal(options)))).subscriptions;
    }

    /**
     * Gives a subscription a new signing secret (scope `webhooks:write`), in the answer's `secret` this once. The old
     * one signs beside it for `overlap_secs` (absent: the service's WEBHOOK_SECRET_OVERLAP_SECS; 0: it retires at
     * once), so receivers can switch meanwhile; 404 `not_found` for a subscription the tenant does not have.
     */
    rotateWebhookSecret(
        id: string,
        rotation: RotateWebhookSecret = {},
        options: CallOptions = {},
    ): Promise<WebhookCreated> {
        return unwrap(
            this.#api.POST("/v1/webhooks/{id}/rotate-secret", {
                params: { path: { id } },
                body: rotation,
                ...this.#signal(options),
            }),
        );
    }

    /** Removes a subscription (scope `webhooks:write`); 404 `not_found` for one the tenant does not have. */
    async removeWebhook(id: string, options: CallOptions = {}): Promise<void> {
        await unwrap(this.#api.DELETE("/v1/webhooks/{id}", { params: { path: { id } }, ...this.#signal(options) }));
    }

    /**
     * One read of the feed (scope `events:read`): the events after `after`, waiting up to `wait` seconds for one.
     * {@link feed} follows it for you.
     */
    events(query: EventsQuery = {}, options: CallOptions = {}): Promise<EventsPage> {
        // A long poll is held up to `wait` seconds by design: that time is not the request's fault.
        const held = (query.wait ?? 0) * 1000;
        // The generated `data` is an empty object (see Event in schemas.ts): the page is the one the spec describes.
        return unwrap(this.#api.GET("/v1/events", { params: { query }, ...this.#signal(options, held) })) as Promise<EventsPage>;
    }

    /** The feed as an async iterable that keeps its place in `options.store` (see {@link Feed}). */
    feed(options: FeedOptions = {}): Feed {
        return new Feed(
            (query, signal) => this.events(query, signal === undefined ? {} : { signal }),
            options,
        );
    }

    /** `GET /healthz`: the process answers. */
    healthz(options: CallOptions = {}): Promise<{ status: "ok" }> {
        return unwrap(this.#api.GET("/healthz", this.#signal(options)));
    }

    /** `GET /readyz`: the database is reachable and migrated; 503 `not_migrated` or `database_unavailable` if not. */
    readyz(options: CallOptions = {}): Promise<{ status: "ready" }> {
        return unwrap(this.#api.GET("/readyz", this.#signal(options)));
    }

    /** `GET /metrics` in the Prometheus text format (scope `metrics:read`). */
    metrics(options: CallOptions = {}): Promise<string> {
        return unwrap(this.#api.GET("/metrics", { parseAs: "text", ...this.#signal(options) }));
    }
}

/**
 * The body of a success; throws {@link ApiError} for any other answer. openapi-fetch types `data` as possibly
 * undefined (a 204 has none); every answer unwrapped here for its body documents one.
 */
async function unwrap<T>(pending: Promise<Answer<T>>): Promise<Exclude<T, undefined>> {
    const answer = await pending;
    if (!answer.response.ok) {
        throw ApiError.fromResponse(answer.response, answer.error);
    }
    return answer.data as Exclude<T, undefined>;
}
