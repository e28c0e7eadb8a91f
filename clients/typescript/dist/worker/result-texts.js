/** Each call's text by call id. */
export async function resultTexts(client, runId) {
    const input = await client.modelInput(runId, { format: "openai-chat" });
    if (input.format !== "openai-chat") {
        throw new Error(`run ${runId}: the model input came as ${input.format}, not openai-chat`);
    }
    const texts = new Map();
    for (const message of input.messages) {
        const { role, tool_call_id: callId, content } = message;
        if (role === "tool" && typeof callId === "string" && typeof content === "string") {
            texts.set(callId, content);
        }
    }
    return texts;
}
//# sourceMappingURL=result-texts.js.map