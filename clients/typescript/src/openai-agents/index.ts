/**
 * `approval-resume/openai-agents`: the OpenAI Agents SDK for JavaScript (`@openai/agents`) in the loop of
 * approval-resume (docs/design.md §15, §16).
 *
 * {@link OpenAIAgentsWorker.start} runs the agent; when it stops on `result.interruptions` (function tools with
 * `needsApproval`), the worker registers a run: the transcript in `openai-chat`, every function tool of the agent
 * declared `executor: "worker"` (editable, below), and the serialized `RunState` as `worker_state`.
 * {@link OpenAIAgentsWorker.resume}, called when the run is released or resumed (the feed, a webhook), reads only
 * the service, so any process continues a run:
 *
 * 1. released: it claims the released calls (refused: another worker has the run, and this one runs nothing),
 *    restores the state (`RunState.fromString`), approves the released calls without a result (`state.approve`), and
 *    the SDK runs them as it runs any approved call, stopped before it would call the model (the model may go on only
 *    once the service holds every result); the worker posts their results under the claim, renewing it meanwhile;
 * 2. resumed: the state is restored again, each released call approved and answered with its recorded result (the
 *    agent's function tools are wrapped to answer a recorded call from the service, so nothing runs twice), each
 *    denied or expired call rejected with the service's exact text (`state.reject(item, {message})`), and the SDK
 *    runs on. New interruptions append a turn (`POST /v1/runs/{id}/turns`, with the new state); a final output
 *    completes the run.
 *
 * Remembered decisions (docs/design.md §18): a registration or a new turn whose every call live rules decide
 * answers the run already `released` or `resumed`; the worker then goes straight on as
 * {@link OpenAIAgentsWorker.resume} would, with no click and no event to wait for, and again while the next turns
 * come back decided (at most `maxDecidedTurns` in one call).
 *
 * Edits: an approval carries no arguments, so the wrapper of each function tool hands the tool the edited arguments
 * (the decider's JSON text, parsed by the tool's own schema as the model's would be) in place of the proposed ones;
 * the worker posts the bare output and the service puts the edit note before it, which the model reads.
 *
 * A released tool that throws (a tool with `errorFunction: null`; the SDK's default error function answers its own
 * fixed text, "An error occurred while running the tool…", posted as an output) posts `Error: tool "{tool}" failed.`
 * (`is_error: true`), and the exception goes to the logger. Inside a released call,
 * {@link currentIdempotencyKey} answers `{run_id}:{call_id}`.
 * @module
 */
import { isDeepStrictEqual } from "node:util";
import { AsyncLocalStorage } from "node:async_hooks";

import {
    type Agent,
    type AgentInputItem,
    type FunctionTool,
    type Model,
    type ModelResponse,
    type RunConfig,
    RunState,
    type RunToolApprovalItem,
    Runner,
    type StreamEvent,
} from "@openai/agents";

import type { ApprovalResumeClient } from "../client.js";
import type { DeclaredTool, Effect, PostedResult, RegisterRun, RunView } from "../schemas.js";
import { type WorkerLogger, defaultLogger, failedText, idempotencyKey, withIdempotencyKey } from "../worker/calls.js";
import { type ClaimRefusal, type HeldClaim, claimRun, refusalOf, refusedStep } from "../worker/claim.js";
import { resultTexts } from "../worker/result-texts.js";
import {
    type DecidedStep,
    type SuspendedStep,
    WorkerTurn,
    goStraightOn,
    maxDecidedTurns,
} from "../worker/straight-on.js";
import { openAiChat, outputText } from "./transcript.js";

export { currentIdempotencyKey, idempotencyKey } from "../worker/calls.js";
export { type ClaimRefusal } from "../worker/claim.js";
export { DEFAULT_MAX_DECIDED_TURNS } from "../worker/straight-on.js";

/** Marks the state as this adapter's, so a run another worker registered is refused rather than misread. */
const KIND = "approval-resume/openai-agents";

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
    | SuspendedStep
    /**
     * Remembered decisions decided `maxDecidedTurns` turns in a row, and the worker went on through each; the last
     * is `released` or `resumed`: {@link OpenAIAgentsWorker.resume} goes on.
     */
    | DecidedStep
    /** Nothing to do yet: the run waits for a decision or resumes. */
    | { status: "waiting"; runId: string; run: RunView | null }
    /** The run is over without this worker: cancelled, or completed before. */
    | { status: "closed"; runId: string; run: RunView | null }
    /** Another worker has the run (it holds the claim until `until`, or this worker's claim lapsed); nothing ran. */
    | { status: "claimed"; runId: string; until: string | null }
    /** The agent gave its final output; the run (if one was registered) is completed. */
    | { status: "finished"; runId: string | null; finalOutput: unknown; history: AgentInputItem[] };

/** What the wrapped tools do in one step of {@link OpenAIAgentsWorker.resume}. */
interface Step {
    runId: string;
    /** Released step: the calls to run, with the edited arguments (JSON text) where the decider edited them. */
    released: Map<string, { edited: string | undefined }>;
    /** Released step: each call's result as it completes. */
    ran: Map<string, PostedResult>;
    /** Resumed step: the service's text of each released call, answered in place of running it, once. */
    recorded: Map<string, { tool: string; text: string }>;
}

const currentStep = new AsyncLocalStorage<Step>();

/** Thrown by the model of the released step: the SDK ran the approved calls and would now call the model. */
class ReleasedCallsRan extends Error {
    constructor() {
        super("the released calls ran; the model is not called until their results are posted");
    }
}

/** The model of the released step, which must never be called (see {@link ReleasedCallsRan}). */
const stopBeforeModel: Model = {
    async getResponse(): Promise<ModelResponse> {
        throw new ReleasedCallsRan();
    },
    async *getStreamedResponse(): AsyncIterable<StreamEvent> {
        throw new ReleasedCallsRan();
    },
};

export class OpenAIAgentsWorker {
    readonly #client: ApprovalResumeClient;
    readonly #agent: AnyAgent;
    readonly #runner: Runner;
    /** The agent of the released step: the same agent whose model throws before it could be called. */
    readonly #releasedAgent: AnyAgent;
    readonly #effects: Record<string, Effect>;
    readonly #registration: OpenAIAgentsWorkerOptions["registration"];
    readonly #log: WorkerLogger;
    readonly #maxDecidedTurns: number;

    constructor(options: OpenAIAgentsWorkerOptions) {
        this.#client = options.client;
        this.#log = options.logger ?? defaultLogger;
        this.#maxDecidedTurns = maxDecidedTurns(options.maxDecidedTurns);
        this.#agent = options.agent.clone({
            tools: options.agent.tools.map((tool) => (tool.type === "function" ? this.#guarded(tool) : tool)),
        });
        // The agent's own model wins over the runner's `model` (selectModel), so the stop goes on the agent.
        this.#releasedAgent = this.#agent.clone({ model: stopBeforeModel });
        this.#runner = new Runner(options.runConfig ?? {});
        this.#effects = options.effects ?? {};
        this.#registration = options.registration;
    }

    /**
     * Runs the agent on `input` for `ownerUid`; on interruptions registers the run (`runId`, or a random UUID) and
     * answers `suspended`, or goes straight on when remembered decisions decided the turn; otherwise `finished` with
     * the final output and no run.
     */
    async start(input: {
        ownerUid: number;
        input: string | AgentInputItem[];
        runId?: string;
    }): Promise<AgentsWorkerStep> {
        const result = await this.#runner.run(this.#agent, input.input);
        if (result.interruptions.length === 0) {
            return { status: "finished", runId: null, finalOutput: result.finalOutput, history: result.history };
        }
        const runId = input.runId ?? crypto.randomUUID();
        const pending = this.#pending(runId, result.interruptions);
        const instructions = typeof this.#agent.instructions === "string" ? this.#agent.instructions : undefined;
        const state = workerState(result.state);
        const run = await this.#client.registerRun({
            ...this.#registration,
            id: runId,
            owner_uid: input.ownerUid,
            messages: openAiChat(withCalls(result.history, result.interruptions), pending, instructions),
            tools: this.#declaredTools(),
            worker_state: state,
        });
        return this.#goStraightOn(new WorkerTurn(runId, run, JSON.stringify(state.state)));
    }

    /**
     * Continues the run from what the service holds (see the module's documentation). Safe to call again after a
     * crash at any point, and in any process: a call whose result the service holds never runs again, and a claim
     * held by a worker that died is ended by the service (its calls interrupted), never run twice.
     */
    async resume(runId: string): Promise<AgentsWorkerStep> {
        const run = await this.#client.getRun(runId, { includeWorkerState: true });
        if (run.status === "waiting_for_approval" || run.status === "resuming") {
            return { status: "waiting", runId, run };
        }
        if (run.status === "cancelled" || run.status === "completed") {
            return { status: "closed", runId, run };
        }
        // The answers after this (results posted) carry no worker_state: the turn keeps the one read here.
        return this.#goStraightOn(await this.#proceed(new WorkerTurn(runId, run, stateOf(runId, run.worker_state))));
    }

    /** Goes on through the turns that come back decided (docs/design.md §18), as {@link resume} would. */
    #goStraightOn(next: AgentsWorkerStep | WorkerTurn<string>): Promise<AgentsWorkerStep> {
        return goStraightOn(next, (turn) => this.#proceed(turn), this.#maxDecidedTurns);
    }

    /**
     * {@link resume} from a released or resumed run and its serialized `RunState`: the step it ends on, or the turn
     * the agent's next interruptions appended.
     */
    async #proceed(turn: WorkerTurn<string>): Promise<AgentsWorkerStep | WorkerTurn<string>> {
        const { runId, state: stateText } = turn;
        let run = turn.run;
        if (run.status === "released") {
            const claim = await claimRun(this.#client, runId, this.#log);
            if (!("claim" in claim)) {
                return refusedStep(runId, claim);
            }
            const posted = await this.#runReleased(runId, stateText, run, claim);
            if (!("turn" in posted)) {
                return refusedStep(runId, posted);
            }
            run = posted;
            if (run.status !== "resumed") {
                return { status: "waiting", runId, run };
            }
        }

        const texts = await resultTexts(this.#client, runId);
        const state = await RunState.fromString(this.#agent, stateText);
        const items = interruptionsOf(runId, state, run);
        const released = new Map((run.released_calls ?? []).map((call) => [call.call_id, call]));
        const recorded = new Map<string, { tool: string; text: string }>();
        for (const [callId, item] of items) {
            const text = texts.get(callId);
            if (text === undefined) {
                throw new Error(`run ${runId}: the model input holds no result for call ${callId}`);
            }
            if (released.has(callId)) {
                state.approve(item);
                recorded.set(callId, { tool: item.name ?? "", text });
            } else {
                state.reject(item, { message: text });
            }
        }
        const step: Step = { runId, released: new Map(), ran: new Map(), recorded };
        const result = await currentStep.run(step, () => this.#runner.run(this.#agent, state));
        if (result.interruptions.length === 0) {
            await this.#client.completeRun(runId);
            return { status: "finished", runId, finalOutput: result.finalOutput, history: result.history };
        }
        const pending = this.#pending(runId, result.interruptions);
        const following = afterResultsOf(result.history, new Set(items.keys()));
        const next = workerState(result.state);
        const appended = await this.#client.appendTurn(runId, {
            messages: openAiChat(withCalls(following, result.interruptions), pending),
            worker_state: next,
        });
        return new WorkerTurn(runId, appended, JSON.stringify(next.state));
    }

    /**
     * Under the claim, the SDK runs the released calls without a result and nothing else: they are approved, the
     * turn's other calls left undecided (the SDK stops on them), and the released step's model throws before the
     * SDK could call it. Posts the results with the claim: the run, or the refusal when the claim was lost meanwhile.
     */
    async #runReleased(
        runId: string,
        stateText: string,
        run: RunView,
        claim: HeldClaim,
    ): Promise<RunView | ClaimRefusal> {
        const calls = claim.claim.released_calls.filter((call) => call.result === undefined);
        if (calls.length === 0) {
            return this.#client.getRun(runId);
        }
        const state = await RunState.fromString(this.#releasedAgent, stateText);
        const items = interruptionsOf(runId, state, run);
        const step: Step = { runId, released: new Map(), ran: new Map(), recorded: new Map() };
        for (const call of calls) {
            const item = items.get(call.call_id);
            if (item === undefined) {
                throw new Error(`run ${runId}: released call ${call.call_id} is not an interruption of its state`);
            }
            step.released.set(call.call_id, { edited: editedArguments(call.arguments, item) });
            state.approve(item);
        }
        await claim.renewWhile(async () => {
            try {
                await currentStep.run(step, () => this.#runner.run(this.#releasedAgent, state));
            } catch (error) {
                if (!causedBy(error, ReleasedCallsRan)) {
                    throw error;
                }
            }
        });
        const results = calls.map((call) => {
            const result = step.ran.get(call.call_id);
            if (result === undefined) {
                throw new Error(`run ${runId}: the SDK did not run released call ${call.call_id}`);
            }
            return result;
        });
        try {
            return await this.#client.postResults(runId, results, { claimId: claim.id });
        } catch (error) {
            const refusal = refusalOf(error);
            if (refusal === null) {
                throw error;
            }
            return refusal;
        }
    }

    /**
     * The tool for this worker: in the released step a released call runs with its idempotency key and the edited
     * arguments where given, its result recorded (an exception: logged, the fixed failed text); in the resumed step a
     * released call is answered with the service's text, once, without running; elsewhere it runs as it is.
     */
    #guarded(tool: FunctionTool<any, any, any>): FunctionTool<any, any, any> {
        const invoke = tool.invoke;
        const log = this.#log;
        const guarded: typeof tool["invoke"] = async (context, input, details) => {
            const step = currentStep.getStore();
            const callId = details?.toolCall?.callId;
            if (step === undefined || callId === undefined) {
                return invoke(context, input, details);
            }
            const recorded = step.recorded.get(callId);
            if (recorded !== undefined && recorded.tool === tool.name) {
                step.recorded.delete(callId);
                return recorded.text;
            }
            const released = step.released.get(callId);
            if (released === undefined) {
                return invoke(context, input, details);
            }
            try {
                const key = idempotencyKey(step.runId, callId);
                const output = await withIdempotencyKey(key, () => invoke(context, released.edited ?? input, details));
                step.ran.set(callId, { call_id: callId, content: outputText(output), is_error: false });
                return output;
            } catch (error) {
                log(`run ${step.runId}: released call ${callId} (${tool.name}) failed`, error);
                const failed = failedText(tool.name);
                step.ran.set(callId, { call_id: callId, content: failed, is_error: true });
                return failed;
            }
        };
        return { ...tool, invoke: guarded };
    }

    /** The call ids the run waits on; refuses an interruption that is not a function tool of the agent. */
    #pending(runId: string, interruptions: RunToolApprovalItem[]): Set<string> {
        const names = new Set(this.#agent.tools.filter((tool) => tool.type === "function").map((tool) => tool.name));
        return new Set(
            interruptions.map((item) => {
                if (item.rawItem.type !== "function_call" || !names.has(item.rawItem.name)) {
                    throw new Error(`run ${runId}: "${item.name ?? "?"}" is not a function tool of the agent`);
                }
                return item.rawItem.callId;
            }),
        );
    }

    /** Every function tool of the agent, run by this worker, edited arguments included. */
    #declaredTools(): DeclaredTool[] {
        return this.#agent.tools
            .filter((tool) => tool.type === "function")
            .map((tool) => ({
                name: tool.name,
                effect: this.#effects[tool.name] ?? "write",
                executor: "worker" as const,
            }));
    }
}

// The run's context type is the application's; the adapter only serializes and restores it.
function workerState(state: RunState<any, AnyAgent>): OpenAIAgentsWorkerState {
    return { kind: KIND, version: 1, state: state.toJSON() };
}

/** The serialized `RunState` of a run's `worker_state`; throws for a run without this adapter's state. */
function stateOf(runId: string, workerState: unknown): string {
    const held = workerState as Partial<OpenAIAgentsWorkerState> | null;
    if (typeof held !== "object" || held === null || held.kind !== KIND) {
        throw new Error(`run ${runId} holds no worker_state of ${KIND}; it cannot be resumed here`);
    }
    if (held.version !== 1) {
        throw new Error(`run ${runId}: worker_state version ${String(held.version)} is not one this adapter reads`);
    }
    return JSON.stringify(held.state);
}

/** The state's interruption for each pending call of the service's turn. */
function interruptionsOf(
    runId: string,
    state: RunState<any, AnyAgent>,
    run: RunView,
): Map<string, RunToolApprovalItem> {
    const byCall = new Map<string, RunToolApprovalItem>();
    for (const item of state.getInterruptions()) {
        if (item.rawItem.type === "function_call") {
            byCall.set(item.rawItem.callId, item);
        }
    }
    const items = new Map<string, RunToolApprovalItem>();
    for (const call of run.turn.pending_calls) {
        const item = byCall.get(call.id);
        if (item === undefined) {
            throw new Error(`run ${runId}: its worker_state has no interruption for call ${call.id}`);
        }
        items.set(call.id, item);
    }
    return items;
}

/** The edited arguments' text, or `undefined` when they equal (as JSON values) what the model proposed. */
function editedArguments(released: string | undefined, item: RunToolApprovalItem): string | undefined {
    const proposed = item.rawItem.type === "function_call" ? item.rawItem.arguments : undefined;
    if (released === undefined || released === proposed) {
        return undefined;
    }
    const same = proposed !== undefined && isDeepStrictEqual(JSON.parse(released), JSON.parse(proposed));
    return same ? undefined : released;
}

/**
 * The history with the calls the run stopped on: the SDK's history ends before the interrupted calls, which it
 * keeps in the state's interruptions.
 */
function withCalls(history: AgentInputItem[], interruptions: RunToolApprovalItem[]): AgentInputItem[] {
    const listed = new Set(history.flatMap((item) => (item.type === "function_call" ? [item.callId] : [])));
    const calls = interruptions.flatMap((item) =>
        item.rawItem.type === "function_call" && !listed.has(item.rawItem.callId) ? [item.rawItem] : [],
    );
    return [...history, ...calls];
}

/** The history after the results of the decided turn's calls: what followed the model input. */
function afterResultsOf(history: AgentInputItem[], decided: ReadonlySet<string>): AgentInputItem[] {
    let last = -1;
    history.forEach((item, index) => {
        if (item.type === "function_call_result" && decided.has(item.callId)) {
            last = index;
        }
    });
    return history.slice(last + 1);
}

/** Whether `error` or one of its causes is a `kind` (the runner may wrap what the model threw). */
function causedBy(error: unknown, kind: new () => Error): boolean {
    let current: unknown = error;
    while (current instanceof Error) {
        if (current instanceof kind) {
            return true;
        }
        current = (current as Error).cause;
    }
    return false;
}

