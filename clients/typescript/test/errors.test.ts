// Answers the real service gives only when something is wrong (a 503 with Retry-After, a proxy's page instead of a
// problem document), from a loopback stand-in: how ApiError reads them, and that the feed asks again after a 503 or
// a 429.
import assert from "node:assert/strict";
import { test } from "node:test";
import { inspect } from "node:util";

import { ApiError, MemoryCursorStore, UNEXPECTED_RESPONSE } from "approval-resume";

import { problem, withStandIn } from "./support/stand-in.js";

async function caught(request: Promise<unknown>): Promise<ApiError> {
    const error = await request.then(
        () => assert.fail("the request succeeded"),
        (failure: unknown) => failure,
    );
    assert.ok(error instanceof ApiError);
    return error;
}

test("a 503 problem gives its code, detail, request id and Retry-After in seconds", async () => {
    await withStandIn(
        (_request, response) => problem(response, 503, "database_unavailable", { "retry-after": "7" }),
        async (client) => {
            const error = await caught(client.getRun("0b0e9f1e-6a56-4c2b-9a43-3f1f4c1d2a01"));
            assert.deepEqual(
                [error.status, error.code, error.detail, error.requestId, error.retryAfter, error.type],
                [
                    503,
                    "database_unavailable",
                    "the database cannot serve the request now",
                    "4f1c2a9e-0000-4000-8000-000000000001",
                    7,
                    "urn:approval-resume:problem:database_unavailable",
                ],
            );
            assert.equal(error.name, "ApiError");
        },
    );
});

test("Retry-After as an HTTP date counts the seconds from now", async () => {
    const at = new Date(Date.now() + 30_000).toUTCString();
    await withStandIn(
        (_request, response) => problem(response, 503, "timeout", { "retry-after": at }),
        async (client) => {
            const error = await caught(client.healthz());
            assert.ok(error.retryAfter !== null && error.retryAfter >= 28 && error.retryAfter <= 31, `${error.retryAfter}`);
        },
    );
});

test("an answer that is no problem document is unexpected_response, described without its body", async () => {
    await withStandIn(
        (request, response) => {
            response.writeHead(502, { "content-type": "text/html", "x-request-id": "proxy-request-1" });
            response.end(`<html>upstream failed for ${request.headers.authorization}</html>`);
        },
        async (client) => {
            const error = await caught(client.listWebhooks());
            assert.deepEqual([error.status, error.code, error.requestId], [502, UNEXPECTED_RESPONSE, "proxy-request-1"]);
            assert.equal(error.detail, 'HTTP 502 with content type "text/html", not a problem document');
            assert.doesNotMatch(error.message, /ar_stand_in|upstream/);
        },
    );
});

test("the client sends its key as a bearer credential and asks for JSON, and never shows it", async () => {
    const seen: Array<[string | undefined, string | undefined, string | undefined]> = [];
    await withStandIn(
        (request, response) => {
            seen.push([request.url, request.headers.authorization, request.headers.accept]);
            response.writeHead(200, { "content-type": "application/json" });
            response.end(JSON.stringify({ items: [], next_cursor: null }));
        },
        async (client) => {
            assert.deepEqual(await client.approvals({ acting_uid: 9, tool: "a b" }), { items: [], next_cursor: null });
            assert.doesNotMatch(inspect(client, { showHidden: true, depth: 5 }), /ar_stand_in/);
            assert.doesNotMatch(JSON.stringify(client), /ar_stand_in/);
        },
    );
    assert.deepEqual(seen, [["/v1/approvals?acting_uid=9&tool=a%20b", "Bearer ar_stand_in", "application/json"]]);
});

test("the feed asks again after a 503 and a 429 and goes on from where it stood", async () => {
    const afters: Array<string | null> = [];
    const event = {
        id: "evt_00000000000000000000000000000001",
        type: "run.waiting",
        timestamp: "2026-12-06T00:00:00Z",
        data: {
            run_id: "0b0e9f1e-6a56-4c2b-9a43-3f1f4c1d2a01",
            tenant: "default",
            status: "waiting_for_approval",
            format: "openai-chat",
            turn: { index: 0, digest: "0".repeat(64) },
        },
    };
    await withStandIn(
        (request, response) => {
            const query = new URL(request.url ?? "/", "http://stand-in").searchParams;
            afters.push(query.get("after"));
            if (afters.length === 1) {
                problem(response, 503, "database_unavailable", { "retry-after": "0" });
                return;
            }
            if (afters.length === 2) {
                problem(response, 429, "too_many_waiting_readers", { "retry-after": "0" });
                return;
            }
            response.writeHead(200, { "content-type": "application/json" });
            response.end(JSON.stringify({ events: afters.length === 3 ? [event] : [], next_cursor: "5_9" }));
        },
        async (client) => {
            const store = new MemoryCursorStore({ after: "5_8", handled: [] });
            const stop = new AbortController();
            const got: string[] = [];
            for await (const item of client.feed({ store, wait: 0, signal: stop.signal })) {
                got.push(item.id);
                stop.abort();
            }
            assert.deepEqual(got, [event.id]);
            assert.deepEqual(await store.load(), { after: "5_9", handled: [] });
        },
    );
    assert.deepEqual(afters, ["5_8", "5_8", "5_8"]);
});
