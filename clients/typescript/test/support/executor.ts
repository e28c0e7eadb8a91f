/**
 * A loopback tool executor (README, "Tool executors"; like examples/echo_executor.rs), in the test's own process so
 * the tests can see every call it got: the tool, the `Idempotency-Key`, the tenant and the body. It answers
 * `{content, is_error: false}` with the tool, the owner and the arguments it ran with.
 */
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";

export interface ExecutedCall {
    tool: string;
    idempotencyKey: string | undefined;
    tenantHeader: string | undefined;
    body: { run_id: string; tenant: string; call_id: string; tool: string; arguments: unknown; owner_uid: number };
}

export interface Executor {
    url: string;
    calls: ExecutedCall[];
    /** The calls of one run, in the order they came. */
    callsOf(runId: string): ExecutedCall[];
    close(): Promise<void>;
}

/**
 * What the executor answers for a call: the tests compare results with it. The arguments are written with sorted
 * keys, so the text does not depend on the order the service sent them in.
 */
export function executorContent(tool: string, ownerUid: number, args: unknown): string {
    return `${tool} done for user ${ownerUid} with ${canonical(args)}`;
}

function canonical(value: unknown): string {
    if (Array.isArray(value)) {
        return `[${value.map(canonical).join(",")}]`;
    }
    if (typeof value === "object" && value !== null) {
        const entries = Object.entries(value).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
        return `{${entries.map(([key, member]) => `${JSON.stringify(key)}:${canonical(member)}`).join(",")}}`;
    }
    return JSON.stringify(value);
}

export async function startExecutor(): Promise<Executor> {
    const calls: ExecutedCall[] = [];
    const server = createServer((request, response) => {
        const chunks: Buffer[] = [];
        request.on("data", (chunk: Buffer) => chunks.push(chunk));
        request.on("end", () => {
            const tool = /^\/tools\/([A-Za-z0-9_-]+)$/.exec(request.url ?? "")?.[1];
            if (request.method !== "POST" || tool === undefined) {
                response.writeHead(404).end();
                return;
            }
            const body = JSON.parse(Buffer.concat(chunks).toString("utf8")) as ExecutedCall["body"];
            calls.push({
                tool,
                idempotencyKey: single(request.headers["idempotency-key"]),
                tenantHeader: single(request.headers["approval-resume-tenant"]),
                body,
            });
            response.writeHead(200, { "content-type": "application/json" });
            response.end(
                JSON.stringify({ content: executorContent(tool, body.owner_uid, body.arguments), is_error: false }),
            );
        });
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const { port } = server.address() as AddressInfo;
    return {
        url: `http://127.0.0.1:${port}`,
        calls,
        callsOf: (runId) => calls.filter((call) => call.body.run_id === runId),
        close: () =>
            new Promise<void>((resolve) => {
                server.closeAllConnections();
                server.close(() => resolve());
            }),
    };
}

function single(value: string | string[] | undefined): string | undefined {
    return Array.isArray(value) ? value.join(",") : value;
}
