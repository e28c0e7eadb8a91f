/**
 * The arguments of an SDK tool call as the service's text: the SDK keeps the parsed input, the service the JSON
 * text; the adapter writes both from the same object, so the text it registers is the text released calls show.
 */
export function argumentsText(input) {
    return JSON.stringify(input ?? {});
}
/**
 * The text a model reads for a tool's output, and whether it is an error: what the worker posts as a released call's
 * result, and what a tool message of the transcript holds. JSON outputs are their JSON text, as providers send them.
 */
export function outputText(output) {
    switch (output.type) {
        case "text":
            return { content: output.value, is_error: false };
        case "json":
            return { content: JSON.stringify(output.value), is_error: false };
        case "error-text":
            return { content: output.value, is_error: true };
        case "error-json":
            return { content: JSON.stringify(output.value), is_error: true };
        case "execution-denied":
            return { content: output.reason ?? "Tool execution denied.", is_error: true };
        case "content":
            return {
                content: output.value
                    .map((part) => (part.type === "text" ? part.text : `[${part.type}]`))
                    .join("\n"),
                is_error: false,
            };
    }
}
/**
 * `messages` (and the `system` prompt, first) in the `openai-chat` format. `pending` names the calls that wait for
 * approval: the last assistant message holding one of them becomes the transcript's last message with exactly
 * those calls, because the service takes every call of the waiting turn as pending. Calls of that same step the
 * SDK already ran (tools without `needsApproval`) move, with their results, into an assistant message before it.
 */
export function openAiChat(messages, pending, system) {
    const chat = system === undefined ? [] : [{ role: "system", content: system }];
    let last = messages.length - 1;
    while (last >= 0 && messages[last].role !== "assistant") {
        last -= 1;
    }
    const turn = messages[last];
    const waits = turn !== undefined && toolCalls(turn).some((call) => pending.has(call.toolCallId));
    const before = waits ? messages.slice(0, last) : messages;
    chat.push(...before.flatMap(chatMessages));
    if (waits) {
        chat.push(...waitingTurn(turn, messages.slice(last + 1), pending));
    }
    return chat;
}
function waitingTurn(message, following, pending) {
    const calls = toolCalls(message);
    const ran = calls.filter((call) => !pending.has(call.toolCallId));
    const waiting = calls.filter((call) => pending.has(call.toolCallId));
    const text = assistantText(message);
    if (ran.length === 0) {
        return [{ role: "assistant", content: text, tool_calls: waiting.map(chatToolCall) }];
    }
    const ranIds = new Set(ran.map((call) => call.toolCallId));
    const results = following
        .filter((later) => later.role === "tool")
        .flatMap((later) => toolResults(later))
        .filter((result) => ranIds.has(result.toolCallId));
    return [
        { role: "assistant", content: text, tool_calls: ran.map(chatToolCall) },
        ...results.map(chatToolResult),
        { role: "assistant", content: null, tool_calls: waiting.map(chatToolCall) },
    ];
}
function chatMessages(message) {
    switch (message.role) {
        case "system":
            return [{ role: "system", content: message.content }];
        case "user":
            return [{ role: "user", content: userContent(message) }];
        case "assistant": {
            const calls = toolCalls(message);
            return [
                calls.length === 0
                    ? { role: "assistant", content: assistantText(message) ?? "" }
                    : { role: "assistant", content: assistantText(message), tool_calls: calls.map(chatToolCall) },
            ];
        }
        case "tool":
            return toolResults(message).map(chatToolResult);
    }
}
/** Text stays text; an image or file the chat transcript cannot hold here is named by its media type. */
function userContent(message) {
    if (typeof message.content === "string") {
        return message.content;
    }
    return message.content
        .map((part) => (part.type === "text" ? part.text : `[${part.type}: ${part.mediaType ?? "unknown type"}]`))
        .join("\n");
}
function assistantText(message) {
    if (typeof message.content === "string") {
        return message.content;
    }
    const texts = message.content.flatMap((part) => (part.type === "text" ? [part.text] : []));
    return texts.length === 0 ? null : texts.join("");
}
/** The tool calls of an assistant message (none for any other role). */
export function toolCalls(message) {
    if (message.role !== "assistant" || typeof message.content === "string") {
        return [];
    }
    return message.content.filter((part) => part.type === "tool-call");
}
/** The tool results of a tool message. */
export function toolResults(message) {
    return message.content.filter((part) => part.type === "tool-result");
}
function chatToolCall(call) {
    return {
        id: call.toolCallId,
        type: "function",
        function: { name: call.toolName, arguments: argumentsText(call.input) },
    };
}
function chatToolResult(result) {
    return { role: "tool", tool_call_id: result.toolCallId, content: outputText(result.output).content };
}
//# sourceMappingURL=transcript.js.map