/**
 * The OpenAI Agents SDK's items (its `AgentInputItem`s, camelCase protocol items) as the service's `openai-chat`
 * transcript: what a run is registered with and what a new turn appends. The SDK's `RunState` stays the worker's
 * truth (it travels as `worker_state`); this transcript is what approvers and the audit read, so it keeps every
 * message, call and result and drops what the chat format has no place for (reasoning, hosted tool items).
 * @module
 */
import type { AgentInputItem } from "@openai/agents";

import type { ChatMessage } from "../schemas.js";

type Item = AgentInputItem & Record<string, unknown>;

/**
 * `items` (and the `instructions`, first) in `openai-chat`, with the calls named in `pending` as the last message:
 * the service takes every call of the last assistant message as the waiting turn, and the SDK lists the calls it
 * ran without approval (and their results) beside the ones that wait.
 */
export function openAiChat(
    items: readonly AgentInputItem[],
    pending: ReadonlySet<string>,
    instructions?: string,
): ChatMessage[] {
    const chat: ChatMessage[] = instructions === undefined ? [] : [{ role: "system", content: instructions }];
    const waiting: Array<ReturnType<typeof toolCall>> = [];
    for (const item of items as Item[]) {
        if (item.type === "function_call" && pending.has(String(item.callId))) {
            waiting.push(toolCall(item));
            continue;
        }
        chat.push(...chatMessages(item, chat[chat.length - 1]));
    }
    if (waiting.length > 0) {
        chat.push({ role: "assistant", content: null, tool_calls: waiting });
    }
    return chat;
}

/** The chat messages of one item; a call right after an assistant message joins its `tool_calls`. */
function chatMessages(item: Item, previous: ChatMessage | undefined): ChatMessage[] {
    if (item.type === "function_call") {
        if (previous?.role === "assistant" && Array.isArray(previous.tool_calls) && previous.content === null) {
            previous.tool_calls.push(toolCall(item));
            return [];
        }
        return [{ role: "assistant", content: null, tool_calls: [toolCall(item)] }];
    }
    if (item.type === "function_call_result") {
        return [{ role: "tool", tool_call_id: String(item.callId), content: outputText(item.output) }];
    }
    if (item.type !== undefined && item.type !== "message") {
        return []; // reasoning, hosted tools: no place in the chat format
    }
    switch (item.role) {
        case "system":
            return [{ role: "system", content: text(item.content) }];
        case "user":
            return [{ role: "user", content: text(item.content) }];
        case "assistant":
            return [{ role: "assistant", content: text(item.content) }];
        default:
            return [];
    }
}

function toolCall(item: Item) {
    return {
        id: String(item.callId),
        type: "function" as const,
        function: { name: String(item.name), arguments: typeof item.arguments === "string" ? item.arguments : "{}" },
    };
}

/** A message's content as text: its text parts; any other part named by its type. */
function text(content: unknown): string {
    if (typeof content === "string") {
        return content;
    }
    if (!Array.isArray(content)) {
        return "";
    }
    return content
        .map((part: { type?: string; text?: unknown }) =>
            typeof part.text === "string" ? part.text : `[${part.type ?? "part"}]`,
        )
        .join("\n");
}

/** A function call's output as the text a model reads: a string as it is, a text part's text, else its JSON. */
export function outputText(output: unknown): string {
    if (typeof output === "string") {
        return output;
    }
    if (typeof output === "object" && output !== null && (output as { type?: unknown }).type === "text") {
        return String((output as { text?: unknown }).text ?? "");
    }
    return JSON.stringify(output ?? null);
}
