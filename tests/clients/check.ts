// Type-checked by tests/clients/run.sh with `tsc --strict --noEmit` against `api.d.ts`, which openapi-typescript
// generates from openapi.yaml next to a copy of this file. It proves the generated types are precise enough for a
// client to use: every model-input union narrows on its discriminator down to named variants, with nothing left
// over (`never`), and the `@ts-expect-error` lines prove that a wrong value is a compile error, i.e. that no type
// fell back to `any` or `unknown` (tsc fails on an expected error that does not happen).

import type { components, operations } from "./api";

type Schemas = components["schemas"];
type ModelInput = Schemas["ModelInput"];
type DecisionAnswer = operations["decide"]["responses"][200]["content"]["application/json"];

function unreachable(value: never): never {
    throw new Error(`unhandled variant ${JSON.stringify(value)}`);
}

/** Every block of every Anthropic message, by type. */
function anthropicBlock(block: Schemas["AnthropicBlock"]): string {
    switch (block.type) {
        case "text":
            return block.text;
        case "image":
            return imageSource(block.source);
        case "tool_use":
            return `${block.name}(${JSON.stringify(block.input)})`;
        case "tool_result":
            return `${block.tool_use_id}: ${block.content}${block.is_error === true ? " (error)" : ""}`;
        case "thinking":
            return `thinking (${block.signature.length} signature characters): ${block.thinking}`;
        case "redacted_thinking":
            return `redacted thinking, ${block.data.length} characters`;
        case "server_tool_use":
            return `server tool ${block.id} ${block.name}`;
        case "web_search_tool_result":
            return `web search result for ${block.tool_use_id}`;
        default:
            return unreachable(block);
    }
}

function imageSource(source: Schemas["AnthropicImageSource"]): string {
    switch (source.type) {
        case "url":
            return source.url;
        case "base64":
            return `${source.media_type}, ${source.data.length} base64 characters`;
        default:
            return unreachable(source);
    }
}

/** Every OpenAI Responses input item, by type. */
function responsesItem(item: Schemas["ResponsesItem"]): string {
    switch (item.type) {
        case "message":
            return `${item.role}: ${messageContent(item.content)}`;
        case "function_call":
            return `${item.call_id} ${item.name}(${item.arguments})`;
        case "function_call_output":
            return `${item.call_id}: ${item.output}`;
        default:
            return unreachable(item);
    }
}

function messageContent(content: Schemas["ResponsesMessageContent"]): string {
    if (typeof content === "string") {
        return content;
    }
    return content
        .map((part) => {
            switch (part.type) {
                case "input_text":
                    return part.text;
                case "input_image":
                    return part.image_url;
                default:
                    return unreachable(part);
            }
        })
        .join(" ");
}

const WRITTEN_ITEMS: unknown[] = ["message", "function_call", "function_call_output"];

function isResponsesItem(
    item: Schemas["OpenAiResponsesInput"]["input"][number],
): item is Schemas["ResponsesItem"] {
    return WRITTEN_ITEMS.includes(item.type);
}

/** A model input in any of the four formats, by format. */
export function describe(input: ModelInput): string[] {
    switch (input.format) {
        case "openai-chat":
            return input.messages.map((message) => message.role);
        case "anthropic":
            return input.messages.flatMap((message) =>
                typeof message.content === "string" ? [message.content] : message.content.map(anthropicBlock),
            );
        case "openai-responses":
            // A run registered as `openai-responses` keeps its items as sent (a reasoning item, a short-form
            // message without `type`): those are `NativeEntry`s, told from the items the service writes by `type`.
            return input.input.map((item) => (isResponsesItem(item) ? responsesItem(item) : JSON.stringify(item)));
        case "gemini":
            return input.contents.map((content) => JSON.stringify(content));
        default:
            return unreachable(input);
    }
}

/** The decision answer carries the model input, typed as the union above; a decision token below privacy level
 * `redacted` is answered without it (docs/design.md §17), so the type makes the caller say what it does then. */
export function decided(answer: DecisionAnswer): string[] {
    const outcomes = answer.results.map((result) => `${result.call_id}: ${result.outcome}`);
    const input = answer.model_input === undefined ? [] : describe(answer.model_input);
    return [answer.status, ...outcomes, ...input];
}

// A value the spec does not allow must not type-check.
// A registration in each native format (docs/design.md §14) is a `RegisterRun`. (`messages` items are `ChatMessage`s,
// which declare `role` only and no `additionalProperties`, so openapi-typescript reads them as closed: a message's
// `content` cannot be written here, in any format.)
const common = { owner_uid: 7, tools: [{ name: "update_page_metadata", effect: "write" as const }] };
export const nativeRuns: Schemas["RegisterRun"][] = [
    {
        ...common,
        id: "f0220000-0000-4000-8000-000000000003",
        format: "anthropic",
        system: [{ type: "text", text: "Be brief.", cache_control: { type: "ephemeral" } }],
        messages: [{ role: "user" }],
        require_second_approver: false,
    },
    {
        ...common,
        id: "f0220000-0000-4000-8000-000000000004",
        format: "openai-responses",
        instructions: "Be brief.",
        input: [{ role: "user", content: "Set the description." }],
        require_second_approver: false,
    },
    {
        ...common,
        id: "f0220000-0000-4000-8000-000000000005",
        format: "gemini",
        system_instruction: { parts: [{ text: "Be brief." }] },
        contents: [{ role: "user", parts: [{ text: "Set the description." }] }],
        require_second_approver: false,
    },
];

// @ts-expect-error: `mistral` is no model-input format
export const unknownFormat: ModelInput["format"] = "mistral";
// @ts-expect-error: a thinking block carries its signature
export const unsigned: Schemas["AnthropicThinkingBlock"] = { type: "thinking", thinking: "x" };
// @ts-expect-error: an Anthropic text block has no `source`
export const wrongBlock: Schemas["AnthropicBlock"] = { type: "text", source: { type: "url", url: "x" } };
// @ts-expect-error: a decision's `approved` is a boolean
export const wrongBody: Schemas["DecisionBody"] = { approved: "yes", decider_uid: 7, turn_digest: "d" };
