/**
 * Going straight on when a turn comes back decided (docs/design.md §18): a registration (`POST /v1/runs`) or a new
 * turn (`POST /v1/runs/{id}/turns`) whose every pending call live remembered decisions of one author cover answers
 * the run already `released` or `resumed`, with its `decision`, instead of waiting for a person. The adapters then
 * go on at once exactly as their resume would (claim, run the released calls, post, hand the verdicts to the
 * framework, continue), and again if the framework's next turn is decided as well: this loop, shared by every
 * adapter, with a bound, since a model that proposes an allowed call on every turn would otherwise never stop.
 * @module
 */
import type { RunView } from "../schemas.js";

/** How many turns decided at once one `start` or `resume` goes through before it answers {@link DecidedStep}. */
export const DEFAULT_MAX_DECIDED_TURNS = 10;

/**
 * A run at a turn the worker holds: one it has just registered (the run, or a turn appended), or one it read to
 * resume; the service's view and the worker state of that turn, which a registration's answer does not repeat.
 */
export class WorkerTurn<State> {
    constructor(
        readonly runId: string,
        readonly run: RunView,
        readonly state: State,
    ) {}
}

/** The turn waits for a person: registered, or appended. */
export interface SuspendedStep {
    status: "suspended";
    runId: string;
    run: RunView;
}

/**
 * Remembered decisions decided `maxDecidedTurns` turns in a row and the worker stopped there; the run is
 * `released` or `resumed`, and `resume(runId)` goes on.
 */
export interface DecidedStep {
    status: "decided";
    runId: string;
    run: RunView;
}

/** A run registered again (the same body) once it was over: the service answers it as it stands. */
export interface ClosedStep {
    status: "closed";
    runId: string;
    run: RunView;
}

/** A run another party is resuming (`resuming`): nothing to do until it is decided or over. */
export interface WaitingStep {
    status: "waiting";
    runId: string;
    run: RunView;
}

/**
 * The bound an adapter's `maxDecidedTurns` option gives ({@link DEFAULT_MAX_DECIDED_TURNS} when absent): a whole
 * number, 0 for a worker that never goes straight on. Anything else is refused here, at construction, since a
 * fraction or NaN would never be reached and the loop would have no bound.
 */
export function maxDecidedTurns(option: number | undefined): number {
    const bound = option ?? DEFAULT_MAX_DECIDED_TURNS;
    if (!Number.isSafeInteger(bound) || bound < 0) {
        throw new RangeError(`maxDecidedTurns must be a whole number of turns, 0 or more; got ${String(option)}`);
    }
    return bound;
}

/** Whether the service answered a registration or a new turn already decided, by remembered decisions. */
export function decidedAtOnce(run: RunView): boolean {
    return run.status === "released" || run.status === "resumed";
}

/**
 * Goes on from `next` (what the adapter's resume answered, or a turn just registered) while the turns it registers
 * come back decided: each is handed to `proceed`, the adapter's resume from a run it holds; at most `maxDecided`
 * of them (see {@link maxDecidedTurns}). A turn that waits for a person answers `suspended`, a run that is over
 * `closed`, one being resumed `waiting`; any other step is answered as it is.
 */
export async function goStraightOn<State, Step>(
    next: Step | WorkerTurn<State>,
    proceed: (turn: WorkerTurn<State>) => Promise<Step | WorkerTurn<State>>,
    maxDecided: number,
): Promise<Step | SuspendedStep | DecidedStep | ClosedStep | WaitingStep> {
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
