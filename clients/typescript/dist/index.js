/**
 * approval-resume's TypeScript client: {@link ApprovalResumeClient} for the HTTP API, {@link Feed} for the event
 * feed with a stored cursor, {@link WebhookVerifier} for webhook requests, {@link ApiError} for every refusal, and
 * the API's shapes as generated from openapi.yaml. `approval-resume/file-cursor-store` keeps a feed's place in a
 * file (Node.js); `approval-resume/ai-sdk` is the Vercel AI SDK adapter (docs/design.md §16).
 * @module
 */
export { ApprovalResumeClient, DEFAULT_TIMEOUT_MS } from "./client.js";
export { perCallBody, wholeTurnBody, } from "./decisions.js";
export { ApiError, ClaimLapsedError, ClaimRequiredError, ClaimedError, NotReleasedError, UNEXPECTED_RESPONSE } from "./errors.js";
export { Feed, MemoryCursorStore } from "./feed.js";
export { WebhookVerificationError, WebhookVerifier } from "./webhooks.js";
//# sourceMappingURL=index.js.map