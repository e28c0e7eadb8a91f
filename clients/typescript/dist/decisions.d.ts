/**
 * The bodies of `POST /v1/runs/{id}/decision` (docs/design.md §8), typed tighter than the spec's `DecisionBody` can be:
 * a per-call verdict that approves may carry edited `arguments` and never a `reason`, one that denies the opposite,
 * so the 422 `arguments_require_approval` and `reason_requires_denial` answers become compile errors. Likewise a
 * decision remembered as rules (docs/design.md §18): `remember` of the whole turn is no option of a per-call
 * decision (422 `remember_with_calls`), and `owner` scope comes with its end (422 `remember_until_required`).
 * @module
 */
import type { DecisionBody, DenialReason, ModelInputFormat, RuleScope } from "./schemas.js";
/** One call approved, as proposed or with edited arguments. */
export interface Approval {
    call_id: string;
    approved: true;
    /**
     * The arguments to run with instead of the proposed ones: the text of a JSON object, or an object (sent as its
     * JSON text). Equal to the proposed ones as JSON values, they are no edit.
     */
    arguments?: string | Record<string, unknown>;
    /**
     * Remember this approval as a rule of the decider's ("allow for this conversation": `run`); `owner` needs
     * `rememberUntil` in the options. An edited approval cannot be remembered (422 `remember_edited`).
     */
    remember?: RuleScope;
}
/** One call denied; `reason` is rendered on calls of `write` tools only. */
export interface Denial {
    call_id: string;
    approved: false;
    reason?: DenialReason;
    /** Remember this denial as a rule of the decider's ("never in this conversation": `run`, with `reason` `skip`). */
    remember?: RuleScope;
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
    /**
     * The end (RFC 3339, or a Date) of the `owner` scope rules the decision makes, at most `MAX_RULE_TTL_DAYS` ahead;
     * only with a verdict that remembers `owner` (else 422 `remember_until_without_owner`).
     */
    rememberUntil?: string | Date;
}
/**
 * A whole-turn decision remembered as rules (docs/design.md §18), one per distinct tool of the turn, as the
 * decider's: `run` for the later turns of this run, `owner` for the owner's runs of the tool until `rememberUntil`.
 * A refused remember refuses the whole decision (403 or 422), and nothing is recorded.
 */
export type Remember = {
    remember?: "run";
    rememberUntil?: never;
} | {
    remember: "owner";
    rememberUntil: string | Date;
};
/** The options of a whole-turn decision: who decides, and what is remembered. */
export type TurnDecideOptions = Omit<DecideOptions, "rememberUntil"> & Remember;
/** The whole-turn body: the same verdict for every pending call. */
export declare function wholeTurnBody(turnDigest: string, approved: boolean, deciderUid: number | null | undefined, reason?: DenialReason, remember?: Remember): DecisionBody;
/** The per-call body. */
export declare function perCallBody(turnDigest: string, verdicts: readonly Verdict[], deciderUid: number | null | undefined, rememberUntil?: string | Date): DecisionBody;
//# sourceMappingURL=decisions.d.ts.map