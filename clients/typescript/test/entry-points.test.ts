// The entry points package.json's `exports` serves (src/entry-points/): each gives every value its module exports,
// and a package it cannot find becomes an error that names the way out. Their working through a real link, and in
// an application without the framework, is tests/typescript-client/matrix.sh's.
import assert from "node:assert/strict";
import { sep } from "node:path";
import { test } from "node:test";

type Loader = { explained(entry: string, error: unknown, folder: string): unknown };

// The entry points and the modules behind them, as the package serves them (test/ compiles apart from src/).
const entries = {
    "approval-resume": "../index.js",
    "approval-resume/ai-sdk": "../ai-sdk/index.js",
    "approval-resume/openai-agents": "../openai-agents/index.js",
};

for (const [entry, behind] of Object.entries(entries)) {
    test(`${entry} exports every value its module does`, async () => {
        const served = import.meta.resolve(entry);
        const [outer, inner] = await Promise.all([import(served), import(new URL(behind, served).href)]);
        assert.deepEqual(Object.keys(outer).sort(), Object.keys(inner).sort());
        for (const name of Object.keys(inner)) {
            assert.equal(outer[name], inner[name], `${entry}: ${name} is the module's own`);
        }
    });
}

async function loader(): Promise<Loader> {
    return (await import(new URL("load.js", import.meta.resolve("approval-resume")).href)) as Loader;
}

function notFound(name: string): Error {
    return Object.assign(new Error(`Cannot find package '${name}' imported from /x/dist/ai-sdk/index.js`), {
        code: "ERR_MODULE_NOT_FOUND",
    });
}

test("a package a linked folder cannot find is said to need a copy, by --install-links or npm pack", async () => {
    const { explained } = await loader();
    const folder = ["", "home", "me", "approval-resume", "clients", "typescript", ""].join(sep);
    const cause = notFound("ai");
    const error = explained("approval-resume/ai-sdk", cause, folder) as Error & { code: string };
    assert.equal(error.code, "ERR_MODULE_NOT_FOUND");
    assert.equal(error.cause, cause);
    assert.match(error.message, /^approval-resume\/ai-sdk cannot load ai: /);
    assert.ok(error.message.includes(`npm install --install-links ${folder}`), error.message);
    assert.match(error.message, /npm pack/);
});

test("a package a copied install cannot find is said to be installed in the application", async () => {
    const { explained } = await loader();
    const folder = ["", "app", "node_modules", "approval-resume", ""].join(sep);
    const error = explained("approval-resume/openai-agents", notFound("@openai/agents"), folder) as Error;
    assert.equal(
        error.message,
        "approval-resume/openai-agents cannot load @openai/agents: install it in your application " +
            "(`npm install @openai/agents`).",
    );
});

test("any other error passes through as it was", async () => {
    const { explained } = await loader();
    const folder = ["", "checkout", ""].join(sep);
    const missingFile = Object.assign(new Error("Cannot find module '/x/dist/gone.js'"), { code: "ERR_MODULE_NOT_FOUND" });
    const thrown = new TypeError("boom");
    assert.equal(explained("approval-resume", missingFile, folder), missingFile);
    assert.equal(explained("approval-resume", thrown, folder), thrown);
    assert.equal(explained("approval-resume", "a string", folder), "a string");
});
