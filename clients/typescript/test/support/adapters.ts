/**
 * What the adapters' tests (ai-sdk, openai-agents) share: the page the model writes, the run's owner and an owner
 * rule for it (./remembered.ts holds the checks of what rules decided).
 */
import type { ApprovalResumeClient, Rule } from "approval-resume";

import { newUid } from "./runs.js";
import { WRITE_TOOL } from "./service.js";

/** The write the model proposes first, and the one it proposes when it asks again. */
export const PAGE = { page: 12, description: "Fresh bread daily." };
export const AGAIN = { page: 12, description: "Bread, fresh every morning." };

/** A fresh user, put by the worker's `client`, to own a run. */
export async function newOwner(client: ApprovalResumeClient): Promise<number> {
    const uid = newUid();
    await client.putUser(uid, { username: "ada", is_admin: false, can_approve_others: false, disabled: false });
    return uid;
}

/** An owner rule of `uid` (made by `tasks`, for a day) that approves the write tool. */
export function ownerApprovesWrites(tasks: ApprovalResumeClient, uid: number): Promise<Rule> {
    return tasks.makeOwnerRule({
        owner_uid: uid,
        created_by: uid,
        tool: WRITE_TOOL,
        verdict: "approve",
        expires_at: new Date(Date.now() + 86_400_000).toISOString(),
    });
}
