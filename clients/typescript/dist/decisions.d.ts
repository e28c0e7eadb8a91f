/**
 * The bodies of `POST /v1/runs/{id}/decision` (docs/design.md §8), typed tighter than the spec's `DecisionBody` can be:
 * a per-call verdict that approves may carry edited `arguments` and never a `reason`, one that denies the opposite,
 * so the 422 `arguments_require_approval` and `reason_requires_denial` answers become compile errors.
 * @module
 */
import type { DecisionBody, DenialReason, ModelInputFormat } from "./schemas.js";
/** One call approved, as proposed or with edited arguments. */
export interface Approval {
    call_id: string;
    approved: true;
    /**
     * The arguments to run with instead of the proposed ones: the text of a JSON object, or an object (sent as its
     * JSON text). Equal to the proposed ones as JSON values, they are no edit.
     */
    arguments?: string | Record<string, unknown>;
}
/** One call denied; `reason` is rendered on calls of `write` tools only. */
export interface Denial {
    call_id: string;
    approved: false;
    reason?: DenialReason;
}
/** The verdict on one pending call. A per-call decision names every pending call exactly once. */
export type Verdict = Approval | Denial;
/** Who decides, and in which format the answer's model input comes. */
export interface DecideOptions {
    /**
     * The backend user who decides; `null` for a decision by nobody (scope `decisions:anonymous`). With an API key
     * it must be given (422 `decider_uid_required` otherwise); with a decision token leave it out: the decider is
     * the token's `sub`.
     */
    deciderUid?: number | null;
    /** The format of the answer's `model_input`; the service's default (`openai-chat`) when absent. */
    format?: ModelInputFormat;
    signal?: AbortSignal;
}
/** The whole-turn body: the same verdict for every pending call. */
export declare function wholeTurnBody(turnDigest: string, approved: boolean, deciderUid: number | null | undefined, reason?: DenialReason): DecisionBody;
/** The per-call body. */
export declare function perCallBody(turnDigest: string, verdicts: readonly Verdict[], deciderUid: number | null | undefined): DecisionBody;
//# sourceMappingURL=decisions.d.ts.map