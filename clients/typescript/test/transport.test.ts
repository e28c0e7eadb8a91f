// How the client talks to the service when the answer is not the usual one, from loopback stand-ins: a redirect is
// never followed (a decision, results or worker state must not reach another host), a request that hangs is
// aborted by a timeout, and the claim refusals of docs/design.md §15 arrive as their own error classes.
import assert from "node:assert/strict";
import type { IncomingMessage } from "node:http";
import { test } from "node:test";

import {
    ApiError,
    ClaimLapsedError,
    ClaimRequiredError,
    ClaimedError,
    DEFAULT_TIMEOUT_MS,
    UNEXPECTED_RESPONSE,
} from "approval-resume";

import { listen, problem, withStandIn } from "./support/stand-in.js";

const RUN = "0b0e9f1e-6a56-4c2b-9a43-3f1f4c1d2a01";
const DIGEST = "0".repeat(64);

function body(request: IncomingMessage): Promise<string> {
    return new Promise((resolve) => {
        const chunks: Buffer[] = [];
        request.on("data", (chunk: Buffer) => chunks.push(chunk));
        request.on("end", () => resolve(Buffer.concat(chunks).toString("utf8")));
    });
}

async function refusal<T extends Error>(request: Promise<unknown>, kind: new (...args: never[]) => T): Promise<T> {
    const error = await request.then(
        () => assert.fail("the request succeeded"),
        (failure: unknown) => failure,
    );
    assert.ok(error instanceof kind, `${String(error)} is not a ${kind.name}`);
    return error;
}

test("a 307 is answered as an error and neither the decision nor the results reach the host it points to", async () => {
    const elsewhere: string[] = [];
    const other = await listen((request, response) => {
        elsewhere.push(`${request.method} ${request.url} ${request.headers.authorization}`);
        response.writeHead(200, { "content-type": "application/json" }).end("{}");
    });
    try {
        await withStandIn(
            (request, response) => {
                response.writeHead(307, { location: `${other.url}${request.url}` }).end();
            },
            async (client) => {
                const decided = await refusal(client.approveTurn(RUN, DIGEST, { deciderUid: 9 }), ApiError);
                assert.deepEqual([decided.status, decided.code], [307, UNEXPECTED_RESPONSE]);
                const posted = await refusal(
                    client.postResults(RUN, [{ call_id: "call_1", content: "secret output", is_error: false }]),
                    ApiError,
                );
                assert.equal(posted.status, 307);
                await refusal(client.claim(RUN), ApiError);
            },
        );
    } finally {
        await other.close();
    }
    assert.deepEqual(elsewhere, [], "nothing was sent to the redirect's target");
});

test("a request the service never answers is aborted after the client's timeout, or the call's own", async () => {
    let requests = 0;
    await withStandIn(
        () => {
            requests += 1; // never answered
        },
        async (client) => {
            const started = Date.now();
            const timedOut = await refusal(client.getRun(RUN), Error);
            assert.equal(timedOut.name, "TimeoutError");
            assert.ok(Date.now() - started < 5_000);
            const own = await refusal(client.getRun(RUN, { timeoutMs: 50 }), Error);
            assert.equal(own.name, "TimeoutError");
        },
        { timeoutMs: 200 },
    );
    assert.equal(requests, 2);
    assert.equal(DEFAULT_TIMEOUT_MS, 30_000, "a client without the option has a limit too");
});

test("a claim sends an empty body, a renewal its claim id, and results carry the claim", async () => {
    const seen: string[] = [];
    await withStandIn(
        async (request, response) => {
            seen.push(`${request.method} ${request.url} ${await body(request)}`);
            response.writeHead(200, { "content-type": "application/json" });
            response.end(
                request.url!.endsWith("/claim")
                    ? JSON.stringify({ claim_id: "c-1", until: "2026-12-07T01:00:00Z", released_calls: [] })
                    : "{}",
            );
        },
        async (client) => {
            const claim = await client.claim(RUN);
            assert.deepEqual(claim, { claim_id: "c-1", until: "2026-12-07T01:00:00Z", released_calls: [] });
            await client.claim(RUN, claim.claim_id);
            await client.postResults(RUN, [{ call_id: "call_1", content: "done", is_error: false }], { claimId: "c-1" });
        },
    );
    assert.deepEqual(seen, [
        `POST /v1/runs/${RUN}/claim {}`,
        `POST /v1/runs/${RUN}/claim {"claim_id":"c-1"}`,
        `POST /v1/runs/${RUN}/results {"claim_id":"c-1","results":[{"call_id":"call_1","content":"done","is_error":false}]}`,
    ]);
});

test("the claim refusals are ClaimedError with until, ClaimLapsedError and ClaimRequiredError", async () => {
    const answers: Array<[string, Record<string, unknown>]> = [
        ["claimed", { until: "2026-12-07T01:05:00Z" }],
        ["claim_lapsed", {}],
        ["claim_required", {}],
    ];
    await withStandIn(
        (_request, response) => {
            const [code, members] = answers.shift()!;
            problem(response, 409, code, {}, members);
        },
        async (client) => {
            const claimed = await refusal(client.claim(RUN), ClaimedError);
            assert.deepEqual([claimed.status, claimed.code, claimed.until], [409, "claimed", "2026-12-07T01:05:00Z"]);
            const lapsed = await refusal(client.claim(RUN, "c-1"), ClaimLapsedError);
            assert.equal(lapsed.code, "claim_lapsed");
            const required = await refusal(client.postResults(RUN, []), ClaimRequiredError);
            assert.ok(required instanceof ApiError);
            assert.equal(required.code, "claim_required");
        },
    );
});
