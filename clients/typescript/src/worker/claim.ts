/**
 * A worker's claim on a run's released calls (docs/design.md §15): taken before anything runs, renewed while the
 * tools run, and its id sent with the results. A refusal is not an error for a worker: it is an outcome (another
 * worker has the run, the run is not released yet, or it was cancelled), so the adapters answer it as a step.
 * @module
 */
import type { ApprovalResumeClient, Claim } from "../client.js";
import { ApiError, ClaimLapsedError, ClaimedError, NotReleasedError } from "../errors.js";
import type { WorkerLogger } from "./calls.js";

/** Why the worker runs nothing: another worker holds (or held) the run, it waits, or it was cancelled. */
export type ClaimRefusal =
    /** Another worker claimed the run (`until`: when its claim lapses), or this worker's claim lapsed. */
    | { refused: "claimed"; until: string | null }
    /** The run is not released (it waits for a decision or resumes), or no longer (resumed by another worker). */
    | { refused: "not_released"; runStatus: string | null }
    | { refused: "run_cancelled" };

/** The refusal a 409 of the claim route or of a results post stands for; `null` for any other error. */
export function refusalOf(error: unknown): ClaimRefusal | null {
    if (error instanceof ClaimedError) {
        return { refused: "claimed", until: error.until };
    }
    if (error instanceof ClaimLapsedError) {
        return { refused: "claimed", until: null };
    }
    if (error instanceof NotReleasedError && error.status === 409) {
        return { refused: "not_released", runStatus: error.runStatus };
    }
    if (error instanceof ApiError && error.status === 409 && error.code === "run_cancelled") {
        return { refused: "run_cancelled" };
    }
    return null;
}

/** The step an adapter answers for a refusal: another worker has the run, it still waits, or it was cancelled. */
export type RefusedStep =
    | { status: "claimed"; runId: string; until: string | null }
    | { status: "waiting"; runId: string; run: null }
    | { status: "closed"; runId: string; run: null };

export function refusedStep(runId: string, refusal: ClaimRefusal): RefusedStep {
    switch (refusal.refused) {
        case "claimed":
            return { status: "claimed", runId, until: refusal.until };
        case "not_released":
            // Resumed: another worker posted the results; waiting or resuming: it may still release.
            return refusal.runStatus === "resumed"
                ? { status: "claimed", runId, until: null }
                : { status: "waiting", runId, run: null };
        case "run_cancelled":
            return { status: "closed", runId, run: null };
    }
}

/** Renewals come at this share of the time the claim has left, so one late renewal still lands before `until`. */
const RENEW_AT = 1 / 3;
/** Never renew more often than this, whatever the clocks say. */
const MIN_RENEW_MS = 500;

/** A live claim: its id for the results post, and renewal while work runs. */
export class HeldClaim {
    #until: string;

    constructor(
        private readonly client: ApprovalResumeClient,
        private readonly runId: string,
        readonly claim: Claim,
        private readonly log: WorkerLogger,
    ) {
        this.#until = claim.until;
    }

    get id(): string {
        return this.claim.claim_id;
    }

    /**
     * Runs `work` while renewing the claim before it lapses. The delay is counted from this machine's clock against
     * the service's `until`; a clock far ahead only renews more often. A failed renewal is logged and stops the
     * renewals: the results post then tells whether the claim still holds.
     */
    async renewWhile<T>(work: () => Promise<T>): Promise<T> {
        let timer: NodeJS.Timeout | undefined;
        let stopped = false;
        const schedule = () => {
            const left = Date.parse(this.#until) - Date.now();
            timer = setTimeout(renew, Math.max(MIN_RENEW_MS, left * RENEW_AT));
        };
        const renew = () => {
            this.client.claim(this.runId, this.id).then(
                (renewed) => {
                    this.#until = renewed.until;
                    if (!stopped) {
                        schedule();
                    }
                },
                (error: unknown) => this.log(`run ${this.runId}: renewing claim ${this.id} failed`, error),
            );
        };
        schedule();
        try {
            return await work();
        } finally {
            stopped = true;
            clearTimeout(timer);
        }
    }
}

/** Claims the run's released calls: the claim, or the refusal that means this worker runs nothing. */
export async function claimRun(
    client: ApprovalResumeClient,
    runId: string,
    log: WorkerLogger,
): Promise<HeldClaim | ClaimRefusal> {
    try {
        return new HeldClaim(client, runId, await client.claim(runId), log);
    } catch (error) {
        const refusal = refusalOf(error);
        if (refusal === null) {
            throw error;
        }
        return refusal;
    }
}
