/**
 * The AI SDK's messages as the service's `openai-chat` transcript (docs/design.md §16): what a run is registered
 * with, and what a new turn appends. The SDK's own messages stay the worker's truth (they travel as `worker_state`);
 * this transcript is what approvers and the audit read, so it keeps every word and call and drops only what has no
 * place in the OpenAI chat format (reasoning, approval parts, provider options).
 * @module
 */
import type { AssistantModelMessage, ModelMessage, ToolModelMessage, ToolResultPart } from "ai";
import type { ChatMessage } from "../schemas.js";
type ToolResultOutput = ToolResultPart["output"];
/**
 * The arguments of an SDK tool call as the service's text: the SDK keeps the parsed input, the service the JSON
 * text; the adapter writes both from the same object, so the text it registers is the text released calls show.
 */
export declare function argumentsText(input: unknown): string;
/**
 * The text a model reads for a tool's output, and whether it is an error: what the worker posts as a released call's
 * result, and what a tool message of the transcript holds. JSON outputs are their JSON text, as providers send them.
 */
export declare function outputText(output: ToolResultOutput): {
    content: string;
    is_error: boolean;
};
/**
 * `messages` (and the `system` prompt, first) in the `openai-chat` format. `pending` names the calls that wait for
 * approval: the last assistant message holding one of them becomes the transcript's last message with exactly
 * those calls, because the service takes every call of the waiting turn as pending. Calls of that same step the
 * SDK already ran (tools without `needsApproval`) move, with their results, into an assistant message before it.
 */
export declare function openAiChat(messages: readonly ModelMessage[], pending: ReadonlySet<string>, system?: string): ChatMessage[];
type ToolCallPart = Extract<Exclude<AssistantModelMessage["content"], string>[number], {
    type: "tool-call";
}>;
/** The tool calls of an assistant message (none for any other role). */
export declare function toolCalls(message: ModelMessage): ToolCallPart[];
/** The tool results of a tool message. */
export declare function toolResults(message: ToolModelMessage): ToolResultPart[];
export {};
//# sourceMappingURL=transcript.d.ts.map