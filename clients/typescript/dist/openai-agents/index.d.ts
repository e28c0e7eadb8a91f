import { type Agent, type AgentInputItem, type RunConfig } from "@openai/agents";
import type { ApprovalResumeClient } from "../client.js";
import type { Effect, RegisterRun, RunView } from "../schemas.js";
import { type WorkerLogger } from "../worker/calls.js";
import { type DecidedStep, type SuspendedStep } from "../worker/straight-on.js";
export { currentIdempotencyKey, idempotencyKey } from "../worker/calls.js";
export { type ClaimRefusal } from "../worker/claim.js";
export { DEFAULT_MAX_DECIDED_TURNS } from "../worker/straight-on.js";
/** Marks the state as this adapter's, so a run another worker registered is refused rather than misread. */
declare const KIND = "approval-resume/openai-agents";
/** The `worker_state` of a run: the SDK's serialized `RunState` (`state.toJSON()`). */
export interface OpenAIAgentsWorkerState {
    kind: typeof KIND;
    version: 1;
    state: unknown;
}
/** Any agent: its context and output types are the application's; the adapter only runs and restores it. */
type AnyAgent = Agent<any, any>;
export interface OpenAIAgentsWorkerOptions {
    /** A client with an API key of scopes `runs:write` and `runs:read`. */
    client: ApprovalResumeClient;
    /** The agent; its function tools that need a person have `needsApproval`. */
    agent: AnyAgent;
    /** The runner's configuration (model provider, tracing…), for every run of the agent. */
    runConfig?: Partial<RunConfig>;
    /** Each tool's effect; absent: `write` for a tool that may need approval, else `read`. */
    effects?: Record<string, Effect>;
    /** Further members of every registration: `privacy_level`, `approval_ttl_secs`, `require_second_approver`… */
    registration?: Omit<RegisterRun, "id" | "owner_uid" | "format" | "messages" | "tools" | "worker_state">;
    /** Where a released tool's exception goes (never to the service). Default `console.error`. */
    logger?: WorkerLogger;
    /**
     * How many turns remembered decisions decide at once one {@link OpenAIAgentsWorker.start} or
     * {@link OpenAIAgentsWorker.resume} goes straight on through before answering `decided`
     * ({@link DEFAULT_MAX_DECIDED_TURNS} when absent): a whole number, 0 to answer `decided` at once; anything else
     * makes the constructor throw a RangeError.
     */
    maxDecidedTurns?: number;
}
/** Where a run stands after {@link OpenAIAgentsWorker.start} or {@link OpenAIAgentsWorker.resume}. */
export type AgentsWorkerStep = 
/** The agent stopped on interruptions: the run waits for a decision (registered, or a new turn appended). */
SuspendedStep
/**
 * Remembered decisions decided `maxDecidedTurns` turns in a row, and the worker went on through each; the last
 * is `released` or `resumed`: {@link OpenAIAgentsWorker.resume} goes on.
 */
 | DecidedStep
/** Nothing to do yet: the run waits for a decision or resumes. */
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
/** Another worker has the run (it holds the claim until `until`, or this worker's claim lapsed); nothing ran. */
 | {
    status: "claimed";
    runId: string;
    until: string | null;
}
/** The agent gave its final output; the run (if one was registered) is completed. */
 | {
    status: "finished";
    runId: string | null;
    finalOutput: unknown;
    history: AgentInputItem[];
};
export declare class OpenAIAgentsWorker {
    #private;
    constructor(options: OpenAIAgentsWorkerOptions);
    /**
     * Runs the agent on `input` for `ownerUid`; on interruptions registers the run (`runId`, or a random UUID) and
     * answers `suspended`, or goes straight on when remembered decisions decided the turn; otherwise `finished` with
     * the final output and no run.
     */
    start(input: {
        ownerUid: number;
        input: string | AgentInputItem[];
        runId?: string;
    }): Promise<AgentsWorkerStep>;
    /**
     * Continues the run from what the service holds (see the module's documentation). Safe to call again after a
     * crash at any point, and in any process: a call whose result the service holds never runs again, and a claim
     * held by a worker that died is ended by the service (its calls interrupted), never run twice.
     */
    resume(runId: string): Promise<AgentsWorkerStep>;
}
//# sourceMappingURL=index.d.ts.map