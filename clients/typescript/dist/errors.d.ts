/**
 * The one error every refused request throws: the service's application/problem+json answer (RFC 9457; docs/design.md
 * §8), read into its stable `code`, the status, the detail, the request id and Retry-After.
 * @module
 */
import type { ProblemCode } from "./schemas.js";
/** `code` of an answer that was no problem document (a proxy's HTML error page, say). */
export declare const UNEXPECTED_RESPONSE = "unexpected_response";
/**
 * A non-2xx answer. Switch on `code` (`already_decided`, `stale_turn`, `missing_scope`, …), which is stable, unlike
 * `detail`. An answer that never came (a refused connection, an aborted request) is fetch's own error instead.
 */
export declare class ApiError extends Error {
    readonly status: number;
    /** The problem's `code`; {@link UNEXPECTED_RESPONSE} when the body was no problem document. */
    readonly code: ProblemCode | typeof UNEXPECTED_RESPONSE | (string & {});
    /** For a person reading it; never internal text on a 5xx. */
    readonly detail: string;
    /** The request id (the problem's `request_id`, else the `x-request-id` header): grep the service's logs for it. */
    readonly requestId: string | null;
    /** Seconds to wait before asking again, from `Retry-After` (every 503 carries it); `null` without one. */
    readonly retryAfter: number | null;
    /** The problem's `type` (`urn:approval-resume:problem:{code}`). */
    readonly type: string | null;
    readonly name: string;
    constructor(status: number, 
    /** The problem's `code`; {@link UNEXPECTED_RESPONSE} when the body was no problem document. */
    code: ProblemCode | typeof UNEXPECTED_RESPONSE | (string & {}), 
    /** For a person reading it; never internal text on a 5xx. */
    detail: string, 
    /** The request id (the problem's `request_id`, else the `x-request-id` header): grep the service's logs for it. */
    requestId: string | null, 
    /** Seconds to wait before asking again, from `Retry-After` (every 503 carries it); `null` without one. */
    retryAfter: number | null, 
    /** The problem's `type` (`urn:approval-resume:problem:{code}`). */
    type?: string | null);
    /**
     * The error for a non-2xx `response` whose body was already read into `body` (parsed JSON, or the text when it
     * was not JSON). Only a body of content type application/problem+json with a string `code` counts as a problem;
     * any other is described by its status and content type, never by its bytes.
     */
    static fromResponse(response: Response, body: unknown): ApiError;
}
/**
 * 409 `claimed` (docs/design.md §15): another worker holds the live claim on the run's released calls, until `until`
 * (RFC 3339, the service's clock; `null` if the answer named none). Run nothing: that worker runs them.
 */
export declare class ClaimedError extends ApiError {
    /** When the other worker's claim lapses unless it renews it. */
    readonly until: string | null;
    readonly name = "ClaimedError";
    constructor(status: number, detail: string, requestId: string | null, retryAfter: number | null, type: string | null, 
    /** When the other worker's claim lapses unless it renews it. */
    until: string | null);
}
/**
 * 409 `claim_lapsed`: the poster's claim passed its `until` before this renewal or post; the service ended its
 * unposted calls with the `interrupted` result, and they are never released again.
 */
export declare class ClaimLapsedError extends ApiError {
    readonly name = "ClaimLapsedError";
}
/** 409 `claim_required`: results were posted without a `claim_id` (claim the run first: `client.claim`). */
export declare class ClaimRequiredError extends ApiError {
    readonly name = "ClaimRequiredError";
}
/**
 * 409 `not_released` of a claim (a run not in `released`): `runStatus` tells a wait (`waiting_for_approval`,
 * `resuming`: it may still release, ask again) from never (`resumed`). Also the 422 `not_released` of a results post
 * for a call that was not released (`runStatus` null).
 */
export declare class NotReleasedError extends ApiError {
    readonly runStatus: string | null;
    readonly name = "NotReleasedError";
    constructor(status: number, detail: string, requestId: string | null, retryAfter: number | null, type: string | null, runStatus: string | null);
}
/** Retry-After as seconds: delay-seconds, or an HTTP date counted from now (RFC 9110 §10.2.3). */
export declare function retryAfterSeconds(value: string | null, now?: number): number | null;
//# sourceMappingURL=errors.d.ts.map