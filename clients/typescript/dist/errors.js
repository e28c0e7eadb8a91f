/** `code` of an answer that was no problem document (a proxy's HTML error page, say). */
export const UNEXPECTED_RESPONSE = "unexpected_response";
/**
 * A non-2xx answer. Switch on `code` (`already_decided`, `stale_turn`, `missing_scope`, …), which is stable, unlike
 * `detail`. An answer that never came (a refused connection, an aborted request) is fetch's own error instead.
 */
export class ApiError extends Error {
    status;
    code;
    detail;
    requestId;
    retryAfter;
    type;
    name = "ApiError";
    constructor(status, 
    /** The problem's `code`; {@link UNEXPECTED_RESPONSE} when the body was no problem document. */
    code, 
    /** For a person reading it; never internal text on a 5xx. */
    detail, 
    /** The request id (the problem's `request_id`, else the `x-request-id` header): grep the service's logs for it. */
    requestId, 
    /** Seconds to wait before asking again, from `Retry-After` (every 503 carries it); `null` without one. */
    retryAfter, 
    /** The problem's `type` (`urn:approval-resume:problem:{code}`). */
    type = null) {
        super(`HTTP ${status} ${code}: ${detail}${requestId === null ? "" : ` (request ${requestId})`}`);
        this.status = status;
        this.code = code;
        this.detail = detail;
        this.requestId = requestId;
        this.retryAfter = retryAfter;
        this.type = type;
    }
    /**
     * The error for a non-2xx `response` whose body was already read into `body` (parsed JSON, or the text when it
     * was not JSON). Only a body of content type application/problem+json with a string `code` counts as a problem;
     * any other is described by its status and content type, never by its bytes.
     */
    static fromResponse(response, body) {
        const requestId = response.headers.get("x-request-id");
        const retryAfter = retryAfterSeconds(response.headers.get("retry-after"));
        const contentType = (response.headers.get("content-type") ?? "").split(";")[0].trim().toLowerCase();
        const problem = contentType === "application/problem+json" && isRecord(body) ? body : null;
        if (problem === null || typeof problem.code !== "string") {
            const detail = `HTTP ${response.status} with content type "${contentType}", not a problem document`;
            return new ApiError(response.status, UNEXPECTED_RESPONSE, detail, requestId, retryAfter);
        }
        const detail = typeof problem.detail === "string" ? problem.detail : "";
        const id = typeof problem.request_id === "string" ? problem.request_id : requestId;
        const type = typeof problem.type === "string" ? problem.type : null;
        switch (problem.code) {
            case "claimed":
                return new ClaimedError(response.status, detail, id, retryAfter, type, stringOrNull(problem.until));
            case "claim_lapsed":
                return new ClaimLapsedError(response.status, problem.code, detail, id, retryAfter, type);
            case "not_released":
                return new NotReleasedError(response.status, detail, id, retryAfter, type, runStatusOf(problem));
            case "claim_required":
                return new ClaimRequiredError(response.status, problem.code, detail, id, retryAfter, type);
            default:
                return new ApiError(response.status, problem.code, detail, id, retryAfter, type);
        }
    }
}
/**
 * 409 `claimed` (docs/design.md §15): another worker holds the live claim on the run's released calls, until `until`
 * (RFC 3339, the service's clock; `null` if the answer named none). Run nothing: that worker runs them.
 */
export class ClaimedError extends ApiError {
    until;
    name = "ClaimedError";
    constructor(status, detail, requestId, retryAfter, type, 
    /** When the other worker's claim lapses unless it renews it. */
    until) {
        super(status, "claimed", detail, requestId, retryAfter, type);
        this.until = until;
    }
}
/**
 * 409 `claim_lapsed`: the poster's claim passed its `until` before this renewal or post; the service ended its
 * unposted calls with the `interrupted` result, and they are never released again.
 */
export class ClaimLapsedError extends ApiError {
    name = "ClaimLapsedError";
}
/** 409 `claim_required`: results were posted without a `claim_id` (claim the run first: `client.claim`). */
export class ClaimRequiredError extends ApiError {
    name = "ClaimRequiredError";
}
/**
 * 409 `not_released` of a claim (a run not in `released`): `runStatus` tells a wait (`waiting_for_approval`,
 * `resuming`: it may still release, ask again) from never (`resumed`). Also the 422 `not_released` of a results post
 * for a call that was not released (`runStatus` null).
 */
export class NotReleasedError extends ApiError {
    runStatus;
    name = "NotReleasedError";
    constructor(status, detail, requestId, retryAfter, type, runStatus) {
        super(status, "not_released", detail, requestId, retryAfter, type);
        this.runStatus = runStatus;
    }
}
/**
 * The run's status a `not_released` problem names. The claims contract calls the member `status`, which in a
 * problem document is otherwise the HTTP status (a number): a string there is the run's; `run_status` is read too.
 */
function runStatusOf(problem) {
    return stringOrNull(problem.run_status) ?? stringOrNull(problem.status);
}
function stringOrNull(value) {
    return typeof value === "string" ? value : null;
}
function isRecord(value) {
    return typeof value === "object" && value !== null && !Array.isArray(value);
}
/** Retry-After as seconds: delay-seconds, or an HTTP date counted from now (RFC 9110 §10.2.3). */
export function retryAfterSeconds(value, now = Date.now()) {
    if (value === null || value.trim() === "") {
        return null;
    }
    const text = value.trim();
    if (/^[0-9]+$/.test(text)) {
        return Number(text);
    }
    const at = Date.parse(text);
    return Number.isNaN(at) ? null : Math.max(0, Math.ceil((at - now) / 1000));
}
//# sourceMappingURL=errors.js.map