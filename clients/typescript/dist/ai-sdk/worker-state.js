/**
 * The adapter's `worker_state` (docs/design.md §15): the AI SDK's own messages of the run, through the assistant
 * message that asks for approval, so a worker that restarts continues from the service alone. The SDK keeps the
 * approval ids (`tool-approval-request` parts) in those messages, which the `tool-approval-response` parts must name.
 * @module
 */
import { modelMessageSchema } from "ai";
/** Marks the state as this adapter's, so a run another worker registered is refused rather than misread. */
const KIND = "approval-resume/ai-sdk";
export function workerState(messages) {
    return { kind: KIND, version: 1, messages: [...messages] };
}
/**
 * The SDK's messages from a run's `worker_state`, checked with the SDK's own message schema. Throws for a run
 * without this adapter's state (registered by another worker, or its state replaced by a turn without one).
 */
export function messagesOf(runId, state) {
    if (typeof state !== "object" || state === null || state.kind !== KIND) {
        throw new Error(`run ${runId} holds no worker_state of approval-resume/ai-sdk; it cannot be resumed here`);
    }
    const { version, messages } = state;
    if (version !== 1) {
        throw new Error(`run ${runId}: worker_state version ${String(version)} is not one this adapter reads`);
    }
    const parsed = modelMessageSchema.array().safeParse(messages);
    if (!parsed.success) {
        throw new Error(`run ${runId}: worker_state messages are not AI SDK messages: ${parsed.error.message}`);
    }
    // The messages as stored, not zod's copy: a member the schema does not name is kept for the SDK.
    return messages;
}
//# sourceMappingURL=worker-state.js.map