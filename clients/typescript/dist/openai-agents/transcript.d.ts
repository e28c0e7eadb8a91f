/**
 * The OpenAI Agents SDK's items (its `AgentInputItem`s, camelCase protocol items) as the service's `openai-chat`
 * transcript: what a run is registered with and what a new turn appends. The SDK's `RunState` stays the worker's
 * truth (it travels as `worker_state`); this transcript is what approvers and the audit read, so it keeps every
 * message, call and result and drops what the chat format has no place for (reasoning, hosted tool items).
 * @module
 */
import type { AgentInputItem } from "@openai/agents";
import type { ChatMessage } from "../schemas.js";
/**
 * `items` (and the `instructions`, first) in `openai-chat`, with the calls named in `pending` as the last message:
 * the service takes every call of the last assistant message as the waiting turn, and the SDK lists the calls it
 * ran without approval (and their results) beside the ones that wait.
 */
export declare function openAiChat(items: readonly AgentInputItem[], pending: ReadonlySet<string>, instructions?: string): ChatMessage[];
/** A function call's output as the text a model reads: a string as it is, a text part's text, else its JSON. */
export declare function outputText(output: unknown): string;
//# sourceMappingURL=transcript.d.ts.map