/**
 * The adapter's `worker_state` (docs/design.md §15): the AI SDK's own messages of the run, through the assistant
 * message that asks for approval, so a worker that restarts continues from the service alone. The SDK keeps the
 * approval ids (`tool-approval-request` parts) in those messages, which the `tool-approval-response` parts must name.
 * @module
 */
import { type ModelMessage } from "ai";
/** Marks the state as this adapter's, so a run another worker registered is refused rather than misread. */
declare const KIND = "approval-resume/ai-sdk";
export interface AiSdkWorkerState {
    kind: typeof KIND;
    version: 1;
    /** The prompt's messages, then every message the SDK answered, ending with the turn that waits. */
    messages: ModelMessage[];
}
export declare function workerState(messages: readonly ModelMessage[]): AiSdkWorkerState;
/**
 * The SDK's messages from a run's `worker_state`, checked with the SDK's own message schema. Throws for a run
 * without this adapter's state (registered by another worker, or its state replaced by a turn without one).
 */
export declare function messagesOf(runId: string, state: unknown): ModelMessage[];
export {};
//# sourceMappingURL=worker-state.d.ts.map