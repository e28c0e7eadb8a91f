// Approval links, users' addresses and `notify` (docs/design.md §20) through the client, against the real binary:
// PUBLIC_URL is http://approvals.test (the links name it; their paths are opened on the service's own address) and
// there is no SMTP_URL, so mails are queued and none is sent (tests/links/run.sh sends them).
import assert from "node:assert/strict";
import { after, test } from "node:test";

import type { NotifySkipReason, PutUser, RegisterRun, RunView } from "approval-resume";

import { refusal, startWithCallers } from "./support/callers.js";
import { newUid, register } from "./support/runs.js";
import { WRITE_TOOL } from "./support/service.js";

const PUBLIC_URL = "http://approvals.test";
const { service, worker, tasks } = await startWithCallers("links", { PUBLIC_URL });
after(() => service.stop());

function user(username: string, more: Partial<PutUser> = {}): PutUser {
    return { username, is_admin: false, can_approve_others: false, disabled: false, ...more };
}

/** A run of `owner` waiting on one write, mailing `notify`. */
function registerNotifying(owner: number, notify: number[]): Promise<RunView> {
    const body: RegisterRun = {
        id: crypto.randomUUID(),
        owner_uid: owner,
        messages: [
            { role: "user", content: "Write a meta description for page 12." },
            { role: "assistant", content: null, tool_calls: [{ id: "call_1", type: "function", function: { name: WRITE_TOOL, arguments: "{}" } }] },
        ],
        tools: [{ name: WRITE_TOOL, effect: "write" }],
        notify,
    };
    return worker.registerRun(body);
}

/** The link's page, opened on the service's own address. */
function page(url: string): Promise<Response> {
    assert.ok(url.startsWith(`${PUBLIC_URL}/approve/`), url);
    return fetch(service.baseUrl + new URL(url).pathname);
}

test("a user's email comes back as stored, a put without one takes it away, and a display name is invalid_email", async () => {
    const uid = newUid();
    assert.equal((await worker.putUser(uid, user("olivia", { email: "olivia@example.com" }))).email, "olivia@example.com");
    assert.equal((await worker.putUser(uid, user("olivia"))).email, null);
    const error = await refusal(worker.putUser(uid, user("olivia", { email: "Olivia <olivia@example.com>" })));
    assert.deepEqual([error.status, error.code], [422, "invalid_email"]);
});

test("notify at registration and on a new turn says whose mail is queued and why the others get none", async () => {
    const [owner, approver, outsider, disabled, unknown] = [newUid(), newUid(), newUid(), newUid(), newUid()];
    await worker.putUser(owner, user("olivia", { email: "olivia@example.com" }));
    await worker.putUser(approver, user("arne", { can_approve_others: true }));
    await worker.putUser(outsider, user("otto", { email: "otto@example.com" }));
    await worker.putUser(disabled, user("dora", { can_approve_others: true, disabled: true, email: "dora@example.com" }));

    const run = await registerNotifying(owner, [owner, approver, outsider, disabled, unknown]);
    assert.deepEqual(run.notify?.queued, [owner]);
    const skipped = new Map<number, NotifySkipReason>(run.notify!.skipped.map((entry) => [entry.uid, entry.reason]));
    assert.deepEqual(
        skipped,
        new Map<number, NotifySkipReason>([
            [approver, "no_email"],
            [outsider, "may_not_decide"],
            [disabled, "disabled"],
            [unknown, "unknown_user"],
        ]),
    );

    await tasks.denyTurn(run.id, run.turn.digest, { deciderUid: owner });
    const next = await worker.appendTurn(run.id, {
        messages: [
            { role: "assistant", content: null, tool_calls: [{ id: "call_2", type: "function", function: { name: WRITE_TOOL, arguments: "{}" } }] },
        ],
        notify: [owner],
    });
    assert.equal(next.status, "waiting_for_approval");
    assert.deepEqual(next.notify, { queued: [owner], skipped: [] });
});

test("a link made for an approver opens the page until it is revoked", async () => {
    const [owner, approver] = [newUid(), newUid()];
    await worker.putUser(owner, user("olivia"));
    await worker.putUser(approver, user("arne", { can_approve_others: true }));
    const run = await register(worker, owner);
    assert.equal(run.notify, undefined, "a registration without notify answers none");

    const link = await tasks.createLink(run.id, approver);
    assert.match(link.id, /^[0-9a-f-]{36}$/);
    assert.match(link.url, new RegExp(`^${PUBLIC_URL.replaceAll(".", "\\.")}/approve/${run.id}/[A-Za-z0-9_-]{43}$`));
    assert.ok(Date.parse(link.expires_at) > Date.now());
    const opened = await page(link.url);
    assert.equal(opened.status, 200);
    assert.match(await opened.text(), /You decide as <strong>arne<\/strong>/);
    assert.equal((await worker.getRun(run.id)).status, "waiting_for_approval", "opening the page decides nothing");

    await tasks.revokeLink(run.id, link.id);
    const gone = await page(link.url);
    assert.equal(gone.status, 410);
    assert.match(await gone.text(), /Link revoked/);
    await tasks.revokeLink(run.id, link.id); // again: answered the same
});

test("a link for someone who may not decide the run is refused decider_not_permitted", async () => {
    const [owner, outsider] = [newUid(), newUid()];
    await worker.putUser(owner, user("olivia"));
    await worker.putUser(outsider, user("otto"));
    const run = await register(worker, owner);
    const error = await refusal(tasks.createLink(run.id, outsider));
    assert.deepEqual([error.status, error.code], [403, "decider_not_permitted"]);
});
