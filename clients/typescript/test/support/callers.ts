/**
 * The service of one test file with the callers most tests need: the agent worker's client and the AI Tasks
 * module's, with the scopes the README's "Who calls what" gives them, and the refusal every test reads as an ApiError.
 */
import assert from "node:assert/strict";

import { ApiError, ApprovalResumeClient } from "approval-resume";

import { type Clients, type Service, startService } from "./service.js";

/** The service and a client of each of the two callers. */
export interface Callers {
    service: Service;
    /** The agent worker: users, registration, runs. */
    worker: ApprovalResumeClient;
    /** The AI Tasks module: the inbox, runs, decisions (rules among them). */
    tasks: ApprovalResumeClient;
}

/**
 * {@link startService} with the clients `worker` and `tasks` (and `more`, e.g. ops with its own scopes); `name` and
 * `settings` are startService's.
 */
export async function startWithCallers(name: string, settings: Record<string, string> = {}, more: Clients = {}): Promise<Callers> {
    const service = await startService(
        {
            worker: ["users:write", "runs:write", "runs:read"],
            tasks: ["approvals:read", "runs:read", "decisions:write"],
            ...more,
        },
        name,
        settings,
    );
    const client = (name: string) => new ApprovalResumeClient({ baseUrl: service.baseUrl, credential: service.keys[name]! });
    return { service, worker: client("worker"), tasks: client("tasks") };
}

/** The ApiError `request` fails with (it must fail so); every problem carries the request id. */
export async function refusal(request: Promise<unknown>): Promise<ApiError> {
    try {
        await request;
    } catch (error) {
        assert.ok(error instanceof ApiError, `an ApiError, not ${String(error)}`);
        assert.match(error.requestId ?? "", /^[0-9a-f-]{36}$/, "every problem carries the request id");
        return error;
    }
    assert.fail("the request succeeded");
}
