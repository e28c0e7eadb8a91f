/** How many turns decided at once one `start` or `resume` goes through before it answers {@link DecidedStep}. */
export const DEFAULT_MAX_DECIDED_TURNS = 10;
/**
 * A run at a turn the worker holds: one it has just registered (the run, or a turn appended), or one it read to
 * resume; the service's view and the worker state of that turn, which a registration's answer does not repeat.
 */
export class WorkerTurn {
    runId;
    run;
    state;
    constructor(runId, run, state) {
        this.runId = runId;
        this.run = run;
        this.state = state;
    }
}
/**
 * The bound an adapter's `maxDecidedTurns` option gives ({@link DEFAULT_MAX_DECIDED_TURNS} when absent): a whole
 * number, 0 for a worker that never goes straight on. Anything else is refused here, at construction, since a
 * fraction or NaN would never be reached and the loop would have no bound.
 */
export function maxDecidedTurns(option) {
    const bound = option ?? DEFAULT_MAX_DECIDED_TURNS;
    if (!Number.isSafeInteger(bound) || bound < 0) {
        throw new RangeError(`maxDecidedTurns must be a whole number of turns, 0 or more; got ${String(option)}`);
    }
    return bound;
}
/** Whether the service answered a registration or a new turn already decided, by remembered decisions. */
export function decidedAtOnce(run) {
    return run.status === "released" || run.status === "resumed";
}
/**
 * Goes on from `next` (what the adapter's resume answered, or a turn just registered) while the turns it registers
 * come back decided: each is handed to `proceed`, the adapter's resume from a run it holds; at most `maxDecided`
 * of them (see {@link maxDecidedTurns}). A turn that waits for a person answers `suspended`, a run that is over
 * `closed`, one being resumed `waiting`; any other step is answered as it is.
 */
export async function goStraightOn(next, proceed, maxDecided) {
    let step = next;
    for (let decided = 0; step instanceof WorkerTurn; decided += 1) {
        const { runId, run } = step;
        if (!decidedAtOnce(run)) {
            // As the Python adapters answer it: only a turn that waits for a person is `suspended`.
            switch (run.status) {
                case "waiting_for_approval":
                    return { status: "suspended", runId, run };
                case "cancelled":
                case "completed":
                    return { status: "closed", runId, run };
                default:
                    return { status: "waiting", runId, run };
            }
        }
        if (decided >= maxDecided) {
            return { status: "decided", runId, run };
        }
        step = await proceed(step);
    }
    return step;
}
//# sourceMappingURL=straight-on.js.map