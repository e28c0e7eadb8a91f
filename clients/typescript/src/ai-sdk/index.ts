/**
 * `approval-resume/ai-sdk`: the Vercel AI SDK (`ai`, 6.x) in the loop of approval-resume (docs/design.md §15, §16).
 *
 * {@link AiSdkWorker.start} runs `generateText`; when the model calls a tool with `needsApproval`, the SDK answers
 * `tool-approval-request` parts, and the worker registers a run: the transcript in `openai-chat`, every tool
 * declared `executor: "worker"` and `editable: false` (an approval response cannot carry other arguments, so the SDK
 * cannot run an edit), and the SDK's messages as `worker_state`. {@link AiSdkWorker.resume}, called when the feed or
 * a webhook says the run was released or resumed, continues from the service alone: each verdict becomes a
 * `tool-approval-response` (denied or expired: `approved: false` with the service's exact result text as `reason`,
 * which the SDK hands the model in an `execution-denied` result); the SDK runs the released calls itself, the worker
 * posts their results, and `generateText` goes on. A new approval request appends a turn; an answer without one
 * completes the run.
 * @module
 */
import {
    type GenerateTextResult,
    type ModelMessage,
    type Output,
    type ToolApprovalResponse,
    type ToolModelMessage,
    type ToolResultPart,
    type ToolSet,
    generateText,
} from "ai";

import type { ApprovalResumeClient } from "../client.js";
import type { ChatMessage, DeclaredTool, Effect, RegisterRun, ReleasedCall, RunView } from "../schemas.js";
import { argumentsText, openAiChat, outputText, toolCalls, toolResults } from "./transcript.js";
import { messagesOf, workerState } from "./worker-state.js";

export { type AiSdkWorkerState } from "./worker-state.js";

/** `generateText`'s options for these tools, without the prompt, which the worker sets on every call. */
export type GenerateSettings<TOOLS extends ToolSet> = Omit<
    Parameters<typeof generateText<TOOLS>>[0],
    "prompt" | "messages" | "system"
> & {
    tools: TOOLS;
    /** The system prompt; also the first message of the registered transcript. */
    system?: string;
};

export interface AiSdkWorkerOptions<TOOLS extends ToolSet> {
    /** A client with an API key of scopes `runs:write` and `runs:read`. */
    client: ApprovalResumeClient;
    /** The model, the tools (those to approve with `needsApproval`), `stopWhen` and any other option. */
    settings: GenerateSettings<TOOLS>;
    /** Each tool's effect; absent: `write` for a tool with `needsApproval`, else `read`. */
    effects?: Partial<Record<Extract<keyof TOOLS, string>, Effect>>;
    /** Further members of every registration: `privacy_level`, `approval_ttl_secs`, `require_second_approver`… */
    registration?: Omit<RegisterRun, "id" | "owner_uid" | "format" | "messages" | "tools" | "worker_state">;
}

/** Where a run stands after {@link AiSdkWorker.start} or {@link AiSdkWorker.resume}. */
export type WorkerStep<TOOLS extends ToolSet> =
    /** The model asked for approval: the run waits for a decision (registered, or a new turn appended). */
    | { status: "suspended"; runId: string; run: RunView }
    /** Nothing to do yet: the run waits for a decision, or the service still runs its own tools. */
    | { status: "waiting"; runId: string; run: RunView }
    /** The run is over without this worker: cancelled, or completed before. */
    | { status: "closed"; runId: string; run: RunView }
    /**
     * The model answered without asking for approval; the run (if one was registered) is completed. `messages` is
     * the whole conversation, the prompt's messages included.
     */
    | {
          status: "finished";
          runId: string | null;
          result: GenerateTextResult<TOOLS, Output.Output>;
          messages: ModelMessage[];
      };

/** Thrown inside `prepareStep` to stop `generateText` once the SDK has run the released calls (see runReleased). */
class ReleasedCallsRan extends Error {
    constructor(readonly results: ToolResultPart[]) {
        super("the released calls ran; the model is not called until their results are posted");
    }
}

export class AiSdkWorker<TOOLS extends ToolSet> {
    readonly #client: ApprovalResumeClient;
    readonly #settings: GenerateSettings<TOOLS>;
    readonly #effects: Partial<Record<string, Effect>>;
    readonly #registration: AiSdkWorkerOptions<TOOLS>["registration"];

    constructor(options: AiSdkWorkerOptions<TOOLS>) {
        this.#client = options.client;
        this.#settings = options.settings;
        this.#effects = options.effects ?? {};
        this.#registration = options.registration;
    }

    /**
     * Runs the model on `messages` for `ownerUid`; if it asks for approval, registers the run (`runId`, or a random
     * UUID) and answers `suspended`; otherwise `finished` with no run.
     */
    async start(input: { ownerUid: number; messages: ModelMessage[]; runId?: string }): Promise<WorkerStep<TOOLS>> {
        const result = await this.#generate(input.messages);
        const messages = [...input.messages, ...result.response.messages];
        const pending = approvalRequests(result);
        if (pending.size === 0) {
            return { status: "finished", runId: null, result, messages };
        }
        const runId = input.runId ?? crypto.randomUUID();
        const run = await this.#client.registerRun({
            ...this.#registration,
            id: runId,
            owner_uid: input.ownerUid,
            messages: openAiChat(messages, pending, this.#settings.system),
            tools: this.#declaredTools(),
            worker_state: workerState(messages),
        });
        return { status: "suspended", runId, run };
    }

    /**
     * Continues a run from what the service holds: nothing to do while it waits; once released, the SDK runs the
     * released calls that have no result yet and the worker posts their results; once every call of the turn has
     * its result, the verdicts go to the SDK as approval responses and `generateText` goes on. Safe to call again
     * after a crash at any point: a call whose result the service has is not run again (a crash after a tool ran but
     * before its result was posted runs it again).
     */
    async resume(runId: string): Promise<WorkerStep<TOOLS>> {
        let run = await this.#client.getRun(runId, { includeWorkerState: true });
        if (run.status === "waiting_for_approval" || run.status === "resuming") {
            return { status: "waiting", runId, run };
        }
        if (run.status === "cancelled" || run.status === "completed") {
            return { status: "closed", runId, run };
        }
        const history = messagesOf(runId, run.worker_state);
        const approvals = approvalIds(runId, history, run);
        const released = run.released_calls ?? [];
        const unrun = released.filter((call) => call.result === undefined);
        if (unrun.length > 0) {
            const results = await this.#runReleased(runId, history, approvals, unrun);
            run = await this.#client.postResults(
                runId,
                results.map((result) => ({ call_id: result.toolCallId, ...outputText(result.output) })),
            );
        }
        if (run.status !== "resumed") {
            return { status: "waiting", runId, run };
        }
        const answer = await this.#verdicts(runId, run, approvals, released);
        const result = await this.#generate([...history, answer]);
        const messages = [...history, answer, ...result.response.messages];
        const pending = approvalRequests(result);
        if (pending.size === 0) {
            await this.#client.completeRun(runId);
            return { status: "finished", runId, result, messages };
        }
        // What followed the model input: the SDK's answer without the results of the decided turn, which the service
        // adds itself (the denied ones the SDK wrote from the approval responses).
        const decided = new Set(run.turn.pending_calls.map((call) => call.id));
        const following = withoutResultsOf(result.response.messages, decided);
        const appended = await this.#client.appendTurn(runId, {
            messages: openAiChat(following, pending),
            worker_state: workerState(messages),
        });
        return { status: "suspended", runId, run: appended };
    }

    /**
     * Lets the SDK run the released calls, and nothing else: `generateText` with their approval responses runs the
     * approved tools before its first step, and this `prepareStep` takes their results and stops it before the
     * model is called, since the model may only go on once the service holds the results (and the other calls'
     * texts).
     */
    async #runReleased(
        runId: string,
        history: ModelMessage[],
        approvals: Map<string, { approvalId: string; input: unknown }>,
        calls: ReleasedCall[],
    ): Promise<ToolResultPart[]> {
        const responses: ToolApprovalResponse[] = calls.map((call) => {
            const request = approvals.get(call.call_id);
            if (request === undefined) {
                throw new Error(`run ${runId}: released call ${call.call_id} is not a call of the run's worker_state`);
            }
            // The tools are registered editable: false, so the service releases the arguments the model proposed;
            // anything else would be run by the SDK with arguments nobody approved.
            if (call.arguments !== undefined && call.arguments !== argumentsText(request.input)) {
                throw new Error(`run ${runId}: released call ${call.call_id} has arguments the SDK did not propose`);
            }
            return { type: "tool-approval-response", approvalId: request.approvalId, approved: true };
        });
        const wanted = new Set(calls.map((call) => call.call_id));
        try {
            await generateText({
                ...this.#settings,
                messages: [...history, { role: "tool", content: responses }],
                prepareStep: ({ messages }) => {
                    const last = messages[messages.length - 1];
                    const ran = last?.role === "tool" ? toolResults(last) : [];
                    throw new ReleasedCallsRan(ran.filter((result) => wanted.has(result.toolCallId)));
                },
            } as Parameters<typeof generateText<TOOLS>>[0]);
        } catch (error) {
            if (error instanceof ReleasedCallsRan) {
                if (error.results.length !== calls.length) {
                    throw new Error(`run ${runId}: the SDK ran ${error.results.length} of ${calls.length} released calls`);
                }
                return error.results;
            }
            throw error;
        }
        throw new Error(`run ${runId}: generateText called the model before the released calls ran`);
    }

    /**
     * The tool message that answers the decided turn: for each pending call its approval response, approved for a
     * released call (with its result, so the SDK does not run it again), denied for the others with the text the
     * service wrote for it (the denial or expiry of docs/design.md §3), read from the model input.
     */
    async #verdicts(
        runId: string,
        run: RunView,
        approvals: Map<string, { approvalId: string; toolName: string }>,
        released: ReleasedCall[],
    ): Promise<ToolModelMessage> {
        const input = await this.#client.modelInput(runId, { format: "openai-chat" });
        if (input.format !== "openai-chat") {
            throw new Error(`run ${runId}: the model input came as ${input.format}, not openai-chat`);
        }
        const texts = new Map<string, string>();
        for (const message of input.messages as ChatMessage[]) {
            if (message.role === "tool" && typeof message.tool_call_id === "string" && typeof message.content === "string") {
                texts.set(message.tool_call_id, message.content);
            }
        }
        const releasedById = new Map(released.map((call) => [call.call_id, call]));
        const content: ToolModelMessage["content"] = [];
        for (const call of run.turn.pending_calls) {
            const request = approvals.get(call.id)!;
            const text = texts.get(call.id);
            if (text === undefined) {
                throw new Error(`run ${runId}: the model input holds no result for call ${call.id}`);
            }
            const releasedCall = releasedById.get(call.id);
            if (releasedCall === undefined) {
                content.push({ type: "tool-approval-response", approvalId: request.approvalId, approved: false, reason: text });
                continue;
            }
            content.push(
                { type: "tool-approval-response", approvalId: request.approvalId, approved: true },
                {
                    type: "tool-result",
                    toolCallId: call.id,
                    toolName: request.toolName,
                    output: releasedCall.result?.is_error === true ? { type: "error-text", value: text } : { type: "text", value: text },
                },
            );
        }
        return { role: "tool", content };
    }

    #generate(messages: ModelMessage[]): Promise<GenerateTextResult<TOOLS, Output.Output>> {
        return generateText({ ...this.#settings, messages } as Parameters<typeof generateText<TOOLS>>[0]);
    }

    /** Every tool of the settings, run by this worker, never with edited arguments. */
    #declaredTools(): DeclaredTool[] {
        return Object.entries(this.#settings.tools).map(([name, tool]) => ({
            name,
            effect: this.#effects[name] ?? (tool.needsApproval === undefined || tool.needsApproval === false ? "read" : "write"),
            executor: "worker",
            editable: false,
        }));
    }
}

/** The ids of the calls the model's last step asks approval for. */
function approvalRequests<TOOLS extends ToolSet>(result: GenerateTextResult<TOOLS, Output.Output>): Set<string> {
    return new Set(
        result.content.flatMap((part) => (part.type === "tool-approval-request" ? [part.toolCall.toolCallId] : [])),
    );
}

/**
 * For each pending call of the run's turn, the SDK's approval id, tool and input, from the last assistant message of
 * the state; throws when the state does not hold the turn the service waits on.
 */
function approvalIds(
    runId: string,
    history: readonly ModelMessage[],
    run: RunView,
): Map<string, { approvalId: string; toolName: string; input: unknown }> {
    const calls = new Map(history.flatMap(toolCalls).map((call) => [call.toolCallId, call]));
    const ids = new Map<string, { approvalId: string; toolName: string; input: unknown }>();
    for (const message of history) {
        if (message.role === "assistant" && typeof message.content !== "string") {
            for (const part of message.content) {
                const call = part.type === "tool-approval-request" ? calls.get(part.toolCallId) : undefined;
                if (part.type === "tool-approval-request" && call !== undefined) {
                    ids.set(part.toolCallId, { approvalId: part.approvalId, toolName: call.toolName, input: call.input });
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
