// approval-resume/ai-sdk against the real binary (docs/design.md §16): the AI SDK's own mock model asks for a write
// tool, the adapter registers the run, a human decides through the service, and the adapter resumes the SDK: a
// denial reaches the model as `execution-denied` with the service's exact text; an approval lets the SDK run the tool
// once, and the adapter posts its result, which the audit shows.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";

import { jsonSchema, stepCountIs, tool } from "ai";
import { ApiError, ApprovalResumeClient } from "approval-resume";
import { AiSdkWorker } from "approval-resume/ai-sdk";

import { type Prompt, callTool, say, scriptedModel } from "./support/model.js";
import { newUid } from "./support/runs.js";
import { READ_TOOL, type Service, WRITE_TOOL, startService } from "./support/service.js";

/** docs/design.md §3: the owner's own denial of a call, no reason. */
const DENIED_BY_OWNER = (tool: string) =>
    `Error: approval_denied (decided_by: run_owner). The approval for tool "${tool}" was declined by the user who ` +
    "started this run, the person you are talking to. Nothing was executed. Tell them that they declined the " +
    "approval themselves, not the system or an operator, and ask whether the change should be proposed again.";

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
        "ai-sdk",
        // Tool events keep their results, so the audit shows what the worker posted.
        { PRIVACY_LEVEL: "full" },
    );
    client = new ApprovalResumeClient({ baseUrl: service.baseUrl, credential: service.keys.worker! });
    tasks = new ApprovalResumeClient({ baseUrl: service.baseUrl, credential: service.keys.tasks! });
});

after(async () => {
    await service?.stop();
});

/** The page tools as an agent has them: reading runs at once, writing needs approval; `ran` counts the writes. */
function pageTools() {
    const ran: unknown[] = [];
    const page = jsonSchema<{ page: number; description?: string }>({
        type: "object",
        properties: { page: { type: "integer" }, description: { type: "string" } },
        required: ["page"],
    });
    const tools = {
        [READ_TOOL]: tool({ description: "Reads a page.", inputSchema: page, execute: async () => "Page 12: the bakery." }),
        [WRITE_TOOL]: tool({
            description: "Sets a page's meta description.",
            inputSchema: page,
            needsApproval: true,
            execute: async (input) => {
                ran.push(input);
                return { updated: input.page };
            },
        }),
    };
    return { tools, ran };
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

async function owner(): Promise<number> {
    const uid = newUid();
    await client.putUser(uid, { username: "ada", is_admin: false, can_approve_others: false, disabled: false });
    return uid;
}

test("a write tool the model calls suspends the run, registered with worker tools that take no edits", async () => {
    const uid = await owner();
    const { tools, ran } = pageTools();
    const { model } = scriptedModel([callTool("call_w", WRITE_TOOL, PAGE)]);
    const worker = new AiSdkWorker({ client, settings: { model, tools } });

    const step = await worker.start({ ownerUid: uid, messages: [{ role: "user", content: "Describe page 12." }] });
    assert.equal(step.status, "suspended");
    assert.ok(step.status === "suspended");
    assert.equal(step.run.status, "waiting_for_approval");
    assert.deepEqual(
        step.run.turn.pending_calls.map((call) => [call.id, call.name, call.arguments, call.effect]),
        [["call_w", WRITE_TOOL, JSON.stringify(PAGE), "write"]],
    );
    const stored = await client.getRun(step.runId, { includeWorkerState: true });
    assert.equal((stored.worker_state as { kind: string }).kind, "approval-resume/ai-sdk");

    const edit = await tasks
        .decideCalls(step.runId, step.run.turn.digest, [{ call_id: "call_w", approved: true, arguments: { page: 13 } }], {
            deciderUid: uid,
        })
        .catch((error: unknown) => error);
    assert.ok(edit instanceof ApiError);
    assert.deepEqual([edit.status, edit.code], [422, "not_editable"], "the SDK cannot run edited arguments");
    assert.equal((await worker.resume(step.runId)).status, "waiting", "nothing to do before a decision");
    assert.deepEqual(ran, []);
});

test("a denial reaches the model as execution-denied with the service's exact text, and the tool never runs", async () => {
    const uid = await owner();
    const { tools, ran } = pageTools();
    const { model, prompts } = scriptedModel([callTool("call_d", WRITE_TOOL, PAGE), say("You declined it; shall I propose it again?")]);
    const worker = new AiSdkWorker({ client, settings: { model, tools } });
    const step = await worker.start({ ownerUid: uid, messages: [{ role: "user", content: "Describe page 12." }] });
    assert.ok(step.status === "suspended");

    await tasks.denyTurn(step.runId, step.run.turn.digest, { deciderUid: uid });
    const done = await worker.resume(step.runId);
    assert.equal(done.status, "finished");

    assert.deepEqual(toolResultsOf(prompts[1]!), [
        { toolCallId: "call_d", toolName: WRITE_TOOL, output: { type: "execution-denied", reason: DENIED_BY_OWNER(WRITE_TOOL) } },
    ]);
    assert.deepEqual(ran, [], "a denied call is not run");
    assert.equal((await client.getRun(step.runId)).status, "completed");
});

test("an approval lets the SDK run the tool once with the proposed arguments, and the audit shows its result", async () => {
    const uid = await owner();
    const { tools, ran } = pageTools();
    const { model, prompts } = scriptedModel([callTool("call_a", WRITE_TOOL, PAGE), say("Done.")]);
    const worker = new AiSdkWorker({ client, settings: { model, tools } });
    const step = await worker.start({ ownerUid: uid, messages: [{ role: "user", content: "Describe page 12." }] });
    assert.ok(step.status === "suspended");

    const answer = await tasks.approveTurn(step.runId, step.run.turn.digest, { deciderUid: uid });
    assert.equal(answer.status, "released");
    const done = await worker.resume(step.runId);
    assert.equal(done.status, "finished");
    assert.deepEqual(ran, [PAGE], "the tool ran once, with the arguments the owner approved");
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

test("a worker that restarts after posting the results goes on from the service without running the tool again", async () => {
    const uid = await owner();
    const { tools, ran } = pageTools();
    // The first worker's model fails on the step after the tool ran: the process "crashed" after posting.
    const first = scriptedModel([callTool("call_r", WRITE_TOOL, PAGE)]);
    const crashing = new AiSdkWorker({ client, settings: { model: first.model, tools } });
    const step = await crashing.start({ ownerUid: uid, messages: [{ role: "user", content: "Describe page 12." }] });
    assert.ok(step.status === "suspended");
    await tasks.approveTurn(step.runId, step.run.turn.digest, { deciderUid: uid });
    await assert.rejects(crashing.resume(step.runId));
    assert.equal(ran.length, 1);
    assert.equal((await client.getRun(step.runId)).status, "resumed", "the result was posted before the model ran");

    const second = scriptedModel([say("Done.")]);
    const restarted = new AiSdkWorker({ client, settings: { model: second.model, tools } });
    const done = await restarted.resume(step.runId);
    assert.equal(done.status, "finished");
    assert.equal(ran.length, 1, "the call with a result is not run again");
    assert.equal(second.prompts[0]!.at(-1)!.role, "tool");
});

test("a model that asks again after a verdict appends a turn, which the next decision resumes", async () => {
    const uid = await owner();
    const { tools, ran } = pageTools();
    const { model, prompts } = scriptedModel([
        callTool("call_1", READ_TOOL, { page: 12 }),
        callTool("call_2", WRITE_TOOL, PAGE),
        callTool("call_3", WRITE_TOOL, { page: 12, description: "Bread, fresh daily." }),
        say("Updated."),
    ]);
    const worker = new AiSdkWorker({ client, settings: { model, tools, stopWhen: stepCountIs(5) } });
    const step = await worker.start({ ownerUid: uid, messages: [{ role: "user", content: "Describe page 12." }] });
    assert.ok(step.status === "suspended");
    assert.deepEqual(step.run.turn.pending_calls.map((call) => call.id), ["call_2"], "the read ran without approval");

    await tasks.denyTurn(step.runId, step.run.turn.digest, { deciderUid: uid, reason: "variant" });
    const again = await worker.resume(step.runId);
    assert.ok(again.status === "suspended");
    assert.equal(again.run.turn.index, 1);
    assert.deepEqual(again.run.turn.pending_calls.map((call) => call.id), ["call_3"]);

    await tasks.approveTurn(again.runId, again.run.turn.digest, { deciderUid: uid });
    assert.equal((await worker.resume(again.runId)).status, "finished");
    assert.deepEqual(ran, [{ page: 12, description: "Bread, fresh daily." }]);
    assert.equal(prompts.length, 4);
});
