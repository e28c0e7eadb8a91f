/**
 * The text the service gives the model for each call of a decided turn (docs/design.md §3: a denial, an expiry, an
 * edited call's note and output, a released call's result), read from the model input in `openai-chat`, where each
 * is a tool message. The adapters hand these texts to their framework as they are.
 * @module
 */
import type { ApprovalResumeClient } from "../client.js";
/** Each call's text by call id. */
export declare function resultTexts(client: ApprovalResumeClient, runId: string): Promise<Map<string, string>>;
//# sourceMappingURL=result-texts.d.ts.map