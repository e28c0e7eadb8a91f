// The README's example, type-checked with the tests (tsc --strict) so it cannot drift from the package; not run.
import { ApiError, ApprovalResumeClient } from "approval-resume";
import { FileCursorStore } from "approval-resume/file-cursor-store";

export async function example(): Promise<void> {
    const tasks = new ApprovalResumeClient({ baseUrl: "http://127.0.0.1:8080", credential: process.env.APPROVAL_RESUME_KEY! });
    const [item] = (await tasks.approvals({ acting_uid: 9 })).items; // refusals throw ApiError (.status, .code, …)
    const answer = await tasks.denyTurn(item!.run_id, item!.turn.digest, { deciderUid: 9, reason: "variant" });
    console.log(answer.results[0]!.content); // the text the model reads

    for await (const event of tasks.feed({ store: new FileCursorStore("feed-cursor.json") })) {
        console.log(event.type, event.data.run_id); // saved as handled when the loop asks for the next one
    }
}

export const refusal = (error: unknown): string | null => (error instanceof ApiError ? error.code : null);
