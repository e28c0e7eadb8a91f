import { type ModelMessage, type StreamTextResult, type ToolSet, generateText, streamText } from "ai";
import type { ApprovalResumeClient } from "../client.js";
import type { Effect, RegisterRun, RunView } from "../schemas.js";
import { type WorkerLogger } from "../worker/calls.js";
import { type DecidedStep, type SuspendedStep } from "../worker/straight-on.js";
export { type AiSdkWorkerState } from "./worker-state.js";
export { currentIdempotencyKey, idempotencyKey } from "../worker/calls.js";
export { type ClaimRefusal } from "../worker/claim.js";
export { DEFAULT_MAX_DECIDED_TURNS } from "../worker/straight-on.js";
type GenerateOptions<TOOLS extends ToolSet> = Parameters<typeof generateText<TOOLS>>[0];
type GenerateResult<TOOLS extends ToolSet> = Awaited<ReturnType<typeof generateText<TOOLS>>>;
type StreamResult<TOOLS extends ToolSet> = ReturnType<typeof streamText<TOOLS>>;
/** `generateText`'s (and `streamText`'s) options for these tools, without the prompt, which the worker sets. */
export type GenerateSettings<TOOLS extends ToolSet> = Omit<GenerateOptions<TOOLS>, "prompt" | "messages" | "system"> & {
    tools: TOOLS;
    /** The system prompt; also the first message of the registered transcript. */
    system?: string;
};
export interface AiSdkWorkerOptions<TOOLS extends ToolSet> {
    /** A client with an API key of scopes `runs:write` and `runs:read`. */
    client: ApprovalResumeClient;
    /** The model, the tools, `toolApproval` (or tools with `needsApproval`), `stopWhen` and any other option. */
    settings: GenerateSettings<TOOLS>;
    /** Each tool's effect; absent: `write` for a tool that may need approval, else `read`. */
    effects?: Partial<Record<Extract<keyof TOOLS, string>, Effect>>;
    /** Further members of every registration: `privacy_level`, `approval_ttl_secs`, `require_second_approver`… */
    registration?: Omit<RegisterRun, "id" | "owner_uid" | "format" | "messages" | "tools" | "worker_state">;
    /**
     * With it, the model's steps run through `streamText`, and each stream is handed here as it starts (to pipe to a
     * browser: `result.toUIMessageStreamResponse()`); the worker reads it to its end as well. Without it,
     * `generateText`. (The released calls run in a step that never calls the model, through `generateText` either way.)
     */
    stream?: (result: StreamTextResult<TOOLS, never, never>) => void | Promise<void>;
    /** Where a released tool's exception goes (never to the service). Default `console.error`. */
    logger?: WorkerLogger;
    /**
     * How many turns remembered decisions decide at once one {@link AiSdkWorker.start} or
     * {@link AiSdkWorker.resume} goes straight on through before answering `decided`
     * ({@link DEFAULT_MAX_DECIDED_TURNS} when absent): a whole number, 0 to answer `decided` at once; anything else
     * makes the constructor throw a RangeError.
     */
    maxDecidedTurns?: number;
}
/** Where a run stands after {@link AiSdkWorker.start} or {@link AiSdkWorker.resume}. */
export type WorkerStep<TOOLS extends ToolSet> = 
/** The model asked for approval: the run waits for a decision (registered, or a new turn appended). */
SuspendedStep
/**
 * Remembered decisions decided `maxDecidedTurns` turns in a row, and the worker went on through each; the last
 * is `released` or `resumed`: {@link AiSdkWorker.resume} goes on.
 */
 | DecidedStep
/** Nothing to do yet: the run waits for a decision, or the service still runs its own tools. */
 | {
    status: "waiting";
    runId: string;
    run: RunView | null;
}
/** The run is over without this worker: cancelled, or completed before. */
 | {
    status: "closed";
    runId: string;
    run: RunView | null;
}
/**
 * Another worker has the run: it holds the claim on the released calls (until `until`), or this worker's claim
 * lapsed before its results were posted (the service ended them as interrupted). This worker ran nothing more.
 */
 | {
    status: "claimed";
    runId: string;
    until: string | null;
}
/**
 * The model answered without asking for approval; the run (if one was registered) is completed. `messages` is
 * the whole conversation, the prompt's messages included; `result` the SDK's own (a stream's, read to its end).
 */
 | {
    status: "finished";
    runId: string | null;
    text: string;
    result: GenerateResult<TOOLS> | StreamResult<TOOLS>;
    messages: ModelMessage[];
};
export declare class AiSdkWorker<TOOLS extends ToolSet> {
    #private;
    constructor(options: AiSdkWorkerOptions<TOOLS>);
    /**
     * Runs the model on `messages` for `ownerUid`; if it asks for approval, registers the run (`runId`, or a random
     * UUID) and answers `suspended`, or goes straight on when remembered decisions decided the turn; otherwise
     * `finished` with no run.
     */
    start(input: {
        ownerUid: number;
        messages: ModelMessage[];
        runId?: string;
    }): Promise<WorkerStep<TOOLS>>;
    /**
     * Continues a run from what the service holds: nothing to do while it waits; once released, claims the released
     * calls that have no result yet (refused: `claimed`, and nothing runs), the SDK runs them and the worker posts
     * their results under the claim; once every call of the turn has its result, the verdicts go to the SDK as
     * approval responses and the model goes on. Safe to call again, in any process, at any point: a call whose
     * result the service has never runs again, and one claimed by a worker that died is ended by the service.
     */
    resume(runId: string): Promise<WorkerStep<TOOLS>>;
}
//# sourceMappingURL=index.d.ts.map