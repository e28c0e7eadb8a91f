/**
 * `approval-resume/ai-sdk`: the Vercel AI SDK (`ai` 7) in the loop of approval-resume (docs/design.md §15, §16).
 *
 * {@link AiSdkWorker.start} runs `generateText` (or `streamText`, with the `stream` option); when the model calls a
 * tool that needs approval (`toolApproval` of the settings, or the tool's `needsApproval`), the SDK answers
 * `tool-approval-request` parts, and the worker registers a run: the transcript in `openai-chat`, every tool
 * declared `executor: "worker"` (editable: the worker runs an edited call, below), and the SDK's messages as
 * `worker_state`. {@link AiSdkWorker.resume}, called when the feed or a webhook says the run was released or
 * resumed, continues from the service alone: it claims the released calls (refused: another worker has the run, and
 * this one runs nothing), the SDK runs them as it runs any approved call, the worker posts their results under the
 * claim; then each verdict becomes a `tool-approval-response` (denied or expired: `approved: false` with the
 * service's exact result text as `reason`, which the SDK hands the model in an `execution-denied` result) and the
 * model goes on. A new approval request appends a turn; an answer without one completes the run.
 *
 * Remembered decisions (docs/design.md §18): a registration or a new turn whose every call live rules decide
 * answers the run already `released` or `resumed`; the worker then goes straight on as {@link AiSdkWorker.resume}
 * would, with no click and no event to wait for, and again while the next turns come back decided (at most
 * `maxDecidedTurns` in one call).
 *
 * Edits: an approval response carries no arguments, so the worker hands the tool the edited arguments itself: the
 * tools the SDK runs in the released step are wrapped, and a released call whose arguments the decider edited
 * reaches the tool's `execute` with those arguments (checked against the tool's input schema) in place of the
 * model's. The worker posts the bare output; the service puts the edit note before it, which the model reads.
 * @module
 */
import { isDeepStrictEqual } from "node:util";

import {
    type ModelMessage,
    type StreamTextResult,
    type Tool,
    type ToolApprovalResponse,
    type ToolModelMessage,
    type ToolResultPart,
    type ToolSet,
    asSchema,
    generateText,
    streamText,
} from "ai";

import type { ApprovalResumeClient } from "../client.js";
import type { DeclaredTool, Effect, PostedResult, RegisterRun, ReleasedCall, RunView } from "../schemas.js";
import {
    type WorkerLogger,
    defaultLogger,
    failedText,
    idempotencyKey,
    withIdempotencyKey,
} from "../worker/calls.js";
import { type ClaimRefusal, type HeldClaim, claimRun, refusalOf, refusedStep } from "../worker/claim.js";
import { resultTexts } from "../worker/result-texts.js";
import {
    type DecidedStep,
    type SuspendedStep,
    WorkerTurn,
    goStraightOn,
    maxDecidedTurns,
} from "../worker/straight-on.js";
import { argumentsText, openAiChat, outputText, toolCalls, toolResults } from "./transcript.js";
import { messagesOf, workerState } from "./worker-state.js";

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
    | SuspendedStep
    /**
     * Remembered decisions decided `maxDecidedTurns` turns in a row, and the worker went on through each; the last
     * is `released` or `resumed`: {@link AiSdkWorker.resume} goes on.
     */
    | DecidedStep
    /** Nothing to do yet: the run waits for a decision, or the service still runs its own tools. */
    | { status: "waiting"; runId: string; run: RunView | null }
    /** The run is over without this worker: cancelled, or completed before. */
    | { status: "closed"; runId: string; run: RunView | null }
    /**
     * Another worker has the run: it holds the claim on the released calls (until `until`), or this worker's claim
     * lapsed before its results were posted (the service ended them as interrupted). This worker ran nothing more.
     */
    | { status: "claimed"; runId: string; until: string | null }
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

/** One model run, whichever of generateText and streamText made it. */
interface Generation<TOOLS extends ToolSet> {
    result: GenerateResult<TOOLS> | StreamResult<TOOLS>;
    text: string;
    /** The ids of the calls the last step asks approval for. */
    pending: Set<string>;
    responseMessages: ModelMessage[];
}

/** Thrown inside `prepareStep` to stop `generateText` once the SDK has run the released calls (see runReleased). */
class ReleasedCallsRan extends Error {
    constructor(readonly results: ToolResultPart[]) {
        super("the released calls ran; the model is not called until their results are posted");
    }
}

/** The approval request of a pending call, from the worker state. */
interface Request {
    approvalId: string;
    toolName: string;
    input: unknown;
}

export class AiSdkWorker<TOOLS extends ToolSet> {
    readonly #client: ApprovalResumeClient;
    readonly #settings: GenerateSettings<TOOLS>;
    readonly #effects: Partial<Record<string, Effect>>;
    readonly #registration: AiSdkWorkerOptions<TOOLS>["registration"];
    readonly #stream: AiSdkWorkerOptions<TOOLS>["stream"];
    readonly #log: WorkerLogger;
    readonly #maxDecidedTurns: number;

    constructor(options: AiSdkWorkerOptions<TOOLS>) {
        this.#client = options.client;
        this.#settings = options.settings;
        this.#effects = options.effects ?? {};
        this.#registration = options.registration;
        this.#stream = options.stream;
        this.#log = options.logger ?? defaultLogger;
        this.#maxDecidedTurns = maxDecidedTurns(options.maxDecidedTurns);
    }

    /**
     * Runs the model on `messages` for `ownerUid`; if it asks for approval, registers the run (`runId`, or a random
     * UUID) and answers `suspended`, or goes straight on when remembered decisions decided the turn; otherwise
     * `finished` with no run.
     */
    async start(input: { ownerUid: number; messages: ModelMessage[]; runId?: string }): Promise<WorkerStep<TOOLS>> {
        const generation = await this.#generate(input.messages);
        const messages = [...input.messages, ...generation.responseMessages];
        if (generation.pending.size === 0) {
            return { status: "finished", runId: null, text: generation.text, result: generation.result, messages };
        }
        const runId = input.runId ?? crypto.randomUUID();
        const run = await this.#client.registerRun({
            ...this.#registration,
            id: runId,
            owner_uid: input.ownerUid,
            messages: openAiChat(messages, generation.pending, this.#settings.system),
            tools: this.#declaredTools(),
            worker_state: workerState(messages),
        });
        return this.#goStraightOn(new WorkerTurn(runId, run, messages));
    }

    /**
     * Continues a run from what the service holds: nothing to do while it waits; once released, claims the released
     * calls that have no result yet (refused: `claimed`, and nothing runs), the SDK runs them and the worker posts
     * their results under the claim; once every call of the turn has its result, the verdicts go to the SDK as
     * approval responses and the model goes on. Safe to call again, in any process, at any point: a call whose
     * result the service has never runs again, and one claimed by a worker that died is ended by the service.
     */
    async resume(runId: string): Promise<WorkerStep<TOOLS>> {
        const run = await this.#client.getRun(runId, { includeWorkerState: true });
        if (run.status === "waiting_for_approval" || run.status === "resuming") {
            return { status: "waiting", runId, run };
        }
        if (run.status === "cancelled" || run.status === "completed") {
            return { status: "closed", runId, run };
        }
        const turn = new WorkerTurn(runId, run, messagesOf(runId, run.worker_state));
        return this.#goStraightOn(await this.#proceed(turn));
    }

    /** Goes on through the turns that come back decided (docs/design.md §18), as {@link resume} would. */
    #goStraightOn(next: WorkerStep<TOOLS> | WorkerTurn<ModelMessage[]>): Promise<WorkerStep<TOOLS>> {
        return goStraightOn(next, (turn) => this.#proceed(turn), this.#maxDecidedTurns);
    }

    /**
     * {@link resume} from a released or resumed run and the SDK's messages through its turn: the step it ends on, or
     * the turn the model's next approval request appended.
     */
    async #proceed(turn: WorkerTurn<ModelMessage[]>): Promise<WorkerStep<TOOLS> | WorkerTurn<ModelMessage[]>> {
        const { runId, state: history } = turn;
        let run = turn.run;
        const requests = approvalRequestsOf(runId, history, run);
        if (run.status === "released") {
            const claimed = await claimRun(this.#client, runId, this.#log);
            if (!("claim" in claimed)) {
                return refusedStep(runId, claimed);
            }
            const posted = await this.#runReleased(runId, history, requests, claimed);
            if (!("turn" in posted)) {
                return refusedStep(runId, posted);
            }
            run = posted;
            if (run.status !== "resumed") {
                return { status: "waiting", runId, run };
            }
        }
        const answer = await this.#verdicts(runId, run, requests, run.released_calls ?? []);
        const generation = await this.#generate([...history, answer]);
        const messages = [...history, answer, ...generation.responseMessages];
        if (generation.pending.size === 0) {
            await this.#client.completeRun(runId);
            return { status: "finished", runId, text: generation.text, result: generation.result, messages };
        }
        // What followed the model input: the SDK's answer without the results of the decided turn, which the service
        // adds itself (the denied ones the SDK wrote from the approval responses).
        const decided = new Set(run.turn.pending_calls.map((call) => call.id));
        const following = withoutResultsOf(generation.responseMessages, decided);
        const appended = await this.#client.appendTurn(runId, {
            messages: openAiChat(following, generation.pending),
            worker_state: workerState(messages),
        });
        return new WorkerTurn(runId, appended, messages);
    }

    /**
     * Under the claim, lets the SDK run the released calls that have no result, and nothing else: `generateText`
     * with their approval responses runs the approved tools before its first step, and this `prepareStep` takes
     * their results and stops it before the model is called, since the model may only go on once the service holds
     * the results (and the other calls' texts). Posts the results with the claim: the run, or the refusal when the
     * claim was lost meanwhile.
     */
    async #runReleased(
        runId: string,
        history: ModelMessage[],
        requests: Map<string, Request>,
        claim: HeldClaim,
    ): Promise<RunView | ClaimRefusal> {
        const calls = claim.claim.released_calls.filter((call) => call.result === undefined);
        if (calls.length === 0) {
            return this.#client.getRun(runId);
        }
        const released = new Map<string, { tool: string; edited: unknown }>();
        const responses: ToolApprovalResponse[] = calls.map((call) => {
            const request = requests.get(call.call_id);
            if (request === undefined) {
                throw new Error(`run ${runId}: released call ${call.call_id} is not a call of the run's worker_state`);
            }
            released.set(call.call_id, { tool: request.toolName, edited: editedArguments(call, request) });
            return { type: "tool-approval-response", approvalId: request.approvalId, approved: true };
        });
        const ran = await claim.renewWhile(() =>
            this.#runTools(runId, history, responses, released),
        );
        const results: PostedResult[] = calls.map((call) => {
            const result = ran.get(call.call_id);
            if (result === undefined) {
                throw new Error(`run ${runId}: the SDK did not run released call ${call.call_id}`);
            }
            const { content, is_error } = outputText(result.output);
            // A tool that threw: the SDK's error text is the exception's message, which the service must not store.
            return { call_id: call.call_id, content: is_error ? failedText(result.toolName) : content, is_error };
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

    async #runTools(
        runId: string,
        history: ModelMessage[],
        responses: ToolApprovalResponse[],
        released: Map<string, { tool: string; edited: unknown }>,
    ): Promise<Map<string, ToolResultPart>> {
        try {
            await generateText({
                ...this.#settings,
                tools: this.#releasedTools(runId, released),
                messages: [...history, { role: "tool", content: responses }],
                prepareStep: ({ messages }) => {
                    const last = messages[messages.length - 1];
                    const ran = last?.role === "tool" ? toolResults(last) : [];
                    throw new ReleasedCallsRan(ran.filter((result) => released.has(result.toolCallId)));
                },
            } as GenerateOptions<TOOLS>);
        } catch (error) {
            if (error instanceof ReleasedCallsRan) {
                return new Map(error.results.map((result) => [result.toolCallId, result]));
            }
            throw error;
        }
        throw new Error(`run ${runId}: generateText called the model before the released calls ran`);
    }

    /**
     * The settings' tools for the released step: each one's `execute` runs a released call with its idempotency key
     * ({@link currentIdempotencyKey}) and the edited arguments in place of the model's where the decider edited
     * them; an exception is logged here, and the SDK's error result for it is posted as the fixed failed text.
     */
    #releasedTools(runId: string, released: Map<string, { tool: string; edited: unknown }>): TOOLS {
        const wrapped: ToolSet = {};
        for (const [name, tool] of Object.entries(this.#settings.tools)) {
            const execute = tool.execute;
            if (execute === undefined) {
                wrapped[name] = tool;
                continue;
            }
            wrapped[name] = {
                ...tool,
                execute: async (input: unknown, options: { toolCallId: string }) => {
                    const call = released.get(options.toolCallId);
                    if (call === undefined) {
                        return execute(input, options as never);
                    }
                    try {
                        const args = call.edited === undefined ? input : await validInput(name, tool, call.edited);
                        return await withIdempotencyKey(idempotencyKey(runId, options.toolCallId), async () =>
                            execute(args, options as never),
                        );
                    } catch (error) {
                        this.#log(`run ${runId}: released call ${options.toolCallId} (${name}) failed`, error);
                        throw error;
                    }
                },
            } as Tool;
        }
        return wrapped as TOOLS;
    }

    /**
     * The tool message that answers the decided turn: for each pending call its approval response, approved for a
     * released call (with its result, so the SDK does not run it again), denied for the others with the text the
     * service wrote for it (the denial or expiry of docs/design.md §3), read from the model input, and its
     * `execution-denied` result with that text as `reason`, as the SDK would write it. An approved
     * call's text is the service's: the edit note before the output of an edited call.
     */
    async #verdicts(
        runId: string,
        run: RunView,
        requests: Map<string, Request>,
        released: ReleasedCall[],
    ): Promise<ToolModelMessage> {
        const texts = await resultTexts(this.#client, runId);
        const releasedById = new Map(released.map((call) => [call.call_id, call]));
        const content: ToolModelMessage["content"] = [];
        for (const call of run.turn.pending_calls) {
            const request = requests.get(call.id)!;
            const text = texts.get(call.id);
            if (text === undefined) {
                throw new Error(`run ${runId}: the model input holds no result for call ${call.id}`);
            }
            const releasedCall = releasedById.get(call.id);
            if (releasedCall === undefined) {
                // The denied result is written here, not left to the SDK: `ai` 7 keeps the result it would write out
                // of `response.messages`, and a later step's prompt needs one for every call of the history.
                content.push(
                    { type: "tool-approval-response", approvalId: request.approvalId, approved: false, reason: text },
                    {
                        type: "tool-result",
                        toolCallId: call.id,
                        toolName: request.toolName,
                        output: { type: "execution-denied", reason: text },
                    },
                );
                continue;
            }
            const isError = releasedCall.result?.is_error === true;
            content.push(
                { type: "tool-approval-response", approvalId: request.approvalId, approved: true },
                {
                    type: "tool-result",
                    toolCallId: call.id,
                    toolName: request.toolName,
                    output: isError ? { type: "error-text", value: text } : { type: "text", value: text },
                },
            );
        }
        return { role: "tool", content };
    }

    async #generate(messages: ModelMessage[]): Promise<Generation<TOOLS>> {
        const options = { ...this.#settings, messages } as GenerateOptions<TOOLS>;
        if (this.#stream === undefined) {
            const result = await generateText(options);
            const pending = approvalRequests(result.content);
            // `responseMessages`, every step's: `response.messages` is the last step's alone in `ai` 7, so a step
            // before the approval (a read tool) would be missing from the worker state.
            return { result, text: result.text, pending, responseMessages: result.responseMessages };
        }
        const result = streamText(options as Parameters<typeof streamText<TOOLS>>[0]);
        await this.#stream(result as unknown as StreamTextResult<TOOLS, never, never>);
        // Read to its end here too (the SDK tees the stream), so the answer is whole whatever the consumer does.
        await result.consumeStream();
        const [content, responseMessages, text] = await Promise.all([
            result.content,
            result.responseMessages,
            result.text,
        ]);
        return { result, text, pending: approvalRequests(content), responseMessages };
    }

    /** Every tool of the settings, run by this worker, edited arguments included. */
    #declaredTools(): DeclaredTool[] {
        const approval = (this.#settings as { toolApproval?: unknown }).toolApproval;
        return Object.entries(this.#settings.tools).map(([name, tool]) => ({
            name,
            effect: this.#effects[name] ?? (mayNeedApproval(tool, name, approval) ? "write" : "read"),
            executor: "worker",
        }));
    }
}


/**
 * Whether a tool may stop for approval: its own `needsApproval`, or the settings' `toolApproval` (a function for
 * every tool, or an entry for this one that is not a fixed "approved" or "not-applicable").
 */
function mayNeedApproval(tool: Tool, name: string, approval: unknown): boolean {
    if (tool.needsApproval !== undefined && tool.needsApproval !== false) {
        return true;
    }
    if (typeof approval === "function") {
        return true;
    }
    if (typeof approval === "object" && approval !== null) {
        const entry = (approval as Record<string, unknown>)[name];
        const status = typeof entry === "object" && entry !== null ? (entry as { type?: unknown }).type : entry;
        return entry !== undefined && status !== "approved" && status !== "not-applicable";
    }
    return false;
}

/** The edited arguments of a released call, parsed; `undefined` when they are the ones the model proposed. */
function editedArguments(call: ReleasedCall, request: Request): unknown {
    if (call.arguments === undefined || call.arguments === argumentsText(request.input)) {
        return undefined;
    }
    const edited: unknown = JSON.parse(call.arguments);
    return isDeepStrictEqual(edited, JSON.parse(argumentsText(request.input))) ? undefined : edited;
}

/** Edited arguments as the tool takes them: through its input schema, as the SDK does for the model's. */
async function validInput(name: string, tool: Tool, edited: unknown): Promise<unknown> {
    const schema = asSchema(tool.inputSchema);
    if (schema.validate === undefined) {
        return edited;
    }
    const checked = await schema.validate(edited);
    if (!checked.success) {
        throw new Error(`the edited arguments of tool "${name}" do not fit its input schema`, { cause: checked.error });
    }
    return checked.value;
}

/**
 * The ids of the calls a step's content asks a person to approve (not those `toolApproval` approved or denied by
 * itself, which the SDK marks `isAutomatic`).
 */
function approvalRequests(content: ReadonlyArray<{ type: string }>): Set<string> {
    const ids = new Set<string>();
    for (const part of content) {
        if (part.type === "tool-approval-request") {
            const request = part as unknown as { toolCall: { toolCallId: string }; isAutomatic?: boolean };
            if (request.isAutomatic !== true) {
                ids.add(request.toolCall.toolCallId);
            }
        }
    }
    return ids;
}

/**
 * For each pending call of the run's turn, the SDK's approval id, tool and input, from the assistant messages of
 * the state; throws when the state does not hold the turn the service waits on.
 */
function approvalRequestsOf(runId: string, history: readonly ModelMessage[], run: RunView): Map<string, Request> {
    const calls = new Map(history.flatMap(toolCalls).map((call) => [call.toolCallId, call]));
    const ids = new Map<string, Request>();
    for (const message of history) {
        if (message.role === "assistant" && typeof message.content !== "string") {
            for (const part of message.content) {
                const call = part.type === "tool-approval-request" ? calls.get(part.toolCallId) : undefined;
                if (part.type === "tool-approval-request" && call !== undefined) {
                    const { toolName, input } = call;
                    ids.set(part.toolCallId, { approvalId: part.approvalId, toolName, input });
                }
            }
        }
    }
    for (const call of run.turn.pending_calls) {
        if (!ids.has(call.id)) {
            throw new Error(`run ${runId}: its worker_state holds no approval request for call ${call.id}`);
        }
    }
    return ids;
}

function withoutResultsOf(messages: readonly ModelMessage[], calls: ReadonlySet<string>): ModelMessage[] {
    return messages.flatMap((message): ModelMessage[] => {
        if (message.role !== "tool") {
            return [message];
        }
        const content = message.content.filter((part) => part.type !== "tool-result" || !calls.has(part.toolCallId));
        return content.length === 0 ? [] : [{ ...message, content }];
    });
}
