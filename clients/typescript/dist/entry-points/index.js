/**
 * `approval-resume`, as package.json's `exports` serves it: the client's module (`src/index.ts`), loaded through
 * {@link loadEntry} so that a linked install says what to do. Its types are the module's own (`dist/index.d.ts`).
 * Every value the module exports is named here; test/entry-points.test.ts holds the two lists equal.
 * @module
 */
import { loadEntry } from "./load.js";
const loaded = await loadEntry("approval-resume", () => import("../index.js"));
export const { ApiError, ApprovalResumeClient, ClaimLapsedError, ClaimRequiredError, ClaimedError, DEFAULT_TIMEOUT_MS, Feed, MemoryCursorStore, NotReleasedError, UNEXPECTED_RESPONSE, WebhookVerificationError, WebhookVerifier, perCallBody, wholeTurnBody, } = loaded;
//# sourceMappingURL=index.js.map