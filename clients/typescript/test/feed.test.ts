// The feed (`GET /v1/events?after&wait`) against the real binary: a reader with a file cursor store that stops in
// the middle of a page and starts again (a new client, a new store over the same file, as after a restart of its
// process) neither misses nor repeats an event, and is woken by an event committed while it waits; an exception in
// the loop leaves the event in hand to come again. And the file store itself.
import assert from "node:assert/strict";
import { mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";

import { ApprovalResumeClient, type Event, MemoryCursorStore, type RunView } from "approval-resume";
import { FileCursorStore } from "approval-resume/file-cursor-store";

import { newUid, register } from "./support/runs.js";
import { type Service, startService } from "./support/service.js";

let service: Service;
let worker: ApprovalResumeClient;
let tasks: ApprovalResumeClient;
let scratch: string;

before(async () => {
    service = await startService(
        {
            worker: ["users:write", "runs:write", "runs:read"],
            tasks: ["decisions:write"],
            reader: ["events:read"],
        },
        "feed",
    );
    worker = new ApprovalResumeClient({ baseUrl: service.baseUrl, credential: service.keys.worker! });
    tasks = new ApprovalResumeClient({ baseUrl: service.baseUrl, credential: service.keys.tasks! });
    scratch = await mkdtemp(join(tmpdir(), "approval-resume-feed-"));
});

after(async () => {
    await service?.stop();
    await rm(scratch, { recursive: true, force: true });
});

/** A controller that also aborts by itself after `seconds`, so a reader that gets too few events fails, not hangs. */
function stopper(seconds: number): AbortController {
    const controller = new AbortController();
    setTimeout(() => controller.abort(), seconds * 1000).unref();
    return controller;
}

function reader(): ApprovalResumeClient {
    return new ApprovalResumeClient({ baseUrl: service.baseUrl, credential: service.keys.reader! });
}

/** Every event of the tenant so far, read page by page without a store: what a reader must have seen, in order. */
async function everyEvent(): Promise<Event[]> {
    const events: Event[] = [];
    let after: string | undefined;
    for (;;) {
        const page = await reader().events(after === undefined ? { limit: 2 } : { after, limit: 2 });
        if (page.events.length === 0) {
            return events;
        }
        events.push(...page.events);
        after = page.next_cursor;
    }
}

test("a reader that stops mid-page and starts again from its file neither misses nor repeats an event", async () => {
    const owner = newUid();
    await worker.putUser(owner, { username: "ada", is_admin: false, can_approve_others: false, disabled: false });
    const runs: RunView[] = [];
    for (let i = 0; i < 5; i += 1) {
        runs.push(await register(worker, owner));
    }
    const path = join(scratch, "cursor.json");

    // The first reader: pages of 3; it handles 4 events (the whole first page and one of the second) and stops.
    const first: Event[] = [];
    const stopFirst = stopper(20);
    for await (const event of reader().feed({ store: new FileCursorStore(path), limit: 3, wait: 1, signal: stopFirst.signal })) {
        first.push(event);
        if (first.length === 4) {
            stopFirst.abort();
        }
    }
    assert.equal(first.length, 4, "the abort ended the loop after the event in hand");
    const saved = JSON.parse(await readFile(path, "utf8")) as { after: string; handled: string[] };
    assert.deepEqual(saved.handled, [first[3]!.id], "the place is the second page's cursor and the event handled of it");
    assert.deepEqual(await readdir(scratch), ["cursor.json"], "no temporary file is left behind");

    // The second reader, as after a restart: it gets the fifth event, then waits; a decision committed while it
    // waits wakes it with run.resumed.
    const second: Event[] = [];
    const stopSecond = stopper(20);
    let decided = false;
    for await (const event of reader().feed({ store: new FileCursorStore(path), limit: 3, wait: 10, signal: stopSecond.signal })) {
        second.push(event);
        if (!decided) {
            decided = true;
            // Not awaited inside the page: the reader must come back to a long poll for the event to wake it.
            setTimeout(() => void tasks.denyTurn(runs[0]!.id, runs[0]!.turn.digest, { deciderUid: owner }), 300);
        }
        if (event.type === "run.resumed") {
            stopSecond.abort();
        }
    }

    const every = await everyEvent();
    assert.deepEqual(
        [...first, ...second].map((event) => event.id),
        every.map((event) => event.id),
        "the two readers together saw every event once, in the feed's order",
    );
    assert.deepEqual(
        every.map((event) => [event.type, event.data.run_id]),
        [...runs.map((run) => ["run.waiting", run.id]), ["run.resumed", runs[0]!.id]],
    );
    const resumed = second.at(-1)!;
    assert.ok(resumed.type === "run.resumed", "the last event is the run's resumption");
    assert.deepEqual(resumed.data.decision, { approved: false, decided_by: "run_owner", decider_uid: owner });
    assert.deepEqual(resumed.data.outcomes, { denied: 2 });
    assert.equal(resumed.data.turn.digest, runs[0]!.turn.digest);
});

test("an exception in the loop leaves the event in hand unhandled, so it comes again", async () => {
    const owner = newUid();
    await worker.putUser(owner, { username: "ada", is_admin: false, can_approve_others: false, disabled: false });
    const start = await reader().events({});
    const store = new MemoryCursorStore({ after: start.next_cursor, handled: [] });
    const runs = [await register(worker, owner), await register(worker, owner)];

    const seen: string[] = [];
    await assert.rejects(async () => {
        for await (const event of reader().feed({ store, wait: 5, signal: stopper(10).signal })) {
            seen.push(event.data.run_id ?? "no run");
            if (seen.length === 2) {
                throw new Error("the handler failed");
            }
        }
    }, /the handler failed/);
    const stop = stopper(10);
    for await (const event of reader().feed({ store, wait: 1, signal: stop.signal })) {
        seen.push(event.data.run_id ?? "no run");
        stop.abort();
    }
    assert.deepEqual(seen, [runs[0]!.id, runs[1]!.id, runs[1]!.id], "the failed event again, the handled one not");
});

test("a reader stopped while it waits for events ends its loop at once", async () => {
    const start = await reader().events({});
    const stop = new AbortController();
    const began = Date.now();
    setTimeout(() => stop.abort(), 200);
    for await (const event of reader().feed({
        store: new MemoryCursorStore({ after: start.next_cursor, handled: [] }),
        wait: 20,
        signal: stop.signal,
    })) {
        assert.fail(`no event was expected, got ${event.type}`);
    }
    assert.ok(Date.now() - began < 10_000, "the long poll was cut short, not waited out");
});

test("a file cursor store keeps the last whole position and refuses a file that holds none", async () => {
    const path = join(scratch, "store.json");
    const store = new FileCursorStore(path);
    assert.equal(await store.load(), null, "no file: no position, the reader starts at the oldest event kept");
    await store.save({ after: "1_1", handled: ["evt_a"] });
    await store.save({ after: "12_34", handled: [] });
    assert.deepEqual(await new FileCursorStore(path).load(), { after: "12_34", handled: [] });
    assert.deepEqual((await readdir(scratch)).filter((name) => name.startsWith(".")), [], "no temporary file left");

    await writeFile(path, '{"after": "12_34", "handled": [7]}');
    await assert.rejects(store.load(), /holds no feed position/);
    await writeFile(path, "12_3");
    await assert.rejects(store.load(), /holds no feed position \(not JSON\)/);
    await assert.rejects(new FileCursorStore(join(scratch, "missing", "store.json")).save({ after: null, handled: [] }));
});
