/**
 * What every adapter does the same way around a released call it runs (docs/design.md §15): the call's idempotency
 * key, the fixed text a failing tool posts, and where the failure itself goes (the worker's log, never the service).
 * @module
 */
import { AsyncLocalStorage } from "node:async_hooks";

/** Where an adapter reports what the service must not store: a tool's exception. `console.error` by default. */
export type WorkerLogger = (message: string, error: unknown) => void;

export const defaultLogger: WorkerLogger = (message, error) => console.error(message, error);

/** A released call's idempotency key, as executors get it (§9): `{run_id}:{call_id}`. */
export function idempotencyKey(runId: string, callId: string): string {
    return `${runId}:${callId}`;
}

const runningCall = new AsyncLocalStorage<string>();

/**
 * Inside a released call this adapter runs: its idempotency key `{run_id}:{call_id}`, for a tool that can make its
 * effect idempotent (a payment API's `Idempotency-Key`). Elsewhere `undefined`.
 */
export function currentIdempotencyKey(): string | undefined {
    return runningCall.getStore();
}

/** Runs `call` with `key` as {@link currentIdempotencyKey}. */
export function withIdempotencyKey<T>(key: string, call: () => T): T {
    return runningCall.run(key, call);
}

/**
 * The result a released call posts when its tool threw: the service's own text for a failed call (§3). The
 * exception's message is not posted: it is stored, audited and shown to the model, and it may hold a connection
 * string or a customer's data.
 */
export function failedText(tool: string): string {
    return `Error: tool "${tool}" failed.`;
}
