// approval-resume/openai-agents against the real binary (docs/design.md §15, §16), with `@openai/agents`' own
// scripted model (`ScriptedModel` of `@openai/agents/testing`): the agent stops on a tool that needs approval, the
// adapter registers the run with the serialized RunState, a human decides through the service, and the adapter
// restores the state. A denial reaches the model through `state.reject(item, {message})` with the service's exact
// text; an approval (as proposed or edited) lets the SDK run the tool once under the claim and the adapter posts its
// bare output; two workers resuming at once run it once. Remembered decisions (§18): a turn the service answers
// already decided (a rule approved or denied every call) goes straight on, within the worker's bound.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";

import { Agent, type AgentInputItem, tool } from "@openai/agents";
import { ScriptedModel, assistantMessage, functionCall } from "@openai/agents/testing";
import { ApprovalResumeClient } from "approval-resume";
import { OpenAIAgentsWorker, currentIdempotencyKey } from "approval-resume/openai-agents";
import { z } from "zod";

import { newUid } from "./support/runs.js";
import { READ_TOOL, type Service, WRITE_TOOL, startService } from "./support/service.js";

/** docs/design.md §3: the owner's own denial of a call, no reason. */
const DENIED_BY_OWNER = (tool: string) =>
    `Error: approval_denied (decided_by: run_owner). The approval for tool "${tool}" was declined by the user who ` +
    "started this run, the person you are talking to. Nothing was executed. Tell them that they declined the " +
    "approval themselves, not the system or an operator, and ask whether the change should be proposed again.";

/** docs/design.md §3: the edit note of the owner's own edit. */
const EDITED_BY_OWNER = (args: string) =>
    "Note: approval_edited (decided_by: run_owner). The arguments of this call were changed before it was " +
    "approved, by the user who started this run, the person you are talking to; it ran with these arguments " +
    `instead of the ones you proposed: ${args}`;

/** No tracing: the tests have no OpenAI key to export traces with. */
const runConfig = { tracingDisabled: true };

const PAGE = { page: 12, description: "Fresh bread daily." };

let service: Service;
let client: ApprovalResumeClient;
let tasks: ApprovalResumeClient;

before(async () => {
    service = await startService(
        {
            worker: ["users:write", "runs:write", "runs:read"],
            tasks: ["approvals:read", "runs:read", "decisions:write"],
        },
        "openai-agents",
        { PRIVACY_LEVEL: "full", WORKER_CLAIM_TTL_SECS: "5" },
    );
    client = new ApprovalResumeClient({ baseUrl: service.baseUrl, credential: service.keys.worker! });
    tasks = new ApprovalResumeClient({ baseUrl: service.baseUrl, credential: service.keys.tasks! });
});

after(async () => {
    await service?.stop();
});

interface Ran {
    input: { page: number; description: string };
    key: string | undefined;
}

/** An agent of `model` with the page tools: reading runs at once, writing needs approval; `ran` records writes. */
function pageAgent(model: ScriptedModel, write: (input: Ran["input"]) => Promise<string> = async (input) => `updated page ${input.page}`) {
    const ran: Ran[] = [];
    const agent = new Agent({
        name: "pages",
        instructions: "You edit pages.",
        model,
        tools: [
            tool({
                name: READ_TOOL,
                description: "Reads a page.",
                parameters: z.object({ page: z.number().int() }),
                execute: async () => "Page 12: the bakery.",
            }),
            tool({
                name: WRITE_TOOL,
                description: "Sets a page's meta description.",
                parameters: z.object({ page: z.number().int(), description: z.string() }),
                needsApproval: true,
                errorFunction: null,
                execute: async (input) => {
                    ran.push({ input, key: currentIdempotencyKey() });
                    return write(input);
                },
            }),
        ],
    });
    return { agent, ran };
}

/** The text of the function call result the model read for `callId` in its `index`th request. */
function resultRead(model: ScriptedModel, index: number, callId: string): string {
    const input = model.calls[index]!.request.input as AgentInputItem[];
    const result = input.find((item) => item.type === "function_call_result" && item.callId === callId);
    assert.ok(result?.type === "function_call_result", `request ${index} holds no result for ${callId}`);
    const output: unknown = result.output;
    if (typeof output === "string") {
        return output;
    }
    const part = output as { type?: string; text?: string };
    return part.type === "text" && part.text !== undefined ? part.text : JSON.stringify(output);
}

async function owner(): Promise<number> {
    const uid = newUid();
    await client.putUser(uid, { username: "ada", is_admin: false, can_approve_others: false, disabled: false });
    return uid;
}

async function suspended(worker: OpenAIAgentsWorker, uid: number) {
    const step = await worker.start({ ownerUid: uid, input: "Describe page 12." });
    assert.ok(step.status === "suspended", `started: ${step.status}`);
    return step;
}

test("the agent's interruption becomes a registered run with the RunState as worker state, and nothing runs before a decision", async () => {
    const uid = await owner();
    const model = new ScriptedModel([
        [functionCall(READ_TOOL, { page: 12 }, { callId: "call_r" }), functionCall(WRITE_TOOL, PAGE, { callId: "call_w" })],
    ]);
    const { agent, ran } = pageAgent(model);
    const worker = new OpenAIAgentsWorker({ client, agent, runConfig });
    const step = await suspended(worker, uid);

    assert.equal(step.run.status, "waiting_for_approval");
    assert.deepEqual(
        step.run.turn.pending_calls.map((call) => [call.id, call.name, JSON.parse(call.arguments ?? "null"), call.effect]),
        [["call_w", WRITE_TOOL, PAGE, "write"]],
        "the read ran without approval; the write waits",
    );
    const stored = await client.getRun(step.runId, { includeWorkerState: true });
    assert.equal((stored.worker_state as { kind: string }).kind, "approval-resume/openai-agents");
    assert.equal((await worker.resume(step.runId)).status, "waiting");
    assert.deepEqual(ran, []);
});

test("a denial reaches the model through state.reject with the service's exact text, and the tool never runs", async () => {
    const uid = await owner();
    const model = new ScriptedModel([
        [functionCall(WRITE_TOOL, PAGE, { callId: "call_d" })],
        [assistantMessage("You declined it; shall I propose it again?")],
    ]);
    const { agent, ran } = pageAgent(model);
    const worker = new OpenAIAgentsWorker({ client, agent, runConfig });
    const step = await suspended(worker, uid);

    await tasks.denyTurn(step.runId, step.run.turn.digest, { deciderUid: uid });
    const done = await worker.resume(step.runId);
    assert.ok(done.status === "finished");
    assert.equal(done.finalOutput, "You declined it; shall I propose it again?");
    assert.equal(resultRead(model, 1, "call_d"), DENIED_BY_OWNER(WRITE_TOOL));
    assert.deepEqual(ran, [], "a denied call is not run");
    assert.equal((await client.getRun(step.runId)).status, "completed");
});

test("an approval runs the tool once under the claim with its idempotency key, and the model reads its output", async () => {
    const uid = await owner();
    const model = new ScriptedModel([[functionCall(WRITE_TOOL, PAGE, { callId: "call_a" })], [assistantMessage("Done.")]]);
    const { agent, ran } = pageAgent(model);
    const worker = new OpenAIAgentsWorker({ client, agent, runConfig });
    const step = await suspended(worker, uid);

    await tasks.approveTurn(step.runId, step.run.turn.digest, { deciderUid: uid });
    assert.equal((await worker.resume(step.runId)).status, "finished");
    assert.deepEqual(ran, [{ input: PAGE, key: `${step.runId}:call_a` }]);
    const run = await client.getRun(step.runId);
    assert.deepEqual(run.released_calls?.map((call) => call.result), [{ content: "updated page 12", is_error: false }]);
    assert.equal(resultRead(model, 1, "call_a"), "updated page 12");
    assert.equal(model.calls.length, 2, "the released step never called the model");
});

test("an edited approval runs the tool once with the edited arguments, and the model reads the note, a blank line, the output", async () => {
    const uid = await owner();
    const model = new ScriptedModel([[functionCall(WRITE_TOOL, PAGE, { callId: "call_e" })], [assistantMessage("Done.")]]);
    const { agent, ran } = pageAgent(model);
    const worker = new OpenAIAgentsWorker({ client, agent, runConfig });
    const step = await suspended(worker, uid);

    const edited = { page: 12, description: "Bread, baked at dawn." };
    await tasks.decideCalls(step.runId, step.run.turn.digest, [{ call_id: "call_e", approved: true, arguments: edited }], {
        deciderUid: uid,
    });
    assert.equal((await worker.resume(step.runId)).status, "finished");
    assert.deepEqual(ran.map((call) => call.input), [edited], "ran once, with the edited arguments");
    const run = await client.getRun(step.runId);
    assert.deepEqual(run.released_calls?.map((call) => call.result?.content), ["updated page 12"], "the bare output");
    assert.equal(resultRead(model, 1, "call_e"), `${EDITED_BY_OWNER(JSON.stringify(edited))}\n\nupdated page 12`);
});

test("a tool that throws posts the fixed failed text, and its message goes only to the worker's log", async () => {
    const uid = await owner();
    const model = new ScriptedModel([[functionCall(WRITE_TOOL, PAGE, { callId: "call_f" })], [assistantMessage("It failed.")]]);
    const { agent } = pageAgent(model, async () => {
        throw new Error("connection refused: postgres://admin:hunter2@db.internal/pages");
    });
    const logged: unknown[] = [];
    const worker = new OpenAIAgentsWorker({ client, agent, runConfig, logger: (_message, error) => logged.push(error) });
    const step = await suspended(worker, uid);
    await tasks.approveTurn(step.runId, step.run.turn.digest, { deciderUid: uid });
    assert.equal((await worker.resume(step.runId)).status, "finished");

    const failed = `Error: tool "${WRITE_TOOL}" failed.`;
    const run = await client.getRun(step.runId);
    assert.deepEqual(run.released_calls?.map((call) => call.result), [{ content: failed, is_error: true }]);
    assert.equal(resultRead(model, 1, "call_f"), failed);
    assert.match(String(logged[0]), /hunter2/);
    assert.doesNotMatch(JSON.stringify(await client.runEvents(step.runId)), /hunter2/);
});

test("two workers resuming one released run at once run the tool once, and the other reports the claim", async () => {
    const uid = await owner();
    const model = new ScriptedModel([[functionCall(WRITE_TOOL, PAGE, { callId: "call_t" })], [assistantMessage("Done.")]]);
    const { agent, ran } = pageAgent(model, async (input) => {
        await new Promise((resolve) => setTimeout(resolve, 1_000));
        return `updated page ${input.page}`;
    });
    const a = new OpenAIAgentsWorker({ client, agent, runConfig });
    const b = new OpenAIAgentsWorker({ client, agent, runConfig });
    const step = await suspended(a, uid);
    await tasks.approveTurn(step.runId, step.run.turn.digest, { deciderUid: uid });

    const outcomes = await Promise.all([a.resume(step.runId), b.resume(step.runId)]);
    assert.deepEqual(outcomes.map((outcome) => outcome.status).sort(), ["claimed", "finished"]);
    assert.equal(ran.length, 1, "the tool ran once");
});

test("a new interruption after the verdict appends a turn, which the next decision resumes", async () => {
    const uid = await owner();
    const model = new ScriptedModel([
        [functionCall(WRITE_TOOL, PAGE, { callId: "call_1" })],
        [functionCall(WRITE_TOOL, { page: 12, description: "Bread, fresh daily." }, { callId: "call_2" })],
        [assistantMessage("Updated.")],
    ]);
    const { agent, ran } = pageAgent(model);
    const worker = new OpenAIAgentsWorker({ client, agent, runConfig });
    const step = await suspended(worker, uid);

    await tasks.denyTurn(step.runId, step.run.turn.digest, { deciderUid: uid, reason: "variant" });
    const again = await worker.resume(step.runId);
    assert.ok(again.status === "suspended");
    assert.equal(again.run.turn.index, 1);
    assert.deepEqual(again.run.turn.pending_calls.map((call) => call.id), ["call_2"]);

    await tasks.approveTurn(again.runId, again.run.turn.digest, { deciderUid: uid });
    const done = await worker.resume(again.runId);
    assert.ok(done.status === "finished");
    assert.equal(done.finalOutput, "Updated.");
    assert.deepEqual(ran.map((call) => call.input), [{ page: 12, description: "Bread, fresh daily." }]);
});

/** docs/design.md §3: the owner's own denial of a write with the reason `skip`, as a "never" rule gives it. */
const NEVER_BY_OWNER = (tool: string) =>
    `Error: approval_denied (decided_by: run_owner, reason: skip). The approval for tool "${tool}" was declined by the ` +
    "user who started this run, the person you are talking to. Nothing was executed. Tell them that they declined " +
    "the approval themselves, not the system or an operator, and do not propose this change again.";

const AGAIN = { page: 12, description: "Bread, fresh every morning." };

test("a turn approved for the rest of the run lets the agent's next call of the tool run at once, without a click", async () => {
    const uid = await owner();
    const model = new ScriptedModel([
        [functionCall(WRITE_TOOL, PAGE, { callId: "call_1" })],
        [functionCall(WRITE_TOOL, AGAIN, { callId: "call_2" })],
        [assistantMessage("Both written.")],
    ]);
    const { agent, ran } = pageAgent(model);
    const worker = new OpenAIAgentsWorker({ client, agent, runConfig });
    const step = await suspended(worker, uid);
    await tasks.approveTurn(step.runId, step.run.turn.digest, { deciderUid: uid, remember: "run" });

    const done = await worker.resume(step.runId);
    assert.ok(done.status === "finished", `resumed: ${done.status}`);
    assert.equal(done.finalOutput, "Both written.");
    assert.deepEqual(
        ran,
        [
            { input: PAGE, key: `${step.runId}:call_1` },
            { input: AGAIN, key: `${step.runId}:call_2` },
        ],
        "the tool ran once per turn, the second without a click",
    );
    const [rule] = await tasks.listRunRules(step.runId);
    assert.deepEqual([rule?.tool, rule?.verdict, rule?.created_by], [WRITE_TOOL, "approve", uid]);
    const run = await client.getRun(step.runId);
    assert.deepEqual([run.status, run.turn.index], ["completed", 1]);
    assert.deepEqual(run.decision?.calls.map((call) => [call.call_id, call.approved, call.rule_id]), [
        ["call_2", true, rule!.id],
    ]);
    assert.equal(resultRead(model, 2, "call_2"), "updated page 12");
    assert.equal(model.calls.length, 3, "the released steps never called the model");
});

test("a turn denied with 'never' for the run denies the agent's next call at once: the model reads the exact text and nothing ran", async () => {
    const uid = await owner();
    const model = new ScriptedModel([
        [functionCall(WRITE_TOOL, PAGE, { callId: "call_1" })],
        [functionCall(WRITE_TOOL, AGAIN, { callId: "call_2" })],
        [assistantMessage("I will leave the page as it is.")],
    ]);
    const { agent, ran } = pageAgent(model);
    const worker = new OpenAIAgentsWorker({ client, agent, runConfig });
    const step = await suspended(worker, uid);
    await tasks.denyTurn(step.runId, step.run.turn.digest, { deciderUid: uid, reason: "skip", remember: "run" });

    const done = await worker.resume(step.runId);
    assert.ok(done.status === "finished", `resumed: ${done.status}`);
    assert.equal(resultRead(model, 2, "call_2"), NEVER_BY_OWNER(WRITE_TOOL));
    assert.deepEqual(ran, [], "neither call ran");
    const [rule] = await tasks.listRunRules(step.runId);
    assert.deepEqual((await client.getRun(step.runId)).decision?.calls.map((call) => call.rule_id), [rule!.id]);
});

test("an owner rule made before the run decides its registration, and start goes straight on to the final output", async () => {
    const uid = await owner();
    const rule = await tasks.makeOwnerRule({
        owner_uid: uid,
        created_by: uid,
        tool: WRITE_TOOL,
        verdict: "approve",
        expires_at: new Date(Date.now() + 86_400_000).toISOString(),
    });
    const model = new ScriptedModel([[functionCall(WRITE_TOOL, PAGE, { callId: "call_o" })], [assistantMessage("Written.")]]);
    const { agent, ran } = pageAgent(model);
    const worker = new OpenAIAgentsWorker({ client, agent, runConfig });

    const done = await worker.start({ ownerUid: uid, input: "Describe page 12." });
    assert.ok(done.status === "finished" && done.runId !== null, `started: ${done.status}`);
    assert.equal(done.finalOutput, "Written.");
    assert.deepEqual(ran, [{ input: PAGE, key: `${done.runId}:call_o` }]);
    const run = await client.getRun(done.runId);
    assert.equal(run.status, "completed");
    assert.deepEqual(run.decision?.calls.map((call) => call.rule_id), [rule.id]);
});

test("turns decided at once go on no further than maxDecidedTurns in one call, and resume takes the run on from there", async () => {
    const uid = await owner();
    const model = new ScriptedModel([
        [functionCall(WRITE_TOOL, PAGE, { callId: "call_1" })],
        [functionCall(WRITE_TOOL, AGAIN, { callId: "call_2" })],
        [functionCall(WRITE_TOOL, PAGE, { callId: "call_3" })],
        [assistantMessage("Written three times.")],
    ]);
    const { agent, ran } = pageAgent(model);
    const worker = new OpenAIAgentsWorker({ client, agent, runConfig, maxDecidedTurns: 1 });
    const step = await suspended(worker, uid);
    await tasks.approveTurn(step.runId, step.run.turn.digest, { deciderUid: uid, remember: "run" });

    const stopped = await worker.resume(step.runId);
    assert.ok(stopped.status === "decided", `resumed: ${stopped.status}`);
    assert.deepEqual([stopped.run.status, stopped.run.turn.index], ["released", 2]);
    assert.equal(ran.length, 2, "the first turn and one decided at once ran; the third waits for resume");

    const done = await worker.resume(step.runId);
    assert.ok(done.status === "finished");
    assert.equal(ran.length, 3);
});
