/** A loopback stand-in of the service, answering each request with a handler the test writes. */
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";

import { ApprovalResumeClient, type ClientOptions } from "approval-resume";

export type Handler = (request: IncomingMessage, response: ServerResponse) => void;

/** A server on a free loopback port answering with `handler`; its `url` has no trailing slash. */
export async function listen(handler: Handler): Promise<{ url: string; close(): Promise<void> }> {
    const server = createServer(handler);
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    return {
        url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
        close: async () => {
            server.closeAllConnections();
            await new Promise((resolve) => server.close(resolve));
        },
    };
}

/** A client (credential `ar_stand_in`, further `options`) of a stand-in answering with `handler`; closed after `use`. */
export async function withStandIn(
    handler: Handler,
    use: (client: ApprovalResumeClient) => Promise<void>,
    options: Partial<ClientOptions> = {},
): Promise<void> {
    const standIn = await listen(handler);
    try {
        await use(new ApprovalResumeClient({ baseUrl: standIn.url, credential: "ar_stand_in", ...options }));
    } finally {
        await standIn.close();
    }
}

/** Answers a problem document of `status` and `code`, with further members and headers. */
export function problem(
    response: ServerResponse,
    status: number,
    code: string,
    headers: Record<string, string> = {},
    members: Record<string, unknown> = {},
): void {
    response.writeHead(status, { "content-type": "application/problem+json", ...headers });
    response.end(
        JSON.stringify({
            type: `urn:approval-resume:problem:${code}`,
            title: "Service Unavailable",
            status,
            detail: "the database cannot serve the request now",
            code,
            request_id: "4f1c2a9e-0000-4000-8000-000000000001",
            ...members,
        }),
    );
}
