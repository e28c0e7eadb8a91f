// The client against the real binary: users, registration, the inbox, decisions of the whole turn and per call
// (with an edit) through the loopback executor, the model input, turns, cancel and complete, the audit, and the
// refusals as ApiError.
import assert from "node:assert/strict";
import { after, test } from "node:test";

import { ApprovalResumeClient, type Verdict } from "approval-resume";

import { refusal, startWithCallers } from "./support/callers.js";
import { executorContent } from "./support/executor.js";
import { READ_ARGUMENTS, WRITE_ARGUMENTS, newRunId, newUid, register } from "./support/runs.js";
import { READ_TOOL, WRITE_TOOL } from "./support/service.js";
import { DENIED_BY_OWNER } from "./support/texts.js";

/** docs/design.md §3: another user's denial of a write, reason variant. */
const DENIED_BY_OTHER_VARIANT =
    'Error: approval_denied (decided_by: other_user, reason: variant). The approval for tool "update_page_metadata" ' +
    "was declined by another backend user, not the person you are talking to. Nothing was executed. Tell the user " +
    "that another backend user declined this version, and propose a different version of this change.";

/** docs/design.md §3: the edit note before an edited call's result. */
const EDITED_BY_OTHER = (args: string) =>
    "Note: approval_edited (decided_by: other_user). The arguments of this call were changed before it was " +
    "approved, by another backend user, not the person you are talking to; it ran with these arguments instead of " +
    `the ones you proposed: ${args}`;

// The agent worker, the AI Tasks module and ops, as the README's "Who calls what" gives them keys.
const { service, worker, tasks } = await startWithCallers("api", {}, { ops: ["metrics:read"] });
after(() => service.stop());

test("a user is upserted, a run registered once, and another body under its id refused run_exists", async () => {
    const owner = newUid();
    const user = await worker.putUser(owner, {
        username: "ada",
        is_admin: false,
        can_approve_others: false,
        disabled: false,
    });
    assert.deepEqual([user.uid, user.username, user.approvable_tools], [owner, "ada", null]);
    const changed = await worker.putUser(owner, {
        username: "ada lovelace",
        is_admin: false,
        can_approve_others: true,
        disabled: false,
        approvable_tools: [READ_TOOL],
    });
    assert.deepEqual([changed.username, changed.can_approve_others, changed.approvable_tools], [
        "ada lovelace",
        true,
        [READ_TOOL],
    ]);

    const id = newRunId();
    const run = await register(worker, owner, id);
    assert.equal(run.status, "waiting_for_approval");
    assert.equal(run.owner_uid, owner);
    assert.equal(run.turn.index, 0);
    assert.match(run.turn.digest, /^[0-9a-f]{64}$/);
    assert.deepEqual(
        run.turn.pending_calls.map((call) => [call.id, call.name, call.arguments, call.effect]),
        [
            ["call_1", READ_TOOL, READ_ARGUMENTS, "read"],
            ["call_2", WRITE_TOOL, WRITE_ARGUMENTS, "write"],
        ],
    );
    assert.deepEqual(await register(worker, owner, id), run, "the same body again answers the same run");
    assert.deepEqual(await worker.getRun(id), run);

    const conflict = await refusal(
        worker.registerRun({
            id,
            owner_uid: owner,
            messages: [
                { role: "user", content: "Something else." },
                {
                    role: "assistant",
                    content: null,
                    tool_calls: [{ id: "call_9", type: "function", function: { name: READ_TOOL, arguments: "{}" } }],
                },
            ],
        }),
    );
    assert.deepEqual([conflict.status, conflict.code, conflict.retryAfter], [409, "run_exists", null]);
    assert.equal(conflict.type, "urn:approval-resume:problem:run_exists");
});

test("a run registered in anthropic's format keeps its thinking block and answers in that format", async () => {
    const owner = newUid();
    await worker.putUser(owner, { username: "ada", is_admin: false, can_approve_others: false, disabled: false });
    const messages = [
        { role: "user" as const, content: "Publish page 12." },
        {
            role: "assistant" as const,
            content: [
                { type: "thinking", thinking: "Page 12 first.", signature: "c2lnbmF0dXJl" },
                { type: "tool_use", id: "toolu_1", name: WRITE_TOOL, input: { page: 12 } },
            ],
        },
    ];
    const run = await worker.registerRun({
        id: newRunId(),
        owner_uid: owner,
        format: "anthropic",
        system: "Be brief.",
        messages,
        tools: [{ name: WRITE_TOOL, effect: "write" }],
    });
    assert.equal(run.format, "anthropic");
    assert.deepEqual(
        run.turn.pending_calls.map((call) => call.id),
        ["toolu_1"],
    );
    const answer = await tasks.denyTurn(run.id, run.turn.digest, { deciderUid: owner });
    assert.deepEqual([answer.format, answer.model_input?.format], ["anthropic", "anthropic"]);
    const input = await worker.modelInput(run.id);
    assert.equal(input.format, "anthropic");
    if (input.format === "anthropic") {
        assert.equal(input.system, "Be brief.");
        assert.deepEqual(input.messages.slice(0, 2), messages, "the registered messages, thinking block and all");
    }
    const chat = await refusal(worker.modelInput(run.id, { format: "openai-chat" }));
    assert.deepEqual([chat.status, chat.code], [422, "format_not_representable"], "a thinking block has no chat form");
});

test("the inbox lists an approver's waiting runs newest first, page by page, and a stranger sees none", async () => {
    const [owner, approver, stranger] = [newUid(), newUid(), newUid()];
    const plain = { is_admin: false, disabled: false };
    await worker.putUser(owner, { username: "ada", can_approve_others: false, ...plain });
    await worker.putUser(approver, { username: "grace", can_approve_others: true, ...plain });
    await worker.putUser(stranger, { username: "eve", can_approve_others: false, ...plain });
    const registered: string[] = [];
    for (let i = 0; i < 3; i += 1) {
        registered.push((await register(worker, owner)).id);
    }
    const newestFirst = [...registered].reverse();

    const first = await tasks.approvals({ acting_uid: approver, owner_uid: owner, limit: 2 });
    assert.deepEqual(
        first.items.map((item) => item.run_id),
        newestFirst.slice(0, 2),
    );
    assert.notEqual(first.next_cursor, null);
    const second = await tasks.approvals({ acting_uid: approver, owner_uid: owner, limit: 2, cursor: first.next_cursor! });
    assert.deepEqual(
        second.items.map((item) => item.run_id),
        newestFirst.slice(2),
    );
    assert.equal(second.next_cursor, null);

    const all: string[] = [];
    for await (const item of tasks.allApprovals({ acting_uid: approver, owner_uid: owner, limit: 2 })) {
        all.push(item.run_id);
        assert.deepEqual(
            item.turn.pending_calls.map((call) => [call.name, call.effect, call.approvable]),
            [
                [READ_TOOL, "read", true],
                [WRITE_TOOL, "write", true],
            ],
        );
        assert.equal(item.turn.pending_calls[0]!.arguments, undefined, "no arguments at privacy level metadata");
    }
    assert.deepEqual(all, newestFirst);
    assert.deepEqual((await tasks.approvals({ acting_uid: stranger, owner_uid: owner })).items, []);
});

test("the owner denies the whole turn and the model reads the exact ADR-200 text in every format", async () => {
    const owner = newUid();
    await worker.putUser(owner, { username: "ada", is_admin: false, can_approve_others: false, disabled: false });
    const run = await register(worker, owner);
    const early = await refusal(worker.modelInput(run.id));
    assert.deepEqual([early.status, early.code], [409, "not_resumed"]);

    const answer = await tasks.denyTurn(run.id, run.turn.digest, { deciderUid: owner });
    assert.equal(answer.status, "resumed");
    assert.deepEqual(
        [answer.decision.approved, answer.decision.decided_by, answer.decision.decider_uid, answer.decision.reason],
        [false, "run_owner", owner, null],
    );
    assert.deepEqual(
        answer.results.map((result) => [result.call_id, result.outcome, result.is_error, result.content]),
        [
            ["call_1", "denied", true, DENIED_BY_OWNER(READ_TOOL)],
            ["call_2", "denied", true, DENIED_BY_OWNER(WRITE_TOOL)],
        ],
    );
    assert.deepEqual(service.executor.callsOf(run.id), [], "a denial sends nothing to the executor");
    // Optional in the schema (a decision token at privacy level metadata or none sees none); an API key sees it.
    const input = answer.model_input;
    assert.ok(input !== undefined, "an API key's decision answer has the model input");
    assert.equal(answer.format, "openai-chat", "the run's own format");
    assert.equal(input.format, "openai-chat");
    if (input.format === "openai-chat") {
        const tools = input.messages.filter((message) => message.role === "tool");
        assert.deepEqual(
            tools.map((message) => (message as { content?: unknown }).content),
            [DENIED_BY_OWNER(READ_TOOL), DENIED_BY_OWNER(WRITE_TOOL)],
        );
    }

    const anthropic = await worker.modelInput(run.id, { format: "anthropic" });
    assert.equal(anthropic.format, "anthropic");
    if (anthropic.format === "anthropic") {
        const last = anthropic.messages.at(-1)!;
        assert.equal(last.role, "user");
        assert.ok(Array.isArray(last.content), "the results are blocks of one user message");
        assert.deepEqual(
            last.content.map((block) => (block.type === "tool_result" ? [block.tool_use_id, block.content] : block.type)),
            [
                ["call_1", DENIED_BY_OWNER(READ_TOOL)],
                ["call_2", DENIED_BY_OWNER(WRITE_TOOL)],
            ],
        );
    }
    const responses = await worker.modelInput(run.id, { format: "openai-responses" });
    assert.equal(responses.format, "openai-responses");
    if (responses.format === "openai-responses") {
        const outputs = responses.input.flatMap((item) => (item.type === "function_call_output" ? [item.output] : []));
        assert.deepEqual(outputs, [DENIED_BY_OWNER(READ_TOOL), DENIED_BY_OWNER(WRITE_TOOL)]);
    }

    const audit = await worker.runEvents(run.id);
    assert.deepEqual(
        audit.approval_events.map((event) => [event.decided_by, event.decider_uid, event.client_name, event.credential]),
        [["run_owner", owner, "tasks", "api_key"]],
    );
    assert.deepEqual(
        audit.tool_events.map((event) => [event.call_id, event.outcome, event.arguments]),
        [
            ["call_1", "denied", null],
            ["call_2", "denied", null],
        ],
    );

    const replay = await tasks.denyTurn(run.id, run.turn.digest, { deciderUid: owner });
    assert.deepEqual(replay, answer, "the same decision again answers the same");
    const other = await refusal(tasks.approveTurn(run.id, run.turn.digest, { deciderUid: owner }));
    assert.deepEqual([other.status, other.code], [409, "already_decided"]);
});

test("an approval runs each call once through the loopback executor, in order, for the owner", async () => {
    const [owner, approver] = [newUid(), newUid()];
    await worker.putUser(owner, { username: "ada", is_admin: false, can_approve_others: false, disabled: false });
    await worker.putUser(approver, { username: "grace", is_admin: false, can_approve_others: true, disabled: false });
    const run = await register(worker, owner);

    const answer = await tasks.approveTurn(run.id, run.turn.digest, { deciderUid: approver, format: "openai-chat" });
    assert.deepEqual([answer.decision.approved, answer.decision.decided_by], [true, "other_user"]);
    const read = JSON.parse(READ_ARGUMENTS) as unknown;
    const write = JSON.parse(WRITE_ARGUMENTS) as unknown;
    assert.deepEqual(
        answer.results.map((result) => [result.call_id, result.outcome, result.is_error, result.content]),
        [
            ["call_1", "ok", false, executorContent(READ_TOOL, owner, read)],
            ["call_2", "ok", false, executorContent(WRITE_TOOL, owner, write)],
        ],
    );
    const calls = service.executor.callsOf(run.id);
    assert.deepEqual(
        calls.map((call) => [call.tool, call.idempotencyKey, call.tenantHeader, call.body.owner_uid, call.body.arguments]),
        [
            [READ_TOOL, `${run.id}:call_1`, "default", owner, read],
            [WRITE_TOOL, `${run.id}:call_2`, "default", owner, write],
        ],
    );

    const replay = await tasks.approveTurn(run.id, run.turn.digest, { deciderUid: approver });
    assert.deepEqual(replay, answer);
    assert.equal(service.executor.callsOf(run.id).length, 2, "a replayed approval runs nothing again");
    const audit = await worker.runEvents(run.id);
    assert.deepEqual(
        audit.tool_events.map((event) => [event.call_id, event.outcome, event.decided_by]),
        [
            ["call_1", "ok", "other_user"],
            ["call_2", "ok", "other_user"],
        ],
    );
});

test("a verdict per call runs one call with edited arguments and denies the other with variant", async () => {
    const [owner, approver] = [newUid(), newUid()];
    await worker.putUser(owner, { username: "ada", is_admin: false, can_approve_others: false, disabled: false });
    await worker.putUser(approver, { username: "grace", is_admin: false, can_approve_others: true, disabled: false });
    const run = await register(worker, owner);
    const verdicts: Verdict[] = [
        { call_id: "call_2", approved: false, reason: "variant" },
        { call_id: "call_1", approved: true, arguments: { page: 13 } },
    ];

    const answer = await tasks.decideCalls(run.id, run.turn.digest, verdicts, { deciderUid: approver });
    assert.equal(answer.decision.approved, null, "mixed verdicts");
    assert.deepEqual(
        answer.decision.calls.map((call) => [call.call_id, call.approved, call.reason, call.edited]),
        [
            ["call_1", true, null, true],
            ["call_2", false, "variant", false],
        ],
    );
    const [edited, denied] = answer.results;
    assert.deepEqual([edited!.outcome, edited!.edited], ["ok", true]);
    assert.equal(
        edited!.content,
        `${EDITED_BY_OTHER('{"page":13}')}\n\n${executorContent(READ_TOOL, owner, { page: 13 })}`,
    );
    assert.deepEqual([denied!.outcome, denied!.content], ["denied", DENIED_BY_OTHER_VARIANT]);
    assert.deepEqual(
        service.executor.callsOf(run.id).map((call) => [call.body.call_id, call.body.arguments]),
        [["call_1", { page: 13 }]],
        "only the approved call ran, with the edited arguments",
    );

    const again = await tasks.decideCalls(run.id, run.turn.digest, [...verdicts].reverse(), { deciderUid: approver });
    assert.deepEqual(again, answer, "the same verdicts in another order answer the same");
    const approveBoth: Verdict[] = [
        { call_id: "call_1", approved: true },
        { call_id: "call_2", approved: true },
    ];
    const other = await refusal(tasks.decideCalls(run.id, run.turn.digest, approveBoth, { deciderUid: approver }));
    assert.deepEqual([other.status, other.code], [409, "already_decided"]);
    assert.equal(service.executor.callsOf(run.id).length, 1, "the refused decision ran nothing");
});

test("a resumed run waits again on its next turn, is decided and completed; a finished run is not cancelled", async () => {
    const owner = newUid();
    await worker.putUser(owner, { username: "ada", is_admin: false, can_approve_others: false, disabled: false });
    const run = await register(worker, owner);
    await tasks.denyTurn(run.id, run.turn.digest, { deciderUid: owner, reason: "skip" });

    const next = await worker.appendTurn(run.id, {
        messages: [
            { role: "user", content: "Then just read it." },
            {
                role: "assistant",
                content: null,
                tool_calls: [{ id: "call_3", type: "function", function: { name: READ_TOOL, arguments: "{}" } }],
            },
        ],
        approval_ttl_secs: 600,
    });
    assert.deepEqual([next.status, next.turn.index], ["waiting_for_approval", 1]);
    assert.notEqual(next.turn.digest, run.turn.digest);
    assert.deepEqual(
        next.turn.pending_calls.map((call) => call.id),
        ["call_3"],
    );
    assert.notEqual(next.expires_at, null);

    const stale = await refusal(tasks.approveTurn(run.id, run.turn.digest, { deciderUid: owner }));
    assert.deepEqual([stale.status, stale.code], [409, "stale_turn"]);
    const answer = await tasks.approveTurn(run.id, next.turn.digest, { deciderUid: owner, format: "openai-responses" });
    assert.equal(answer.results[0]!.outcome, "ok");
    assert.equal(answer.model_input?.format, "openai-responses");

    assert.equal((await worker.completeRun(run.id)).status, "completed");
    const finished = await refusal(worker.cancelRun(run.id));
    assert.deepEqual([finished.status, finished.code], [409, "run_finished"]);

    const waiting = await register(worker, owner);
    const cancelled = await worker.cancelRun(waiting.id);
    assert.deepEqual([cancelled.status, cancelled.decision], ["cancelled", undefined]);
});

test("refusals are ApiErrors with the problem's status and code", async () => {
    const stranger = new ApprovalResumeClient({ baseUrl: service.baseUrl, credential: "ar_not_a_key" });
    const unauthorized = await refusal(stranger.getRun(newRunId()));
    assert.deepEqual([unauthorized.status, unauthorized.code], [401, "unauthorized"]);
    const scope = await refusal(worker.approvals({ acting_uid: 1 }));
    assert.deepEqual([scope.status, scope.code], [403, "missing_scope"]);
    assert.match(scope.message, /^HTTP 403 missing_scope: .+ \(request [0-9a-f-]{36}\)$/);
    const missing = await refusal(worker.getRun(newRunId()));
    assert.deepEqual([missing.status, missing.code], [404, "not_found"]);
    const cursor = await refusal(tasks.approvals({ acting_uid: 1, cursor: "no-cursor" }));
    assert.deepEqual([cursor.status, cursor.code], [422, "invalid_cursor"]);
});

test("the ops endpoints answer: health, readiness and metrics", async () => {
    const ops = new ApprovalResumeClient({ baseUrl: `${service.baseUrl}/`, credential: service.keys.ops! });
    assert.deepEqual(await ops.healthz(), { status: "ok" });
    assert.deepEqual(await ops.readyz(), { status: "ready" });
    assert.match(await ops.metrics(), /^# (HELP|TYPE) /m);
    assert.match(await ops.metrics(), /http_requests_total\{/);
});

// A denial carries no arguments and an approval no reason: the service's 422s are compile errors here.
export const typeChecks: Verdict[] = [
    // @ts-expect-error: arguments belong to an approval
    { call_id: "call_1", approved: false, arguments: "{}" },
    // @ts-expect-error: a reason belongs to a denial
    { call_id: "call_1", approved: true, reason: "skip" },
    // @ts-expect-error: no such reason
    { call_id: "call_1", approved: false, reason: "later" },
];
