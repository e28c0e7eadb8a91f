/**
 * The AI SDK's own scripted model (`MockLanguageModelV3` from `ai/test`): it answers each call with the next
 * scripted step and keeps every prompt the SDK sent it, so the tests read what the model would have read.
 */
import { MockLanguageModelV3 } from "ai/test";

/** What the SDK sends the model on one call. */
export type Prompt = Parameters<MockLanguageModelV3["doGenerate"]>[0]["prompt"];
type Content = Awaited<ReturnType<MockLanguageModelV3["doGenerate"]>>["content"][number];

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
    model: MockLanguageModelV3;
    /** Every prompt the SDK sent, in order. */
    prompts: Prompt[];
}

export function scriptedModel(steps: Content[][]): ScriptedModel {
    const prompts: Prompt[] = [];
    const model = new MockLanguageModelV3({
        doGenerate: async (options) => {
            prompts.push(options.prompt);
            const content = steps[prompts.length - 1];
            if (content === undefined) {
                throw new Error(`the script has ${steps.length} steps; the SDK asked for step ${prompts.length}`);
            }
            const calls = content.some((part) => part.type === "tool-call");
            return {
                content,
                finishReason: { unified: calls ? "tool-calls" : "stop", raw: undefined },
                usage,
                warnings: [],
            };
        },
    });
    return { model, prompts };
}
