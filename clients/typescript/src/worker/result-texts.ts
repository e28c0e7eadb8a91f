/**
 * The text the service gives the model for each call of a decided turn (docs/design.md §3: a denial, an expiry, an
 * edited call's note and output, a released call's result), read from the model input in `openai-chat`, where each
 * is a tool message. The adapters hand these texts to their framework as they are.
 * @module
 */
import type { ApprovalResumeClient } from "../client.js";
import type { ChatMessage } from "../schemas.js";

/** Each call's text by call id. */
export async function resultTexts(client: ApprovalResumeClient, runId: string): Promise<Map<string, string>> {
    const input = await client.modelInput(runId, { format: "openai-chat" });
    if (input.format !== "openai-chat") {
        throw new Error(`run ${runId}: the model input came as ${input.format}, not openai-chat`);
    }
    const texts = new Map<string, string>();
    for (const message of input.messages as ChatMessage[]) {
        const { role, tool_call_id: callId, content } = message;
        if (role === "tool" && typeof callId === "string" && typeof content === "string") {
            texts.set(callId, content);
        }
    }
    return texts;
}
