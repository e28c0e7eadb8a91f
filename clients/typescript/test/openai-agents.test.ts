// approval-resume/openai-agents against the real binary (docs/design.md §15, §16), with `@openai/agents`' own
// scripted model (`ScriptedModel` of `@openai/agents/testing`): the agent stops on a tool that needs approval, the
// adapter registers the run with the serialized RunState, a human decides through the service, and the adapter
// restores the state. A denial reaches the model through `state.reject(item, {message})` with the service's exact
// text; an approval (as proposed or edited) lets the SDK run the tool once under the claim and the adapter posts its
// bare output; two workers resuming at once run it once. Remembered decisions (§18): a turn the service answers
// already decided (a rule approved or denied every call) goes straight on, within the worker's bound.
import assert from "node:assert/strict";
import { after, test } from "node:test";

import { Agent, type AgentInputItem, tool } from "@openai/agents";
import { ScriptedModel, assistantMessage, functionCall } from "@openai/agents/testing";
import { OpenAIAgentsWorker, currentIdempotencyKey } from "approval-resume/openai-agents";
import { z } from "zod";

import { AGAIN, PAGE, newOwner, ownerApprovesWrites } from "./support/adapters.js";
import { startWithCallers } from "./support/callers.js";
import {
    assertAllowedForTheRun,
    assertBoundToOneDecidedTurn,
    assertDecidedAtRegistration,
    assertRefusedForTheRun,
} from "./support/remembered.js";
import { READ_TOOL, WRITE_TOOL } from "./support/service.js";
import { DENIED_BY_OWNER, EDITED_BY_OWNER, NEVER_BY_OWNER } from "./support/texts.js";

/** No tracing: the tests have no OpenAI key to export traces with. */
const runConfig = { tracingDisabled: true };

const { service, worker: client, tasks } = await startWithCallers("openai-agents", {
    PRIVACY_LEVEL: "full",
    WORKER_CLAIM_TTL_SECS: "5",
});
after(() => service.stop());

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

const owner = () => newOwner(client);

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

/**
 * A run of `uid` suspended on the model's write of PAGE (call_1); asked again, the model writes AGAIN (call_2), then
 * answers `answer`.
 */
async function writingTwice(uid: number, answer: string) {
    const model = new ScriptedModel([
        [functionCall(WRITE_TOOL, PAGE, { callId: "call_1" })],
        [functionCall(WRITE_TOOL, AGAIN, { callId: "call_2" })],
        [assistantMessage(answer)],
    ]);
    const { agent, ran } = pageAgent(model);
    const worker = new OpenAIAgentsWorker({ client, agent, runConfig });
    return { model, ran, worker, step: await suspended(worker, uid) };
}

test("a turn approved for the rest of the run lets the agent's next call of the tool run at once, without a click", async () => {
    const uid = await owner();
    const { model, ran, worker, step } = await writingTwice(uid, "Both written.");
    await tasks.approveTurn(step.runId, step.run.turn.digest, { deciderUid: uid, remember: "run" });

    const done = await worker.resume(step.runId);
    assert.ok(done.status === "finished", `resumed: ${done.status}`);
    assert.equal(done.finalOutput, "Both written.");
    await assertAllowedForTheRun(client, tasks, step.runId, uid, ran);
    assert.equal(resultRead(model, 2, "call_2"), "updated page 12");
    assert.equal(model.calls.length, 3, "the released steps never called the model");
});

test("a turn denied with 'never' for the run denies the agent's next call at once: the model reads the exact text and nothing ran", async () => {
    const uid = await owner();
    const { model, ran, worker, step } = await writingTwice(uid, "I will leave the page as it is.");
    await tasks.denyTurn(step.runId, step.run.turn.digest, { deciderUid: uid, reason: "skip", remember: "run" });

    const done = await worker.resume(step.runId);
    assert.ok(done.status === "finished", `resumed: ${done.status}`);
    assert.equal(resultRead(model, 2, "call_2"), NEVER_BY_OWNER(WRITE_TOOL));
    await assertRefusedForTheRun(client, tasks, step.runId, ran);
});

test("an owner rule made before the run decides its registration, and start goes straight on to the final output", async () => {
    const uid = await owner();
    const rule = await ownerApprovesWrites(tasks, uid);
    const model = new ScriptedModel([[functionCall(WRITE_TOOL, PAGE, { callId: "call_o" })], [assistantMessage("Written.")]]);
    const { agent, ran } = pageAgent(model);
    const worker = new OpenAIAgentsWorker({ client, agent, runConfig });

    const done = await worker.start({ ownerUid: uid, input: "Describe page 12." });
    assert.ok(done.status === "finished" && done.runId !== null, `started: ${done.status}`);
    assert.equal(done.finalOutput, "Written.");
    await assertDecidedAtRegistration(client, done.runId, rule, ran);
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
    await assertBoundToOneDecidedTurn(() => worker.resume(step.runId), ran);
});
