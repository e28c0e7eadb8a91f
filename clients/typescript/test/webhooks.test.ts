// Webhooks against the real binary: a subscription made through the client, a request the service signed and sent
// to a loopback receiver verified by WebhookVerifier (the `standardwebhooks` package), and copies that were
// tampered with, signed with another secret, or whose body names another event refused.
import assert from "node:assert/strict";
import { createServer, type IncomingHttpHeaders, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { after, before, test } from "node:test";

import { ApiError, ApprovalResumeClient, WebhookVerificationError, WebhookVerifier } from "approval-resume";
import { Webhook } from "standardwebhooks";

import { eventually, newUid, register } from "./support/runs.js";
import { type Service, startService } from "./support/service.js";

interface Received {
    headers: IncomingHttpHeaders;
    body: Buffer;
}

let service: Service;
let worker: ApprovalResumeClient;
let hooks: ApprovalResumeClient;
let receiver: Server;
let receiverUrl: string;
const received: Received[] = [];

before(async () => {
    service = await startService(
        { worker: ["users:write", "runs:write", "runs:read"], hooks: ["webhooks:write"] },
        "webhooks",
    );
    worker = new ApprovalResumeClient({ baseUrl: service.baseUrl, credential: service.keys.worker! });
    hooks = new ApprovalResumeClient({ baseUrl: service.baseUrl, credential: service.keys.hooks! });
    // Keeps every request as it came, bytes and headers, and answers 204; it verifies nothing itself.
    receiver = createServer((request, response) => {
        const chunks: Buffer[] = [];
        request.on("data", (chunk: Buffer) => chunks.push(chunk));
        request.on("end", () => {
            received.push({ headers: request.headers, body: Buffer.concat(chunks) });
            response.writeHead(204).end();
        });
    });
    await new Promise<void>((resolve) => receiver.listen(0, "127.0.0.1", resolve));
    receiverUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/approval-events`;
});

after(async () => {
    await service?.stop();
    receiver?.closeAllConnections();
    await new Promise((resolve) => receiver?.close(resolve));
});

test("a request the service signed verifies, and a tampered or foreign-signed copy is refused", async () => {
    const subscription = await hooks.createWebhook({ url: receiverUrl, event_types: ["run.waiting"] });
    assert.match(subscription.secret, /^whsec_[A-Za-z0-9+/]+=*$/);
    assert.deepEqual([subscription.url, subscription.event_types, subscription.state], [receiverUrl, ["run.waiting"], "active"]);
    const listed = (await hooks.listWebhooks()).find((item) => item.id === subscription.id);
    assert.ok(listed !== undefined);
    assert.equal("secret" in listed, false, "the secret is shown once, never listed");

    const owner = newUid();
    await worker.putUser(owner, { username: "ada", is_admin: false, can_approve_others: false, disabled: false });
    const run = await register(worker, owner);
    const request = await eventually("a webhook request for the run", 20, () =>
        received.find((item) => item.body.toString("utf8").includes(run.id)),
    );

    const verifier = new WebhookVerifier(subscription.secret);
    const event = verifier.verify(request.body, request.headers);
    assert.ok(event.type === "run.waiting", "a run's event, with a run's data");
    assert.deepEqual([event.data.run_id, event.data.status], [run.id, "waiting_for_approval"]);
    assert.equal(event.id, request.headers["webhook-id"], "webhook-id is the event id, to deduplicate by");
    assert.equal(event.data.turn.digest, run.turn.digest);
    // The same request as a fetch Headers object and the body as text verify alike.
    const asHeaders = new Headers(
        Object.entries(request.headers).flatMap(([name, value]) => (typeof value === "string" ? [[name, value] as [string, string]] : [])),
    );
    assert.deepEqual(verifier.verify(request.body.toString("utf8"), asHeaders), event);

    const tampered = request.body.toString("utf8").replace('"run.waiting"', '"run.resumed"');
    assert.notEqual(tampered, request.body.toString("utf8"));
    assert.throws(() => verifier.verify(tampered, request.headers), WebhookVerificationError);
    const otherSecret = `whsec_${Buffer.from("another secret of 32 bytes here!").toString("base64")}`;
    assert.throws(() => new WebhookVerifier(otherSecret).verify(request.body, request.headers), WebhookVerificationError);
    const unsigned = { ...request.headers, "webhook-signature": undefined };
    assert.throws(() => verifier.verify(request.body, unsigned), WebhookVerificationError);

    // A rotation: the new secret is shown once, and while the old one overlaps, both sign each request, the very
    // next one included (the service reads the secrets again before it sends).
    const rotated = await hooks.rotateWebhookSecret(subscription.id, { overlap_secs: 600 });
    assert.equal(rotated.id, subscription.id);
    assert.match(rotated.secret, /^whsec_[A-Za-z0-9+/]+=*$/);
    assert.notEqual(rotated.secret, subscription.secret);
    assert.notEqual(rotated.previous_secret_expires_at, null);
    assert.equal(rotated.backlog_capped, false);
    const next = await register(worker, owner);
    const signedTwice = await eventually("a webhook request for the next run", 20, () =>
        received.find((item) => item.body.toString("utf8").includes(next.id)),
    );
    assert.equal(new WebhookVerifier(rotated.secret).verify(signedTwice.body, signedTwice.headers).data.run_id, next.id);
    assert.equal(verifier.verify(signedTwice.body, signedTwice.headers).data.run_id, next.id, "the old secret overlaps");

    await hooks.removeWebhook(subscription.id);
    const gone = await hooks.removeWebhook(subscription.id).then(
        () => assert.fail("removed twice"),
        (error: unknown) => error,
    );
    assert.ok(gone instanceof ApiError);
    assert.deepEqual([gone.status, gone.code], [404, "not_found"]);
});

test("a signed body whose id is not its webhook-id is refused", () => {
    const secret = `whsec_${Buffer.from("a secret of thirty-two bytes!!!!").toString("base64")}`;
    const signer = new Webhook(secret);
    const body = JSON.stringify({
        id: "evt_00000000000000000000000000000001",
        type: "run.waiting",
        timestamp: new Date().toISOString(),
        data: { run_id: "0b0e9f1e-6a56-4c2b-9a43-3f1f4c1d2a01", tenant: "default", status: "waiting_for_approval" },
    });
    const now = new Date();
    const headers = (id: string) => ({
        "webhook-id": id,
        "webhook-timestamp": String(Math.floor(now.getTime() / 1000)),
        "webhook-signature": signer.sign(id, now, body),
    });
    const verifier = new WebhookVerifier(secret);
    assert.equal(verifier.verify(body, headers("evt_00000000000000000000000000000001")).id, "evt_00000000000000000000000000000001");
    assert.throws(
        () => verifier.verify(body, headers("evt_00000000000000000000000000000002")),
        (error: unknown) => error instanceof WebhookVerificationError && /not the webhook-id/.test(error.message),
    );
});
