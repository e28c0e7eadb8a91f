/**
 * The HTTP API of approval-resume (docs/design.md §8; openapi.yaml) over `fetch`, through openapi-fetch: every path,
 * parameter, body and answer is checked at compile time against the types generated from openapi.yaml, and every
 * non-2xx answer throws {@link ApiError}.
 * @module
 */
import createClient, { type Client } from "openapi-fetch";

import { type DecideOptions, type Verdict, perCallBody, wholeTurnBody } from "./decisions.js";
import { ApiError } from "./errors.js";
import { Feed, type FeedOptions } from "./feed.js";
import type {
    AppendTurn,
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
    PostedResult,
    PutUser,
    RegisterRun,
    RunAudit,
    RotateWebhookSecret,
    RunView,
    UserView,
    WebhookCreated,
    WebhookSubscription,
    paths,
} from "./schemas.js";

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
}

/** Options every call takes. */
export interface CallOptions {
    signal?: AbortSignal;
}

/** What openapi-fetch answers: the parsed body of a success, or of a refusal, and the response. */
type Answer<T> = { data: T; error?: never; response: Response } | { data?: never; error: unknown; response: Response };

export class ApprovalResumeClient {
    readonly #api: Client<paths>;

    constructor(options: ClientOptions) {
        this.#api = createClient<paths>({
            baseUrl: options.baseUrl.replace(/\/+$/, ""),
            headers: { authorization: `Bearer ${options.credential}`, accept: "application/json" },
            ...(options.fetch === undefined ? {} : { fetch: options.fetch }),
        });
    }

    /** Creates or replaces a backend user (scope `users:write`). */
    putUser(uid: number, user: PutUser, options: CallOptions = {}): Promise<UserView> {
        return unwrap(this.#api.PUT("/v1/users/{uid}", { params: { path: { uid } }, body: user, ...options }));
    }

    /**
     * Registers a run suspended on its last assistant turn (scope `runs:write`): 201, or 200 with the run for the
     * same body again; another body under a taken id throws 409 `run_exists`. Draw run ids at random (UUID v4). With
     * `format` (docs/design.md §14) the run is registered in a provider's own format with that format's members
     * (`system` + `messages`, `instructions` + `input`, `system_instruction` + `contents`), kept byte for byte.
     */
    registerRun(run: RegisterRun, options: CallOptions = {}): Promise<RunView> {
        return unwrap(this.#api.POST("/v1/runs", { body: run, ...options }));
    }

    /**
     * The run, its current turn (with the digest a decision names) and that turn's decision (scope `runs:read`).
     * `includeWorkerState`: with the run's `worker_state` as the worker sent it (`null`: none; API keys only).
     */
    getRun(id: string, options: CallOptions & { includeWorkerState?: boolean } = {}): Promise<RunView> {
        const { includeWorkerState, ...call } = options;
        const query = includeWorkerState === true ? { include: "worker_state" as const } : {};
        return unwrap(this.#api.GET("/v1/runs/{id}", { params: { path: { id }, query }, ...call }));
    }

    /**
     * Posts a decision body as it is (scope `decisions:write`, or `decisions:anonymous` with `decider_uid: null`).
     * {@link approveTurn}, {@link denyTurn} and {@link decideCalls} build it for you.
     */
    decide(
        id: string,
        body: DecisionBody,
        options: { format?: ModelInputFormat; signal?: AbortSignal } = {},
    ): Promise<DecisionAnswer> {
        const { format, signal } = options;
        const query = format === undefined ? {} : { format };
        return unwrap(
            this.#api.POST("/v1/runs/{id}/decision", {
                params: { path: { id }, query },
                body,
                ...(signal === undefined ? {} : { signal }),
            }),
        );
    }

    /** Approves every pending call of the turn named by its digest. */
    approveTurn(id: string, turnDigest: string, options: DecideOptions = {}): Promise<DecisionAnswer> {
        return this.decide(id, wholeTurnBody(turnDigest, true, options.deciderUid), options);
    }

    /** Denies the whole turn; `reason` `variant` asks for another version, `skip` not to propose it again. */
    denyTurn(
        id: string,
        turnDigest: string,
        options: DecideOptions & { reason?: DenialReason } = {},
    ): Promise<DecisionAnswer> {
        return this.decide(id, wholeTurnBody(turnDigest, false, options.deciderUid, options.reason), options);
    }

    /** A verdict per call: every pending call exactly once, approved (as proposed or edited) or denied. */
    decideCalls(
        id: string,
        turnDigest: string,
        verdicts: readonly Verdict[],
        options: DecideOptions = {},
    ): Promise<DecisionAnswer> {
        return this.decide(id, perCallBody(turnDigest, verdicts, options.deciderUid), options);
    }

    /**
     * The last resumed model input (scope `runs:read`), in `format` or else the run's own; 409 `not_resumed` before a
     * decision, 422 `format_not_representable` for a format the transcript holds something it cannot say.
     */
    modelInput(
        id: string,
        options: { format?: ModelInputFormat; signal?: AbortSignal } = {},
    ): Promise<ModelInput> {
        const { format, signal } = options;
        const query = format === undefined ? {} : { format };
        return unwrap(
            this.#api.GET("/v1/runs/{id}/model-input", {
                params: { path: { id }, query },
                ...(signal === undefined ? {} : { signal }),
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
                ...options,
            }),
        );
    }

    /**
     * Posts the results of released calls (docs/design.md §15; scope `runs:write`): the calls of tools declared
     * `executor: "worker"` that a decision approved, which the worker ran itself, some or all at a time. The run
     * answers `released` while a released call still lacks its result, `resumed` once none does. The same result
     * again is accepted (a replay); a different one for a call that has one throws 409 `result_conflict`, a call that
     * was not released 422 `call_not_released`.
     */
    postResults(id: string, results: readonly PostedResult[], options: CallOptions = {}): Promise<RunView> {
        return unwrap(
            this.#api.POST("/v1/runs/{id}/results", {
                params: { path: { id } },
                body: { results: [...results] },
                ...options,
            }),
        );
    }

    /** Abandons a run (scope `runs:write`). */
    cancelRun(id: string, options: CallOptions = {}): Promise<RunView> {
        return unwrap(this.#api.POST("/v1/runs/{id}/cancel", { params: { path: { id } }, ...options }));
    }

    /** Ends a resumed run (scope `runs:write`). */
    completeRun(id: string, options: CallOptions = {}): Promise<RunView> {
        return unwrap(this.#api.POST("/v1/runs/{id}/complete", { params: { path: { id } }, ...options }));
    }

    /**
     * `GET /v1/runs/{id}/events`, the audit record of a run: its approval and tool events and the turns that expired
     * (scope `runs:read`). Not the feed ({@link events}).
     */
    runEvents(id: string, options: CallOptions = {}): Promise<RunAudit> {
        return unwrap(this.#api.GET("/v1/runs/{id}/events", { params: { path: { id } }, ...options }));
    }

    /**
     * One page of the approvals inbox (scope `approvals:read`): the runs waiting for approval that `acting_uid` may
     * decide, newest first; pass `next_cursor` back as `cursor` until it is `null`.
     */
    approvals(query: ApprovalsQuery, options: CallOptions = {}): Promise<InboxPage> {
        return unwrap(this.#api.GET("/v1/approvals", { params: { query }, ...options }));
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
        return unwrap(this.#api.POST("/v1/webhooks", { body: subscription, ...options }));
    }

    /** The tenant's subscriptions with their delivery state (scope `webhooks:write`); never their secrets. */
    async listWebhooks(options: CallOptions = {}): Promise<WebhookSubscription[]> {
        return (await unwrap(this.#api.GET("/v1/webhooks", { ...options }))).subscriptions;
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
            this.#api.POST("/v1/webhooks/{id}/rotate-secret", { params: { path: { id } }, body: rotation, ...options }),
        );
    }

    /** Removes a subscription (scope `webhooks:write`); 404 `not_found` for one the tenant does not have. */
    async removeWebhook(id: string, options: CallOptions = {}): Promise<void> {
        await unwrap(this.#api.DELETE("/v1/webhooks/{id}", { params: { path: { id } }, ...options }));
    }

    /**
     * One read of the feed (scope `events:read`): the events after `after`, waiting up to `wait` seconds for one.
     * {@link feed} follows it for you.
     */
    events(query: EventsQuery = {}, options: CallOptions = {}): Promise<EventsPage> {
        return unwrap(this.#api.GET("/v1/events", { params: { query }, ...options }));
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
        return unwrap(this.#api.GET("/healthz", { ...options }));
    }

    /** `GET /readyz`: the database is reachable and migrated; 503 `not_migrated` or `database_unavailable` if not. */
    readyz(options: CallOptions = {}): Promise<{ status: "ready" }> {
        return unwrap(this.#api.GET("/readyz", { ...options }));
    }

    /** `GET /metrics` in the Prometheus text format (scope `metrics:read`). */
    metrics(options: CallOptions = {}): Promise<string> {
        return unwrap(this.#api.GET("/metrics", { parseAs: "text", ...options }));
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
