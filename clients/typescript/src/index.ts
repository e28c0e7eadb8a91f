/**
 * approval-resume's TypeScript client: {@link ApprovalResumeClient} for the HTTP API, {@link Feed} for the event
 * feed with a stored cursor, {@link WebhookVerifier} for webhook requests, {@link ApiError} for every refusal, and
 * the API's shapes as generated from openapi.yaml. `approval-resume/file-cursor-store` keeps a feed's place in a
 * file (Node.js); `approval-resume/ai-sdk` is the Vercel AI SDK adapter (docs/design.md §16).
 * @module
 */
export { ApprovalResumeClient, type CallOptions, type Claim, type ClientOptions, DEFAULT_TIMEOUT_MS } from "./client.js";
export {
    type Approval,
    type DecideOptions,
    type Denial,
    type Remember,
    type TurnDecideOptions,
    type Verdict,
    perCallBody,
    wholeTurnBody,
} from "./decisions.js";
export { ApiError, ClaimLapsedError, ClaimRequiredError, ClaimedError, NotReleasedError, UNEXPECTED_RESPONSE } from "./errors.js";
export { type CursorStore, Feed, type FeedOptions, type FeedPosition, MemoryCursorStore } from "./feed.js";
export { type WebhookHeaders, WebhookVerificationError, WebhookVerifier } from "./webhooks.js";
export type * from "./schemas.js";
