/** Where an adapter reports what the service must not store: a tool's exception. `console.error` by default. */
export type WorkerLogger = (message: string, error: unknown) => void;
export declare const defaultLogger: WorkerLogger;
/** A released call's idempotency key, as executors get it (§9): `{run_id}:{call_id}`. */
export declare function idempotencyKey(runId: string, callId: string): string;
/**
 * Inside a released call this adapter runs: its idempotency key `{run_id}:{call_id}`, for a tool that can make its
 * effect idempotent (a payment API's `Idempotency-Key`). Elsewhere `undefined`.
 */
export declare function currentIdempotencyKey(): string | undefined;
/** Runs `call` with `key` as {@link currentIdempotencyKey}. */
export declare function withIdempotencyKey<T>(key: string, call: () => T): T;
/**
 * The result a released call posts when its tool threw: the service's own text for a failed call (§3). The
 * exception's message is not posted: it is stored, audited and shown to the model, and it may hold a connection
 * string or a customer's data.
 */
export declare function failedText(tool: string): string;
//# sourceMappingURL=calls.d.ts.map