// approval-resume/ai-sdk against the real binary (docs/design.md §15, §16), with `ai` 7's own scripted model: the
// model asks for a write tool, the adapter registers the run, a human decides through the service, and the adapter
// resumes the SDK. A denial reaches the model as `execution-denied` with the service's exact text; an approval (as
// proposed or edited) lets the SDK run the tool once, under the worker's claim, and the adapter posts its bare
// output; two workers resuming at once run it once; a failing tool posts the fixed failed text; streamText likewise.
// Remembered decisions (§18): a turn the service answers already decided (a rule approved or denied every call) goes
// straight on, in generateText and streamText, within the worker's bound.
import assert from "node:assert/strict";
import { after, test } from "node:test";

import { type ToolSet, jsonSchema, stepCountIs, tool } from "ai";
import { AiSdkWorker, currentIdempotencyKey } from "approval-resume/ai-sdk";

import { AGAIN, PAGE, newOwner, ownerApprovesWrites } from "./support/adapters.js";
import { startWithCallers } from "./support/callers.js";
import { type Prompt, callTool, say, scriptedModel } from "./support/model.js";
import {
    assertAllowedForTheRun,
    assertBoundToOneDecidedTurn,
    assertDecidedAtRegistration,
    assertRefusedForTheRun,
} from "./support/remembered.js";
import { READ_TOOL, WRITE_TOOL } from "./support/service.js";
import { DENIED_BY_OWNER, EDITED_BY_OWNER, NEVER_BY_OWNER } from "./support/texts.js";

/** The lease the service gives a claim in these tests: its lower bound, so a tool that outlasts it is quick to show. */
const CLAIM_TTL_SECS = 5;

const { service, worker: client, tasks } = await startWithCallers(
    "ai-sdk",
    // Tool events keep their results, so the audit shows what the worker posted.
    { PRIVACY_LEVEL: "full", WORKER_CLAIM_TTL_SECS: String(CLAIM_TTL_SECS) },
);
after(() => service.stop());

interface Ran {
    input: { page: number; description?: string };
    key: string | undefined;
}

/**
 * The page tools as an agent has them: reading runs at once, writing needs approval (`toolApproval`, ai 7's way);
 * `ran` records each write with the idempotency key it ran under. `write` replaces the write's body.
 */
function pageTools(write: (input: Ran["input"]) => Promise<unknown> = async (input) => ({ updated: input.page })) {
    const ran: Ran[] = [];
    const page = jsonSchema<{ page: number; description?: string }>({
        type: "object",
        properties: { page: { type: "integer" }, description: { type: "string" } },
        required: ["page"],
        additionalProperties: false,
    });
    const tools = {
        [READ_TOOL]: tool({ description: "Reads a page.", inputSchema: page, execute: async () => "Page 12: the bakery." }),
        [WRITE_TOOL]: tool({
            description: "Sets a page's meta description.",
            inputSchema: page,
            execute: async (input) => {
                ran.push({ input, key: currentIdempotencyKey() });
                return write(input);
            },
        }),
    };
    return { tools, ran, toolApproval: { [WRITE_TOOL]: "user-approval" as const } };
}

/** The tool results the prompt's last message gives the model (the SDK adds `providerOptions: undefined`). */
function toolResultsOf(prompt: Prompt): unknown[] {
    const last = prompt[prompt.length - 1]!;
    assert.equal(last.role, "tool");
    return last.role === "tool"
        ? last.content.map((part) =>
              part.type === "tool-result" ? { toolCallId: part.toolCallId, toolName: part.toolName, output: part.output } : part.type,
          )
        : [];
}

const owner = () => newOwner(client);

async function suspended<TOOLS extends ToolSet>(worker: AiSdkWorker<TOOLS>, uid: number) {
    const step = await worker.start({ ownerUid: uid, messages: [{ role: "user", content: "Describe page 12." }] });
    assert.ok(step.status === "suspended", `started: ${step.status}`);
    return step;
}

test("a write tool the model calls suspends the run as a write the worker runs, and nothing runs before a decision", async () => {
    const uid = await owner();
    const { tools, ran, toolApproval } = pageTools();
    const { model } = scriptedModel([callTool("call_w", WRITE_TOOL, PAGE)]);
    const worker = new AiSdkWorker({ client, settings: { model, tools, toolApproval } });

    const step = await suspended(worker, uid);
    assert.equal(step.run.status, "waiting_for_approval");
    assert.deepEqual(
        step.run.turn.pending_calls.map((call) => [call.id, call.name, call.arguments, call.effect]),
        [["call_w", WRITE_TOOL, JSON.stringify(PAGE), "write"]],
    );
    const stored = await client.getRun(step.runId, { includeWorkerState: true });
    assert.equal((stored.worker_state as { kind: string }).kind, "approval-resume/ai-sdk");
    assert.equal((await worker.resume(step.runId)).status, "waiting", "nothing to do before a decision");
    assert.deepEqual(ran, []);
});

test("a denial reaches the model as execution-denied with the service's exact text, and the tool never runs", async () => {
    const uid = await owner();
    const { tools, ran, toolApproval } = pageTools();
    const { model, prompts } = scriptedModel([callTool("call_d", WRITE_TOOL, PAGE), say("You declined it; shall I propose it again?")]);
    const worker = new AiSdkWorker({ client, settings: { model, tools, toolApproval } });
    const step = await suspended(worker, uid);

    await tasks.denyTurn(step.runId, step.run.turn.digest, { deciderUid: uid });
    const done = await worker.resume(step.runId);
    assert.equal(done.status, "finished");

    assert.deepEqual(toolResultsOf(prompts[1]!), [
        { toolCallId: "call_d", toolName: WRITE_TOOL, output: { type: "execution-denied", reason: DENIED_BY_OWNER(WRITE_TOOL) } },
    ]);
    assert.deepEqual(ran, [], "a denied call is not run");
    assert.equal((await client.getRun(step.runId)).status, "completed");
});

test("with streamText the consumer gets each stream, and a denial reaches the model with the exact text", async () => {
    const uid = await owner();
    const { tools, ran, toolApproval } = pageTools();
    const { model, prompts } = scriptedModel([callTool("call_s", WRITE_TOOL, PAGE), say("You declined it; shall I propose it again?")]);
    const chunks: string[][] = [];
    const worker = new AiSdkWorker({
        client,
        settings: { model, tools, toolApproval },
        stream: (result) => {
            const mine: string[] = [];
            chunks.push(mine);
            void (async () => {
                for await (const text of result.textStream) {
                    mine.push(text);
                }
            })();
        },
    });
    const step = await suspended(worker, uid);
    assert.deepEqual(step.run.turn.pending_calls.map((call) => call.id), ["call_s"]);

    await tasks.denyTurn(step.runId, step.run.turn.digest, { deciderUid: uid });
    const done = await worker.resume(step.runId);
    assert.ok(done.status === "finished");
    assert.equal(done.text, "You declined it; shall I propose it again?");
    assert.deepEqual(
        chunks.map((stream) => stream.length),
        [0, 2],
        "the consumer read both streams: the call, then the answer's two deltas",
    );
    assert.equal(chunks[1]!.join(""), done.text);
    assert.deepEqual(toolResultsOf(prompts[1]!), [
        { toolCallId: "call_s", toolName: WRITE_TOOL, output: { type: "execution-denied", reason: DENIED_BY_OWNER(WRITE_TOOL) } },
    ]);
    assert.deepEqual(ran, []);
});

test("an approval lets the SDK run the tool once under the claim, with the call's idempotency key, and the audit shows its result", async () => {
    const uid = await owner();
    const { tools, ran, toolApproval } = pageTools();
    const { model, prompts } = scriptedModel([callTool("call_a", WRITE_TOOL, PAGE), say("Done.")]);
    const worker = new AiSdkWorker({ client, settings: { model, tools, toolApproval } });
    const step = await suspended(worker, uid);

    const answer = await tasks.approveTurn(step.runId, step.run.turn.digest, { deciderUid: uid });
    assert.equal(answer.status, "released");
    const done = await worker.resume(step.runId);
    assert.equal(done.status, "finished");
    assert.deepEqual(ran, [{ input: PAGE, key: `${step.runId}:call_a` }], "ran once, as proposed, with its key");
    assert.deepEqual(service.executor.callsOf(step.runId), [], "a worker tool never goes to the service's executor");

    const result = JSON.stringify({ updated: 12 });
    const run = await client.getRun(step.runId);
    assert.equal(run.status, "completed");
    assert.deepEqual(run.released_calls?.map((call) => [call.call_id, call.result]), [
        ["call_a", { content: result, is_error: false }],
    ]);
    const audit = await client.runEvents(step.runId);
    assert.deepEqual(
        audit.tool_events.map((event) => [event.call_id, event.outcome, event.result]),
        [["call_a", "ok", result]],
    );
    assert.deepEqual(toolResultsOf(prompts[1]!), [
        { toolCallId: "call_a", toolName: WRITE_TOOL, output: { type: "text", value: result } },
    ]);

    assert.equal((await worker.resume(step.runId)).status, "closed");
    assert.equal(ran.length, 1, "resuming a finished run runs nothing again");
});

test("a step before the approval (a read) stays in the history: after the approval the model sees the read and the write", async () => {
    const uid = await owner();
    const { tools, ran, toolApproval } = pageTools();
    const { model, prompts } = scriptedModel([
        callTool("call_r", READ_TOOL, PAGE),
        callTool("call_w", WRITE_TOOL, PAGE),
        say("Done."),
    ]);
    const worker = new AiSdkWorker({ client, settings: { model, tools, toolApproval, stopWhen: stepCountIs(5) } });
    const step = await suspended(worker, uid);

    await tasks.approveTurn(step.runId, step.run.turn.digest, { deciderUid: uid });
    const done = await worker.resume(step.runId);
    assert.equal(done.status, "finished", `resumed: ${done.status}`);
    assert.equal(ran.length, 1);
    // The model's last prompt holds both calls, in order: nothing of the first step was lost on the way.
    const calls = prompts[2]!.flatMap((message) =>
        message.role === "assistant" ? message.content.flatMap((part) => (part.type === "tool-call" ? [part.toolCallId] : [])) : [],
    );
    assert.deepEqual(calls, ["call_r", "call_w"]);
});

test("an edited approval runs the tool once with the edited arguments, and the model reads the note, a blank line, the output", async () => {
    const uid = await owner();
    const { tools, ran, toolApproval } = pageTools();
    const { model, prompts } = scriptedModel([callTool("call_e", WRITE_TOOL, PAGE), say("Done, with your wording.")]);
    const worker = new AiSdkWorker({ client, settings: { model, tools, toolApproval } });
    const step = await suspended(worker, uid);

    const edited = { page: 12, description: "Bread, baked at dawn." };
    await tasks.decideCalls(step.runId, step.run.turn.digest, [{ call_id: "call_e", approved: true, arguments: edited }], {
        deciderUid: uid,
    });
    assert.equal((await worker.resume(step.runId)).status, "finished");
    assert.deepEqual(ran, [{ input: edited, key: `${step.runId}:call_e` }], "ran once, with the edited arguments");

    const output = JSON.stringify({ updated: 12 });
    const run = await client.getRun(step.runId);
    assert.deepEqual(run.released_calls?.map((call) => call.result?.content), [output], "the worker posted the bare output");
    assert.deepEqual(toolResultsOf(prompts[1]!), [
        {
            toolCallId: "call_e",
            toolName: WRITE_TOOL,
            output: { type: "text", value: `${EDITED_BY_OWNER(JSON.stringify(edited))}\n\n${output}` },
        },
    ]);
});

test("a tool that throws posts the fixed failed text, and its message goes only to the worker's log", async () => {
    const uid = await owner();
    const secret = "postgres://admin:hunter2@db.internal/pages";
    const { tools, toolApproval } = pageTools(async () => {
        throw new Error(`connection refused: ${secret}`);
    });
    const logged: unknown[] = [];
    const { model, prompts } = scriptedModel([callTool("call_f", WRITE_TOOL, PAGE), say("It failed.")]);
    const worker = new AiSdkWorker({
        client,
        settings: { model, tools, toolApproval },
        logger: (_message, error) => logged.push(error),
    });
    const step = await suspended(worker, uid);
    await tasks.approveTurn(step.runId, step.run.turn.digest, { deciderUid: uid });
    assert.equal((await worker.resume(step.runId)).status, "finished");

    const failed = `Error: tool "${WRITE_TOOL}" failed.`;
    const run = await client.getRun(step.runId);
    assert.deepEqual(run.released_calls?.map((call) => call.result), [{ content: failed, is_error: true }]);
    assert.deepEqual(toolResultsOf(prompts[1]!), [
        { toolCallId: "call_f", toolName: WRITE_TOOL, output: { type: "error-text", value: failed } },
    ]);
    assert.equal(logged.length, 1);
    assert.match(String(logged[0]), /hunter2/, "the exception is logged");
    assert.doesNotMatch(JSON.stringify(await client.runEvents(step.runId)), /hunter2/);
});

test("two workers resuming one released run at once run the tool once, and the other reports the claim", async () => {
    const uid = await owner();
    const { tools, ran, toolApproval } = pageTools(async (input) => {
        await new Promise((resolve) => setTimeout(resolve, 1_000));
        return { updated: input.page };
    });
    const first = scriptedModel([callTool("call_t", WRITE_TOOL, PAGE), say("Done.")]);
    const second = scriptedModel([say("Done too.")]);
    const a = new AiSdkWorker({ client, settings: { model: first.model, tools, toolApproval } });
    const b = new AiSdkWorker({ client, settings: { model: second.model, tools, toolApproval } });
    const step = await suspended(a, uid);
    await tasks.approveTurn(step.runId, step.run.turn.digest, { deciderUid: uid });

    const outcomes = await Promise.all([a.resume(step.runId), b.resume(step.runId)]);
    assert.deepEqual(outcomes.map((outcome) => outcome.status).sort(), ["claimed", "finished"]);
    const claimed = outcomes.find((outcome) => outcome.status === "claimed");
    assert.ok(claimed?.status === "claimed" && claimed.until !== null, "the refusal names when the claim lapses");
    assert.equal(ran.length, 1, "the tool ran once");
});

test("a tool that outlasts the claim's lease still posts its result: the worker renews the claim while it runs", async () => {
    const uid = await owner();
    const { tools, ran, toolApproval } = pageTools(async (input) => {
        await new Promise((resolve) => setTimeout(resolve, (CLAIM_TTL_SECS + 1.5) * 1000));
        return { updated: input.page };
    });
    const { model } = scriptedModel([callTool("call_l", WRITE_TOOL, PAGE), say("Done.")]);
    const worker = new AiSdkWorker({ client, settings: { model, tools, toolApproval } });
    const step = await suspended(worker, uid);
    await tasks.approveTurn(step.runId, step.run.turn.digest, { deciderUid: uid });

    assert.equal((await worker.resume(step.runId)).status, "finished");
    assert.equal(ran.length, 1);
    const run = await client.getRun(step.runId);
    assert.deepEqual(run.released_calls?.map((call) => call.result?.content), [JSON.stringify({ updated: 12 })]);
});

test("a worker that restarts after posting the results goes on from the service without running the tool again", async () => {
    const uid = await owner();
    const { tools, ran, toolApproval } = pageTools();
    // The first worker's model fails on the step after the tool ran: the process "crashed" after posting.
    const first = scriptedModel([callTool("call_r", WRITE_TOOL, PAGE)]);
    const crashing = new AiSdkWorker({ client, settings: { model: first.model, tools, toolApproval } });
    const step = await suspended(crashing, uid);
    await tasks.approveTurn(step.runId, step.run.turn.digest, { deciderUid: uid });
    await assert.rejects(crashing.resume(step.runId));
    assert.equal(ran.length, 1);
    assert.equal((await client.getRun(step.runId)).status, "resumed", "the result was posted before the model ran");

    const second = scriptedModel([say("Done.")]);
    const restarted = new AiSdkWorker({ client, settings: { model: second.model, tools, toolApproval } });
    const done = await restarted.resume(step.runId);
    assert.equal(done.status, "finished");
    assert.equal(ran.length, 1, "the call with a result is not run again");
    assert.equal(second.prompts[0]!.at(-1)!.role, "tool");
});

test("a model that asks again after a verdict appends a turn, which the next decision resumes (streamText)", async () => {
    const uid = await owner();
    const { tools, ran, toolApproval } = pageTools();
    const { model, prompts } = scriptedModel([
        callTool("call_1", READ_TOOL, { page: 12 }),
        callTool("call_2", WRITE_TOOL, PAGE),
        callTool("call_3", WRITE_TOOL, { page: 12, description: "Bread, fresh daily." }),
        say("Updated."),
    ]);
    const worker = new AiSdkWorker({
        client,
        settings: { model, tools, toolApproval, stopWhen: stepCountIs(5) },
        stream: () => {},
    });
    const step = await suspended(worker, uid);
    assert.deepEqual(step.run.turn.pending_calls.map((call) => call.id), ["call_2"], "the read ran without approval");

    await tasks.denyTurn(step.runId, step.run.turn.digest, { deciderUid: uid, reason: "variant" });
    const again = await worker.resume(step.runId);
    assert.ok(again.status === "suspended");
    assert.equal(again.run.turn.index, 1);
    assert.deepEqual(again.run.turn.pending_calls.map((call) => call.id), ["call_3"]);

    await tasks.approveTurn(again.runId, again.run.turn.digest, { deciderUid: uid });
    const done = await worker.resume(again.runId);
    assert.ok(done.status === "finished");
    assert.equal(done.text, "Updated.");
    assert.deepEqual(ran.map((call) => call.input), [{ page: 12, description: "Bread, fresh daily." }]);
    assert.equal(prompts.length, 4);
});

/**
 * A run of `uid` suspended on the model's write of PAGE (call_1); asked again, the model writes AGAIN (call_2), then
 * answers `answer`. With `stream`, the worker streams each model step into `streams`.
 */
async function writingTwice(uid: number, answer: string, stream = false) {
    const { tools, ran, toolApproval } = pageTools();
    const { model, prompts } = scriptedModel([
        callTool("call_1", WRITE_TOOL, PAGE),
        callTool("call_2", WRITE_TOOL, AGAIN),
        say(answer),
    ]);
    const streams: unknown[] = [];
    const worker = new AiSdkWorker({
        client,
        settings: { model, tools, toolApproval },
        ...(stream ? { stream: (result: unknown) => void streams.push(result) } : {}),
    });
    return { ran, prompts, streams, worker, step: await suspended(worker, uid) };
}

/**
 * The model calls the write, then calls it again once it has the first result, then answers; the person approves
 * the first call for the rest of the run, so the second goes through at once.
 */
async function allowedForTheRun(stream: boolean) {
    const uid = await owner();
    const { ran, prompts, streams, worker, step } = await writingTwice(uid, "Both written.", stream);
    await tasks.approveTurn(step.runId, step.run.turn.digest, { deciderUid: uid, remember: "run" });

    const done = await worker.resume(step.runId);
    assert.ok(done.status === "finished", `resumed: ${done.status}`);
    assert.equal(done.text, "Both written.");
    await assertAllowedForTheRun(client, tasks, step.runId, uid, ran);
    assert.deepEqual(toolResultsOf(prompts[2]!), [
        { toolCallId: "call_2", toolName: WRITE_TOOL, output: { type: "text", value: JSON.stringify({ updated: 12 }) } },
    ]);
    assert.equal(prompts.length, 3);
    if (stream) {
        assert.equal(streams.length, 3, "each model step was streamed to the consumer, the one after the rule too");
    }
}

test("a turn approved for the rest of the run lets the model's next call of the tool run at once, without a click (generateText)", async () => {
    await allowedForTheRun(false);
});

test("a turn approved for the rest of the run lets the model's next call of the tool run at once, without a click (streamText)", async () => {
    await allowedForTheRun(true);
});

test("a turn denied with 'never' for the run denies the model's next call at once: the model reads the exact text and nothing ran", async () => {
    const uid = await owner();
    const { ran, prompts, worker, step } = await writingTwice(uid, "I will leave the page as it is.");
    await tasks.denyTurn(step.runId, step.run.turn.digest, { deciderUid: uid, reason: "skip", remember: "run" });

    const done = await worker.resume(step.runId);
    assert.ok(done.status === "finished", `resumed: ${done.status}`);
    assert.deepEqual(toolResultsOf(prompts[2]!), [
        { toolCallId: "call_2", toolName: WRITE_TOOL, output: { type: "execution-denied", reason: NEVER_BY_OWNER(WRITE_TOOL) } },
    ]);
    await assertRefusedForTheRun(client, tasks, step.runId, ran);
});

test("an owner rule made before the run decides its registration, and start goes straight on to the model's answer", async () => {
    const uid = await owner();
    const rule = await ownerApprovesWrites(tasks, uid);
    const { tools, ran, toolApproval } = pageTools();
    const { model } = scriptedModel([callTool("call_o", WRITE_TOOL, PAGE), say("Written.")]);
    const worker = new AiSdkWorker({ client, settings: { model, tools, toolApproval } });

    const done = await worker.start({ ownerUid: uid, messages: [{ role: "user", content: "Describe page 12." }] });
    assert.ok(done.status === "finished" && done.runId !== null, `started: ${done.status}`);
    assert.equal(done.text, "Written.");
    await assertDecidedAtRegistration(client, done.runId, rule, ran);
});

test("turns decided at once go on no further than maxDecidedTurns in one call, and resume takes the run on from there", async () => {
    const uid = await owner();
    const { tools, ran, toolApproval } = pageTools();
    const { model } = scriptedModel([
        callTool("call_1", WRITE_TOOL, PAGE),
        callTool("call_2", WRITE_TOOL, AGAIN),
        callTool("call_3", WRITE_TOOL, PAGE),
        say("Written three times."),
    ]);
    const worker = new AiSdkWorker({ client, settings: { model, tools, toolApproval }, maxDecidedTurns: 1 });
    const step = await suspended(worker, uid);
    await tasks.approveTurn(step.runId, step.run.turn.digest, { deciderUid: uid, remember: "run" });
    await assertBoundToOneDecidedTurn(() => worker.resume(step.runId), ran);
    for (const unbounded of [0.5, -1, Number.NaN, Number.POSITIVE_INFINITY]) {
        assert.throws(
            () => new AiSdkWorker({ client, settings: { model, tools, toolApproval }, maxDecidedTurns: unbounded }),
            RangeError,
            `maxDecidedTurns ${unbounded} is no bound`,
        );
    }
});
