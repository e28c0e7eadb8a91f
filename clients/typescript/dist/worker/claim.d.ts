/**
 * A worker's claim on a run's released calls (docs/design.md §15): taken before anything runs, renewed while the
 * tools run, and its id sent with the results. A refusal is not an error for a worker: it is an outcome (another
 * worker has the run, the run is not released yet, or it was cancelled), so the adapters answer it as a step.
 * @module
 */
import type { ApprovalResumeClient, Claim } from "../client.js";
import type { WorkerLogger } from "./calls.js";
/** Why the worker runs nothing: another worker holds (or held) the run, it waits, or it was cancelled. */
export type ClaimRefusal = 
/** Another worker claimed the run (`until`: when its claim lapses), or this worker's claim lapsed. */
{
    refused: "claimed";
    until: string | null;
}
/** The run is not released (it waits for a decision or resumes), or no longer (resumed by another worker). */
 | {
    refused: "not_released";
    runStatus: string | null;
} | {
    refused: "run_cancelled";
};
/** The refusal a 409 of the claim route or of a results post stands for; `null` for any other error. */
export declare function refusalOf(error: unknown): ClaimRefusal | null;
/** The step an adapter answers for a refusal: another worker has the run, it still waits, or it was cancelled. */
export type RefusedStep = {
    status: "claimed";
    runId: string;
    until: string | null;
} | {
    status: "waiting";
    runId: string;
    run: null;
} | {
    status: "closed";
    runId: string;
    run: null;
};
export declare function refusedStep(runId: string, refusal: ClaimRefusal): RefusedStep;
/** A live claim: its id for the results post, and renewal while work runs. */
export declare class HeldClaim {
    #private;
    private readonly client;
    private readonly runId;
    readonly claim: Claim;
    private readonly log;
    constructor(client: ApprovalResumeClient, runId: string, claim: Claim, log: WorkerLogger);
    get id(): string;
    /**
     * Runs `work` while renewing the claim before it lapses. The delay is counted from this machine's clock against
     * the service's `until`; a clock far ahead only renews more often. A failed renewal is logged and stops the
     * renewals: the results post then tells whether the claim still holds.
     */
    renewWhile<T>(work: () => Promise<T>): Promise<T>;
}
/** Claims the run's released calls: the claim, or the refusal that means this worker runs nothing. */
export declare function claimRun(client: ApprovalResumeClient, runId: string, log: WorkerLogger): Promise<HeldClaim | ClaimRefusal>;
//# sourceMappingURL=claim.d.ts.map