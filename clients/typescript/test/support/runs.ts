/** Runs and users for the tests: fresh ids, so tests never share one. */
import { randomUUID } from "node:crypto";

import type { ApprovalResumeClient, RunView } from "approval-resume";

import { READ_TOOL, WRITE_TOOL } from "./service.js";

let nextUid = 100;

/** A uid no other test of this process uses (one database per test file). */
export function newUid(): number {
    nextUid += 1;
    return nextUid;
}

/** A random (version 4) UUID, as the README asks loops to draw run ids. */
export function newRunId(): string {
    return randomUUID();
}

/** The arguments the model proposed for each call of {@link register}'s turn. */
export const READ_ARGUMENTS = '{"page": 12}';
export const WRITE_ARGUMENTS = '{"page": 12, "description": "Fresh bread daily."}';

/** Registers a run of `ownerUid` suspended on a turn that reads page 12 (call_1) and writes its description (call_2). */
export function register(client: ApprovalResumeClient, ownerUid: number, id: string = newRunId()): Promise<RunView> {
    return client.registerRun({
        id,
        owner_uid: ownerUid,
        messages: [
            { role: "user", content: "Write a meta description for page 12." },
            {
                role: "assistant",
                content: null,
                tool_calls: [
                    { id: "call_1", type: "function", function: { name: READ_TOOL, arguments: READ_ARGUMENTS } },
                    { id: "call_2", type: "function", function: { name: WRITE_TOOL, arguments: WRITE_ARGUMENTS } },
                ],
            },
        ],
        tools: [
            { name: READ_TOOL, effect: "read" },
            { name: WRITE_TOOL, effect: "write" },
        ],
    });
}

/** Waits until `check` answers a value other than undefined, or fails after `seconds`. */
export async function eventually<T>(what: string, seconds: number, check: () => T | undefined): Promise<T> {
    const deadline = Date.now() + seconds * 1000;
    for (;;) {
        const value = check();
        if (value !== undefined) {
            return value;
        }
        if (Date.now() > deadline) {
            throw new Error(`${what}: not within ${seconds} s`);
        }
        await new Promise((resolve) => setTimeout(resolve, 50));
    }
}
