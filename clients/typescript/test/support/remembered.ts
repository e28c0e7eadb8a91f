/**
 * The checks of remembered decisions (docs/design.md §18) that the adapters' tests (ai-sdk, openai-agents) share: what
 * a rule decided does not depend on the framework the worker drives.
 */
import assert from "node:assert/strict";

import type { ApprovalResumeClient, Rule, RunView } from "approval-resume";

import { AGAIN, PAGE } from "./adapters.js";
import { WRITE_TOOL } from "./service.js";

/**
 * What a run whose first write (PAGE, call_1) was approved for the rest of the run, and whose model then wrote
 * AGAIN (call_2), leaves once it finished: the tool ran once per turn under each call's idempotency key (`ran`, as
 * the test's tool recorded it), the run's one rule approves the write as its owner, and the run completed at turn 1
 * with call_2 approved by that rule, which decided as its author. Answers the rule.
 */
export async function assertAllowedForTheRun(
    client: ApprovalResumeClient,
    tasks: ApprovalResumeClient,
    runId: string,
    uid: number,
    ran: readonly unknown[],
): Promise<Rule> {
    assert.deepEqual(
        ran,
        [
            { input: PAGE, key: `${runId}:call_1` },
            { input: AGAIN, key: `${runId}:call_2` },
        ],
        "the tool ran once per turn, the second without a click",
    );
    const [rule] = await tasks.listRunRules(runId);
    assert.deepEqual([rule?.tool, rule?.verdict, rule?.created_by], [WRITE_TOOL, "approve", uid]);
    const run = await client.getRun(runId);
    assert.deepEqual([run.status, run.turn.index], ["completed", 1]);
    assert.deepEqual(run.decision?.calls.map((call) => [call.call_id, call.approved, call.rule_id]), [
        ["call_2", true, rule!.id],
    ]);
    assert.equal(run.decision?.decider_uid, uid, "the rule decided as its author");
    return rule!;
}

/**
 * What a run whose first write (call_1) was denied with "never" for the rest of the run, and whose model then wrote
 * again (call_2), leaves once it finished: neither call ran (`ran`, as the test's tool recorded it), and the run's
 * rule denied call_2.
 */
export async function assertRefusedForTheRun(
    client: ApprovalResumeClient,
    tasks: ApprovalResumeClient,
    runId: string,
    ran: readonly unknown[],
): Promise<void> {
    assert.deepEqual(ran, [], "neither call ran");
    const [rule] = await tasks.listRunRules(runId);
    const run = await client.getRun(runId);
    assert.deepEqual(run.decision?.calls.map((call) => [call.call_id, call.approved, call.rule_id]), [
        ["call_2", false, rule!.id],
    ]);
}

/**
 * What a run whose registration `rule` (an owner rule) decided leaves once its worker started it: the tool ran once,
 * the model's write of PAGE (call_o) under its idempotency key, and the run completed, its call decided by the rule.
 */
export async function assertDecidedAtRegistration(
    client: ApprovalResumeClient,
    runId: string,
    rule: Rule,
    ran: readonly unknown[],
): Promise<void> {
    assert.deepEqual(ran, [{ input: PAGE, key: `${runId}:call_o` }]);
    const run = await client.getRun(runId);
    assert.equal(run.status, "completed");
    assert.deepEqual(run.decision?.calls.map((call) => call.rule_id), [rule.id]);
}

/** A worker's step, of either adapter, as {@link assertBoundToOneDecidedTurn} reads it. */
interface Step {
    status: string;
    run?: RunView | null;
}

/**
 * Resumes, twice, a run whose model writes three times and whose first write was approved for the rest of the run,
 * by a worker bound to one decided turn (`maxDecidedTurns: 1`): the first resume runs the first turn and the one
 * decided at once, and stops at the bound with the third turn released; the second runs the third. `ran` is every
 * write the test's tool ran.
 */
export async function assertBoundToOneDecidedTurn(resume: () => Promise<Step>, ran: readonly unknown[]): Promise<void> {
    const stopped = await resume();
    assert.ok(stopped.status === "decided", `resumed: ${stopped.status}`);
    assert.deepEqual([stopped.run?.status, stopped.run?.turn.index], ["released", 2]);
    assert.equal(ran.length, 2, "the first turn and one decided at once ran; the third waits for resume");

    const done = await resume();
    assert.ok(done.status === "finished");
    assert.equal(ran.length, 3);
}
