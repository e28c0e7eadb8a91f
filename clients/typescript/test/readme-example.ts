// The README's examples, type-checked with the tests (tsc --strict) so they cannot drift from the package; not run.
import { Agent, tool as agentTool } from "@openai/agents";
import { ScriptedModel } from "@openai/agents/testing";
import { stepCountIs, tool } from "ai";
import { MockLanguageModelV4 } from "ai/test";
import { ApiError, ApprovalResumeClient, type RegisterRun } from "approval-resume";
import { AiSdkWorker } from "approval-resume/ai-sdk";
import { OpenAIAgentsWorker } from "approval-resume/openai-agents";
import { FileCursorStore } from "approval-resume/file-cursor-store";
import { z } from "zod";

export async function example(): Promise<void> {
    const tasks = new ApprovalResumeClient({ baseUrl: "http://127.0.0.1:8080", credential: process.env.APPROVAL_RESUME_KEY! });
    const [item] = (await tasks.approvals({ acting_uid: 9 })).items; // refusals throw ApiError (.status, .code, …)
    const answer = await tasks.denyTurn(item!.run_id, item!.turn.digest, { deciderUid: 9, reason: "variant" });
    console.log(answer.results[0]!.content); // the text the model reads

    for await (const event of tasks.feed({ store: new FileCursorStore("feed-cursor.json") })) {
        console.log(event.type, event.data.run_id); // saved as handled when the loop asks for the next one
    }
}

// The README's remembered decisions.
export async function rulesExample(tasks: ApprovalResumeClient, runId: string, digest: string, nextWeek: Date): Promise<void> {
    // With a decision: each tool of the turn remembered for the run's later turns.
    await tasks.approveTurn(runId, digest, { deciderUid: 7, remember: "run" });
    await tasks.denyTurn(runId, digest, { deciderUid: 7, reason: "skip", remember: "owner", rememberUntil: nextWeek });
    await tasks.decideCalls(runId, digest, [{ call_id: "call_1", approved: true, remember: "run" }], { deciderUid: 7 });
    // On their own, listed (newest first, revoked and expired ones included; `live` says which decide), revoked.
    const rule = await tasks.makeRunRule(runId, { created_by: 7, tool: "read_page", arguments: { page: 12 }, verdict: "approve" });
    await tasks.makeOwnerRule({ owner_uid: 7, created_by: 7, tool: "read_page", verdict: "approve", expires_at: nextWeek.toISOString() });
    console.log(await tasks.listRunRules(runId), await tasks.listOwnerRules(7));
    await tasks.revokeRule(rule.id, { revokedBy: 7 }); // a turn registered after this answer never uses it
}

export const refusal = (error: unknown): string | null => (error instanceof ApiError ? error.code : null);

// The AI SDK adapter's example of the README, with the SDK's mock model standing in for a provider's.

const model = new MockLanguageModelV4();
const tools = {
    update_page_metadata: tool({
        inputSchema: z.object({ page: z.number() }),
        execute: async ({ page }) => ({ updated: page }),
    }),
};

export async function aiSdkExample(): Promise<void> {
    const client = new ApprovalResumeClient({ baseUrl: "http://127.0.0.1:8080", credential: process.env.APPROVAL_RESUME_KEY! });
    const worker = new AiSdkWorker({
        client,
        settings: { model, tools, toolApproval: { update_page_metadata: "user-approval" }, system: "You edit pages.", stopWhen: stepCountIs(5) },
    });
    const step = await worker.start({ ownerUid: 7, messages: [{ role: "user", content: "Describe page 12." }] });
    if (step.status === "suspended") console.log("waiting for a decision on", step.runId); // a registered run
    // …on run.released or run.resumed for that run (the feed, a webhook), or after a restart:
    const next = await worker.resume(step.runId!); // "finished", "suspended" (a new turn), "waiting", "claimed", "closed", "decided"
    if (next.status === "finished") console.log(next.text, next.messages.length);
    if (next.status === "claimed") console.log("another worker has the run until", next.until); // nothing ran here
}

// The OpenAI Agents SDK adapter's example of the README, with the SDK's scripted model.

const agent = new Agent({
    name: "pages",
    instructions: "You edit pages.",
    model: new ScriptedModel(),
    tools: [
        agentTool({
            name: "update_page_metadata",
            description: "Sets a page's meta description.",
            parameters: z.object({ page: z.number() }),
            needsApproval: true,
            execute: async ({ page }) => `updated page ${page}`,
        }),
    ],
});

export async function openAIAgentsExample(client: ApprovalResumeClient): Promise<void> {
    const worker = new OpenAIAgentsWorker({ client, agent }); // agent: new Agent({ name, instructions, model, tools })
    const step = await worker.start({ ownerUid: 7, input: "Describe page 12." });
    // …on run.released or run.resumed:
    const next = await worker.resume(step.runId!); // "finished" (next.finalOutput), "suspended", "waiting", "claimed", "closed", "decided"
    if (next.status === "finished") console.log(next.finalOutput);
}

// The README's approval links and mail.
export async function linksExample(
    worker: ApprovalResumeClient,
    tasks: ApprovalResumeClient,
    registration: RegisterRun,
): Promise<void> {
    await worker.putUser(9, { username: "arne", is_admin: false, can_approve_others: true, disabled: false, email: "arne@example.com" });
    const run = await worker.registerRun({ ...registration, notify: [7, 9] });
    console.log(run.notify); // 7 without an address: { queued: [9], skipped: [{ uid: 7, reason: "no_email" }] }
    const link = await tasks.createLink(run.id, 9); // { id, url, expires_at }: the url is shown only here
    await tasks.revokeLink(run.id, link.id); // it decides nothing from now on
}
