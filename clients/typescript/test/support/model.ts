/**
 * The AI SDK's own scripted model (`MockLanguageModelV4` from `ai/test`, the specification `ai` 7 speaks): it
 * answers each call, `generateText`'s or `streamText`'s, with the next scripted step and keeps every prompt the SDK
 * sent it, so the tests read what the model would have read.
 */
import { convertArrayToReadableStream, MockLanguageModelV4 } from "ai/test";

/** What the SDK sends the model on one call. */
export type Prompt = Parameters<MockLanguageModelV4["doGenerate"]>[0]["prompt"];
type Content = Awaited<ReturnType<MockLanguageModelV4["doGenerate"]>>["content"][number];
type StreamPart = Awaited<ReturnType<MockLanguageModelV4["doStream"]>>["stream"] extends ReadableStream<infer P> ? P : never;

const usage = {
    inputTokens: { total: 1, noCache: 1, cacheRead: 0, cacheWrite: 0 },
    outputTokens: { total: 1, text: 1, reasoning: 0 },
};

/** A step that calls one tool with `input`. */
export function callTool(toolCallId: string, toolName: string, input: unknown): Content[] {
    return [{ type: "tool-call", toolCallId, toolName, input: JSON.stringify(input) }];
}

/** A step that answers with text. */
export function say(text: string): Content[] {
    return [{ type: "text", text }];
}

export interface ScriptedModel {
    model: MockLanguageModelV4;
    /** Every prompt the SDK sent, in order. */
    prompts: Prompt[];
}

export function scriptedModel(steps: Content[][]): ScriptedModel {
    const prompts: Prompt[] = [];
    const next = (prompt: Prompt) => {
        prompts.push(prompt);
        const content = steps[prompts.length - 1];
        if (content === undefined) {
            throw new Error(`the script has ${steps.length} steps; the SDK asked for step ${prompts.length}`);
        }
        const calls = content.some((part) => part.type === "tool-call");
        return { content, finishReason: { unified: calls ? ("tool-calls" as const) : ("stop" as const), raw: undefined } };
    };
    const model = new MockLanguageModelV4({
        doGenerate: async (options) => ({ ...next(options.prompt), usage, warnings: [] }),
        doStream: async (options) => {
            const { content, finishReason } = next(options.prompt);
            const parts: StreamPart[] = [{ type: "stream-start", warnings: [] }];
            content.forEach((part, index) => {
                if (part.type === "text") {
                    // Two deltas: the consumer sees the text arrive in pieces.
                    const half = Math.ceil(part.text.length / 2);
                    parts.push(
                        { type: "text-start", id: `t${index}` },
                        { type: "text-delta", id: `t${index}`, delta: part.text.slice(0, half) },
                        { type: "text-delta", id: `t${index}`, delta: part.text.slice(half) },
                        { type: "text-end", id: `t${index}` },
                    );
                } else if (part.type === "tool-call") {
                    parts.push(part);
                }
            });
            parts.push({ type: "finish", finishReason, usage });
            return { stream: convertArrayToReadableStream(parts) };
        },
    });
    return { model, prompts };
}
