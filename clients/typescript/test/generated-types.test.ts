// The check that holds src/generated/openapi.ts to openapi.yaml (scripts/generated-types.mjs --check, which
// tests/typescript-client/run.sh runs on the spec as it is before these tests) fails on a changed spec, naming the
// stale line: a check that can fail.
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";

const root = fileURLToPath(new URL("../", import.meta.url));
const script = join(root, "scripts", "generated-types.mjs");
const spec = join(root, "..", "..", "openapi.yaml");

function check(specPath: string): Promise<{ code: number; stdout: string; stderr: string }> {
    return new Promise((resolve) => {
        execFile(process.execPath, [script, "--check", specPath], (error, stdout, stderr) => {
            resolve({ code: error === null ? 0 : Number(error.code ?? 1), stdout, stderr });
        });
    });
}

test("a changed spec fails the check, naming the first stale line", async () => {
    const scratch = await mkdtemp(join(tmpdir(), "approval-resume-spec-"));
    try {
        const text = await readFile(spec, "utf8");
        // The EventType enum, whatever members it has now, gains one the service will never send.
        const original = /enum: \[run\.waiting, [^\]]*\]/.exec(text)?.[0];
        assert.ok(original !== undefined, "the EventType enum as openapi.yaml writes it");
        const changed = join(scratch, "openapi.yaml");
        await writeFile(changed, text.replace(original, original.replace("run.waiting,", "run.waiting, run.stale_check,")));
        const result = await check(changed);
        assert.equal(result.code, 1);
        assert.match(result.stderr, /src\/generated\/openapi\.ts is stale against .*: first difference at line \d+/);
        assert.match(result.stderr, /generated: .*"run\.stale_check"/);
    } finally {
        await rm(scratch, { recursive: true, force: true });
    }
});
