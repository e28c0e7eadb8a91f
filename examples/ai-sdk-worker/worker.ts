// A Vercel AI SDK worker in the loop of approval-resume (docs/design.md §16), with the SDK's own mock model from
// `ai/test` (`ai` 7), so it runs without a model key: the model reads page 12 (no approval) and then wants to write
// its meta description (`toolApproval`). The worker registers the run and waits on the feed; decide it in the AI
// Tasks module, with examples/php/ai_tasks.php, or with curl (README, "Deciding"). On a denial the model reads the
// service's exact text; on an approval (edited or not) the worker claims the call, the SDK runs the tool here and the
// worker posts its result. Stopped and started again, it resumes the run from the service alone:
// `node dist/worker.js <run-id>`; a second worker started on the same released run reports that the first has it.
//
//   APPROVAL_RESUME_URL=http://127.0.0.1:8080 APPROVAL_RESUME_KEY=ar_… OWNER_UID=7 npm start
//
// The key needs `runs:write`, `runs:read`, `events:read` and `users:write`; OWNER_UID is upserted as a plain user.
import { ApprovalResumeClient } from "approval-resume";
import { AiSdkWorker, type WorkerStep, currentIdempotencyKey } from "approval-resume/ai-sdk";
import { stepCountIs, tool } from "ai";
import { MockLanguageModelV4 } from "ai/test";
import { z } from "zod";

const client = new ApprovalResumeClient({
    baseUrl: process.env.APPROVAL_RESUME_URL ?? "http://127.0.0.1:8080",
    credential: process.env.APPROVAL_RESUME_KEY ?? "",
});
const ownerUid = Number(process.env.OWNER_UID ?? "7");

const tools = {
    read_page: tool({
        description: "Reads a page of the site.",
        inputSchema: z.object({ page: z.number().int() }),
        execute: async ({ page }) => `Page ${page}: the bakery's opening hours.`,
    }),
    update_page_metadata: tool({
        description: "Sets a page's meta description.",
        inputSchema: z.object({ page: z.number().int(), description: z.string() }),
        execute: async ({ page, description }) => {
            // currentIdempotencyKey(): `{run_id}:{call_id}`, for an API that takes an Idempotency-Key.
            console.log(`(the tool runs here, in the worker, as ${currentIdempotencyKey()}: page ${page} <- ${JSON.stringify(description)})`);
            return { updated: page };
        },
    }),
};

// The scripted model: read, write, then a last answer that repeats what the tool result said.
const usage = { inputTokens: { total: 1, noCache: 1, cacheRead: 0, cacheWrite: 0 }, outputTokens: { total: 1, text: 1, reasoning: 0 } };
const model = new MockLanguageModelV4({
    doGenerate: async ({ prompt }) => {
        const results = prompt.flatMap((message) => (message.role === "tool" ? message.content : []));
        const call = (toolCallId: string, toolName: string, input: unknown) => ({
            content: [{ type: "tool-call" as const, toolCallId, toolName, input: JSON.stringify(input) }],
            finishReason: { unified: "tool-calls" as const, raw: undefined },
            usage,
            warnings: [],
        });
        if (results.length === 0) {
            return call("call_read", "read_page", { page: 12 });
        }
        if (results.length === 1) {
            return call("call_write", "update_page_metadata", { page: 12, description: "Fresh bread daily." });
        }
        const last = results[results.length - 1]!;
        const heard = last.type === "tool-result" ? JSON.stringify(last.output) : "nothing";
        return {
            content: [{ type: "text" as const, text: `The model read: ${heard}` }],
            finishReason: { unified: "stop" as const, raw: undefined },
            usage,
            warnings: [],
        };
    },
});

const worker = new AiSdkWorker({
    client,
    settings: { model, tools, toolApproval: { update_page_metadata: "user-approval" }, stopWhen: stepCountIs(5) },
});

function report(step: WorkerStep<typeof tools>): boolean {
    if (step.status === "finished") {
        console.log(`run ${step.runId ?? "(none)"} finished: ${step.text}`);
        return true;
    }
    if (step.status === "claimed") {
        console.log(`run ${step.runId}: another worker has it (its claim runs until ${step.until ?? "?"}); nothing ran here`);
        return true;
    }
    if (step.status === "closed") {
        console.log(`run ${step.runId} is ${step.run?.status ?? "cancelled"}`);
        return true;
    }
    console.log(`run ${step.runId} is ${step.run?.status ?? step.status}`);
    return false;
}

let runId = process.argv[2];
if (runId === undefined) {
    await client.putUser(ownerUid, { username: `owner-${ownerUid}`, is_admin: false, can_approve_others: false, disabled: false });
    const step = await worker.start({ ownerUid, messages: [{ role: "user", content: "Write a meta description for page 12." }] });
    if (report(step) || step.runId === null) {
        process.exit(0);
    }
    runId = step.runId;
    console.log(`waiting for a decision on run ${runId} (turn digest ${step.status === "suspended" ? step.run.turn.digest : "?"})`);
}
// A decision, or a restart after one: try the run once, then on each of its events that can move it on.
if (report(await worker.resume(runId))) {
    process.exit(0);
}
for await (const event of client.feed()) {
    if (event.data.run_id === runId && (event.type === "run.released" || event.type === "run.resumed")) {
        if (report(await worker.resume(runId))) {
            break;
        }
    }
}
