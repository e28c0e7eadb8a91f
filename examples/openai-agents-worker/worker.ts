// An OpenAI Agents SDK (JavaScript) worker in the loop of approval-resume (docs/design.md §16), with the SDK's own
// scripted model from `@openai/agents/testing`, so it runs without a model key: the agent reads page 12 (no
// approval) and then wants to write its meta description (`needsApproval`). The worker registers the run (the
// serialized RunState as its worker state) and waits on the feed; decide it in the AI Tasks module, with
// examples/php/ai_tasks.php, or with curl (README, "Deciding"). On a denial the model reads the service's exact
// text (`state.reject(item, {message})`); on an approval (edited or not) the worker claims the call, the SDK runs the
// tool here and the worker posts its result. Stopped and started again, it resumes the run from the service alone:
// `node dist/worker.js <run-id>`.
//
//   APPROVAL_RESUME_URL=http://127.0.0.1:8080 APPROVAL_RESUME_KEY=ar_… OWNER_UID=7 npm start
//
// The key needs `runs:write`, `runs:read`, `events:read` and `users:write`; OWNER_UID is upserted as a plain user.
// The scripted model answers in order, so a restarted worker's model starts its script again: with a real model
// (`model: "gpt-5"` and OPENAI_API_KEY) the agent goes on from the state as it is.
import { Agent, tool } from "@openai/agents";
import { ScriptedModel, assistantMessage, functionCall } from "@openai/agents/testing";
import { ApprovalResumeClient } from "approval-resume";
import { type AgentsWorkerStep, OpenAIAgentsWorker, currentIdempotencyKey } from "approval-resume/openai-agents";
import { z } from "zod";

const client = new ApprovalResumeClient({
    baseUrl: process.env.APPROVAL_RESUME_URL ?? "http://127.0.0.1:8080",
    credential: process.env.APPROVAL_RESUME_KEY ?? "",
});
const ownerUid = Number(process.env.OWNER_UID ?? "7");
const runId = process.argv[2];

// Read, write, then a last answer. A restarted worker resumes after the write: its script starts at the answer.
const model = new ScriptedModel(
    runId === undefined
        ? [
              [functionCall("read_page", { page: 12 }, { callId: "call_read" })],
              [functionCall("update_page_metadata", { page: 12, description: "Fresh bread daily." }, { callId: "call_write" })],
              [assistantMessage("The page is updated, or I was told why not.")],
          ]
        : [[assistantMessage("The page is updated, or I was told why not.")]],
);

const agent = new Agent({
    name: "pages",
    instructions: "You edit the pages of a bakery's site.",
    model,
    tools: [
        tool({
            name: "read_page",
            description: "Reads a page of the site.",
            parameters: z.object({ page: z.number().int() }),
            execute: async ({ page }) => `Page ${page}: the bakery's opening hours.`,
        }),
        tool({
            name: "update_page_metadata",
            description: "Sets a page's meta description.",
            parameters: z.object({ page: z.number().int(), description: z.string() }),
            needsApproval: true,
            execute: async ({ page, description }) => {
                // currentIdempotencyKey(): `{run_id}:{call_id}`, for an API that takes an Idempotency-Key.
                console.log(`(the tool runs here, in the worker, as ${currentIdempotencyKey()}: page ${page} <- ${JSON.stringify(description)})`);
                return `updated page ${page}`;
            },
        }),
    ],
});

const worker = new OpenAIAgentsWorker({ client, agent, effects: { read_page: "read" }, runConfig: { tracingDisabled: true } });

function report(step: AgentsWorkerStep): boolean {
    switch (step.status) {
        case "finished":
            console.log(`run ${step.runId ?? "(none)"} finished: ${String(step.finalOutput)}`);
            return true;
        case "claimed":
            console.log(`run ${step.runId}: another worker has it (its claim runs until ${step.until ?? "?"}); nothing ran here`);
            return true;
        case "closed":
            console.log(`run ${step.runId} is ${step.run?.status ?? "cancelled"}`);
            return true;
        default:
            console.log(`run ${step.runId} is ${step.run?.status ?? step.status}`);
            return false;
    }
}

let waiting = runId;
if (waiting === undefined) {
    await client.putUser(ownerUid, { username: `owner-${ownerUid}`, is_admin: false, can_approve_others: false, disabled: false });
    const step = await worker.start({ ownerUid, input: "Write a meta description for page 12." });
    if (report(step) || step.runId === null) {
        process.exit(0);
    }
    waiting = step.runId;
    console.log(`waiting for a decision on run ${waiting}`);
}
// A decision, or a restart after one: try the run once, then on each of its events that can move it on.
if (report(await worker.resume(waiting))) {
    process.exit(0);
}
for await (const event of client.feed()) {
    if (event.data.run_id === waiting && (event.type === "run.released" || event.type === "run.resumed")) {
        if (report(await worker.resume(waiting))) {
            break;
        }
    }
}
