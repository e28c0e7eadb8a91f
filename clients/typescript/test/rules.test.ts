// Remembered decisions (docs/design.md §18) through the client, against the real binary: rules made on a run and for
// an owner, listed by run and by owner, deciding a turn registered after them at once as their author would (the
// decision names each rule), revoked; a decision remembered as rules; and the refusals as ApiErrors with their codes.
import assert from "node:assert/strict";
import { after, test } from "node:test";

import type { ApprovalResumeClient, ChatMessage, TurnDecideOptions } from "approval-resume";

import { refusal, startWithCallers } from "./support/callers.js";
import { READ_ARGUMENTS, newRunId, newUid, register } from "./support/runs.js";
import { READ_TOOL, WRITE_TOOL } from "./support/service.js";

const { service, worker, tasks } = await startWithCallers("rules");
after(() => service.stop());

async function user(name = "ada"): Promise<number> {
    const uid = newUid();
    await worker.putUser(uid, { username: name, is_admin: false, can_approve_others: false, disabled: false });
    return uid;
}

/** A turn the model asks for after a verdict: one call of `tool`. */
function turn(callId: string, tool: string, args: string = READ_ARGUMENTS): ChatMessage[] {
    return [
        { role: "user", content: "Once more." },
        {
            role: "assistant",
            content: null,
            tool_calls: [{ id: callId, type: "function", function: { name: tool, arguments: args } }],
        },
    ];
}

/** A day from now, as the service's RFC 3339. */
function tomorrow(): string {
    return new Date(Date.now() + 86_400_000).toISOString();
}

test("a run rule is made, listed by its run and its owner, decides the next turn at once as its author, and once revoked decides nothing", async () => {
    const owner = await user();
    const run = await register(worker, owner);

    const rule = await tasks.makeRunRule(run.id, {
        created_by: owner,
        tool: READ_TOOL,
        arguments: { page: 12 },
        verdict: "approve",
    });
    assert.deepEqual(
        [rule.scope, rule.run_id, rule.owner_uid, rule.tool, rule.verdict, rule.created_by, rule.live],
        ["run", run.id, owner, READ_TOOL, "approve", owner, true],
    );
    assert.deepEqual(JSON.parse(rule.arguments ?? "null"), { page: 12 });
    assert.deepEqual([rule.expires_at, rule.revoked_at, rule.revoked_by], [null, null, null]);
    assert.deepEqual(await tasks.listRunRules(run.id), [rule]);
    assert.deepEqual(await worker.listOwnerRules(owner), [rule], "runs:read lists them too");

    // The turn waiting already is not the rule's: rules decide the turns registered after them.
    assert.equal((await worker.getRun(run.id)).status, "waiting_for_approval");
    await tasks.denyTurn(run.id, run.turn.digest, { deciderUid: owner });
    const decided = await worker.appendTurn(run.id, { messages: turn("call_3", READ_TOOL) });
    assert.deepEqual([decided.status, decided.turn.index], ["resumed", 1]);
    assert.deepEqual(
        [decided.decision?.approved, decided.decision?.decider_uid, decided.decision?.decided_by],
        [true, owner, "run_owner"],
    );
    assert.deepEqual(decided.decision?.calls.map((call) => [call.call_id, call.approved, call.rule_id]), [
        ["call_3", true, rule.id],
    ]);
    assert.deepEqual(
        service.executor.callsOf(run.id).map((call) => call.body.call_id),
        ["call_3"],
        "the service ran the call the rule approved, once",
    );

    const other = await refusal(tasks.makeRunRule(run.id, { tool: READ_TOOL, verdict: "approve" }));
    assert.deepEqual([other.status, other.code], [422, "missing_created_by"], "a key names the rule's author");

    const revoked = await tasks.revokeRule(rule.id, { revokedBy: owner });
    assert.deepEqual([revoked.id, revoked.live, revoked.revoked_by], [rule.id, false, owner]);
    assert.notEqual(revoked.revoked_at, null);
    assert.deepEqual(await tasks.revokeRule(rule.id, { revokedBy: owner }), revoked, "revoked already: as it stands");
    assert.deepEqual(await tasks.listRunRules(run.id), [revoked]);
    const waiting = await worker.appendTurn(run.id, { messages: turn("call_4", READ_TOOL) });
    assert.deepEqual([waiting.status, waiting.turn.index, waiting.decision], ["waiting_for_approval", 2, undefined]);
});

test("an owner rule decides a new run's registration at once, and is listed by its owner with its end", async () => {
    const owner = await user();
    const expiresAt = tomorrow();
    const rule = await tasks.makeOwnerRule({
        owner_uid: owner,
        created_by: owner,
        tool: READ_TOOL,
        verdict: "approve",
        expires_at: expiresAt,
    });
    assert.deepEqual([rule.scope, rule.run_id, rule.owner_uid, rule.live], ["owner", null, owner, true]);
    assert.equal(Date.parse(rule.expires_at ?? ""), Date.parse(expiresAt));

    const run = await worker.registerRun({
        id: newRunId(),
        owner_uid: owner,
        messages: [{ role: "user", content: "Read page 12." }, ...turn("call_1", READ_TOOL).slice(1)],
        tools: [{ name: READ_TOOL, effect: "read" }],
    });
    assert.equal(run.status, "resumed", "decided at its registration, without a person");
    assert.deepEqual(run.decision?.calls.map((call) => [call.call_id, call.approved, call.rule_id]), [
        ["call_1", true, rule.id],
    ]);
    assert.deepEqual(service.executor.callsOf(run.id).map((call) => call.body.call_id), ["call_1"], "and ran");
    assert.deepEqual(await tasks.listOwnerRules(owner), [rule]);
    assert.deepEqual(await tasks.listRunRules(run.id), [], "an owner rule is no rule of the run");
    assert.equal((await tasks.revokeRule(rule.id, { revokedBy: owner })).live, false);
});

test("a decision remembered as rules makes one per tool and verdict, and a person's approval of a call a deny rule covers is denied_by_rule", async () => {
    const owner = await user();
    const run = await register(worker, owner);
    await tasks.decideCalls(
        run.id,
        run.turn.digest,
        [
            { call_id: "call_1", approved: true, remember: "run" },
            { call_id: "call_2", approved: false, reason: "skip", remember: "run" },
        ],
        { deciderUid: owner },
    );
    const rules = await tasks.listRunRules(run.id);
    assert.deepEqual(
        rules.map((rule) => [rule.tool, rule.verdict, rule.reason, rule.arguments, rule.created_by]).sort(),
        [
            [READ_TOOL, "approve", null, null, owner],
            [WRITE_TOOL, "deny", "skip", null, owner],
        ],
    );

    // Both calls of the next turn are covered, by one author: decided at once, the write denied by its rule.
    const next = await worker.appendTurn(run.id, {
        messages: [
            { role: "user", content: "Write it anyway." },
            {
                role: "assistant",
                content: null,
                tool_calls: [
                    { id: "call_3", type: "function", function: { name: READ_TOOL, arguments: "{}" } },
                    { id: "call_4", type: "function", function: { name: WRITE_TOOL, arguments: "{}" } },
                ],
            },
        ],
    });
    assert.deepEqual([next.status, next.decision?.approved, next.decision?.decider_uid], ["resumed", null, owner]);
    const ruleOf = new Map(rules.map((rule) => [rule.tool, rule.id]));
    assert.deepEqual(next.decision?.calls.map((call) => [call.call_id, call.approved, call.rule_id]), [
        ["call_3", true, ruleOf.get(READ_TOOL)],
        ["call_4", false, ruleOf.get(WRITE_TOOL)],
    ]);
    assert.deepEqual(service.executor.callsOf(run.id).map((call) => call.body.call_id), ["call_1", "call_3"]);

    // A person may not approve what a live deny rule covers: revoke it first.
    const other = await register(worker, owner);
    const never = await tasks.makeRunRule(other.id, {
        created_by: owner,
        tool: WRITE_TOOL,
        verdict: "deny",
        reason: "skip",
    });
    const denied = await refusal(tasks.approveTurn(other.id, other.turn.digest, { deciderUid: owner }));
    assert.deepEqual([denied.status, denied.code], [409, "denied_by_rule"]);
    assert.equal((await worker.getRun(other.id)).status, "waiting_for_approval", "nothing was recorded");
    await tasks.revokeRule(never.id, { revokedBy: owner });
    const approved = await tasks.approveTurn(other.id, other.turn.digest, { deciderUid: owner });
    assert.equal(approved.decision.approved, true);
});

test("a whole-turn decision remembered for the owner makes owner rules that end when it says", async () => {
    const owner = await user();
    const run = await register(worker, owner);
    const until = new Date(Date.now() + 2 * 86_400_000);
    await tasks.denyTurn(run.id, run.turn.digest, { deciderUid: owner, remember: "owner", rememberUntil: until });
    const rules = await tasks.listOwnerRules(owner);
    assert.deepEqual(rules.map((rule) => [rule.scope, rule.tool, rule.verdict]).sort(), [
        ["owner", READ_TOOL, "deny"],
        ["owner", WRITE_TOOL, "deny"],
    ]);
    for (const rule of rules) {
        assert.equal(Date.parse(rule.expires_at ?? ""), until.getTime());
    }
});

test("refusals of rules are ApiErrors with their codes, and a refused remember refuses the whole decision", async () => {
    const owner = await user();
    const stranger = await user("grace");

    const fourEyes = await worker.registerRun({
        id: newRunId(),
        owner_uid: owner,
        messages: [{ role: "user", content: "Read page 12." }, ...turn("call_1", READ_TOOL).slice(1)],
        tools: [{ name: READ_TOOL, effect: "read" }],
        require_second_approver: true,
    });
    const second = await refusal(
        tasks.makeRunRule(fourEyes.id, { created_by: owner, tool: READ_TOOL, verdict: "approve" }),
    );
    assert.deepEqual([second.status, second.code], [403, "second_approver_required"]);

    const notPermitted = await refusal(
        tasks.makeOwnerRule({
            owner_uid: owner,
            created_by: stranger,
            tool: READ_TOOL,
            verdict: "deny",
            expires_at: tomorrow(),
        }),
    );
    assert.deepEqual([notPermitted.status, notPermitted.code], [403, "rule_not_permitted"]);

    const tooLong = await refusal(
        tasks.makeOwnerRule({
            owner_uid: owner,
            created_by: owner,
            tool: READ_TOOL,
            verdict: "deny",
            expires_at: new Date(Date.now() + 400 * 86_400_000).toISOString(),
        }),
    );
    assert.deepEqual([tooLong.status, tooLong.code], [422, "rule_ttl_too_long"]);

    const run = await register(worker, owner);
    const edited = await refusal(
        tasks.decideCalls(
            run.id,
            run.turn.digest,
            [
                { call_id: "call_1", approved: true, arguments: { page: 13 }, remember: "run" },
                { call_id: "call_2", approved: false },
            ],
            { deciderUid: owner },
        ),
    );
    assert.deepEqual([edited.status, edited.code], [422, "remember_edited"]);
    assert.equal((await worker.getRun(run.id)).status, "waiting_for_approval", "the decision was refused whole");
    assert.deepEqual(await tasks.listRunRules(run.id), []);

    const rule = await tasks.makeRunRule(run.id, { created_by: owner, tool: WRITE_TOOL, verdict: "deny" });
    const notRevocable = await refusal(tasks.revokeRule(rule.id, { revokedBy: stranger }));
    assert.deepEqual([notRevocable.status, notRevocable.code], [403, "rule_not_revocable"]);
    const unknown = await refusal(tasks.revokeRule(newRunId(), { revokedBy: owner }));
    assert.deepEqual([unknown.status, unknown.code], [404, "not_found"]);
    const scope = await refusal(worker.makeRunRule(run.id, { created_by: owner, tool: WRITE_TOOL, verdict: "deny" }));
    assert.deepEqual([scope.status, scope.code], [403, "missing_scope"]);
});

// `owner` scope comes with its end, and only whole-turn decisions take `remember`: the 422s are compile errors here.
export const typeChecks: TurnDecideOptions[] = [
    { deciderUid: 1, remember: "run" },
    { deciderUid: 1, remember: "owner", rememberUntil: new Date() },
    // @ts-expect-error: an owner-scope rule must end (422 remember_until_required)
    { deciderUid: 1, remember: "owner" },
    // @ts-expect-error: an end without an owner-scope rule (422 remember_until_without_owner)
    { deciderUid: 1, remember: "run", rememberUntil: new Date() },
];
export const perCallChecks = (client: ApprovalResumeClient) =>
    // @ts-expect-error: `remember` beside `calls` (422 remember_with_calls) belongs on each verdict
    client.decideCalls("run", "digest", [], { deciderUid: 1, remember: "run" });
