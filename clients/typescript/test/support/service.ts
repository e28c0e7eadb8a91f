/**
 * The real binary against the real Postgres, once per test file (node --test runs each file in a process of its
 * own): a fresh database (createdb), `approval-resume migrate`, API clients made by `clients add` with the scopes
 * the README's callers hold, a loopback tool executor (./executor.ts) configured in TOOLS_CONFIG, and `serve` on a
 * free loopback port (LISTEN_ADDR 127.0.0.1:0; the bound address is read from its log) with
 * WEBHOOK_ALLOW_PRIVATE_ADDRESSES=true, so its webhooks may reach a receiver on loopback. `stop()` ends the service
 * and drops the database.
 *
 * APPROVAL_RESUME_BIN names the binary (default: the repository's target/debug/approval-resume);
 * POSTGRES_ADMIN_URL the server (default postgres://postgres@127.0.0.1:5432/postgres). The service's log is kept in
 * the repository's target/typescript-client/logs/ (APPROVAL_RESUME_TS_LOG_DIR: elsewhere).
 */
import { type ChildProcess, execFile, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { createWriteStream } from "node:fs";
import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";

import { type Executor, startExecutor } from "./executor.js";

const run = promisify(execFile);

const repository = fileURLToPath(new URL("../../../../", import.meta.url));
/** The service logs' directory; the version matrix, which runs these tests outside the repository, names its own. */
export const logDirectory = process.env.APPROVAL_RESUME_TS_LOG_DIR ?? join(repository, "target", "typescript-client", "logs");

/** Tools the executor runs: one read and one write, as a page editor has. */
export const READ_TOOL = "read_page";
export const WRITE_TOOL = "update_page_metadata";

export interface Service {
    baseUrl: string;
    /** Each client's key, by the name `clients add` gave it. */
    keys: Record<string, string>;
    executor: Executor;
    log: string;
    stop(): Promise<void>;
}

/** The clients to add, by name: their scopes. */
export type Clients = Record<string, string[]>;

/**
 * `name` names the log file (target/typescript-client/logs/{name}.service.log); `settings` are further variables of
 * `serve` (e.g. `PRIVACY_LEVEL`).
 */
export async function startService(clients: Clients, name: string, settings: Record<string, string> = {}): Promise<Service> {
    const binary = process.env.APPROVAL_RESUME_BIN ?? join(repository, "target", "debug", "approval-resume");
    const adminUrl = process.env.POSTGRES_ADMIN_URL ?? "postgres://postgres@127.0.0.1:5432/postgres";
    const database = `ts_client_${randomBytes(6).toString("hex")}`;
    const databaseUrl = new URL(adminUrl);
    databaseUrl.pathname = `/${database}`;
    await mkdir(logDirectory, { recursive: true });
    const log = join(logDirectory, `${name}.service.log`);
    const scratch = await mkdtemp(join(tmpdir(), "approval-resume-ts-"));

    let executor: Executor | null = null;
    let server: ChildProcess | null = null;
    let created = false;
    const stop = async () => {
        if (server !== null && server.exitCode === null && server.signalCode === null) {
            const exited = new Promise((resolve) => server!.once("exit", resolve));
            server.kill("SIGTERM");
            await exited;
        }
        server = null;
        await executor?.close();
        executor = null;
        if (created) {
            await run("dropdb", ["--if-exists", "--force", `--maintenance-db=${adminUrl}`, database]);
            created = false;
        }
        await rm(scratch, { recursive: true, force: true });
    };

    try {
        await run("createdb", [`--maintenance-db=${adminUrl}`, database]);
        created = true;
        // Only these settings reach the binary: a variable exported in the caller's shell must not change the run.
        const env: Record<string, string> = {
            PATH: process.env.PATH ?? "/usr/bin:/bin",
            DATABASE_URL: databaseUrl.toString(),
            LOG_FORMAT: "json",
        };
        await run(binary, ["migrate"], { env });
        const keys: Record<string, string> = {};
        for (const [name, scopes] of Object.entries(clients)) {
            const { stdout } = await run(binary, ["clients", "add", name, ...scopes.flatMap((s) => ["--scope", s])], {
                env,
            });
            const key = stdout.trim();
            if (!key.startsWith("ar_")) {
                throw new Error(`clients add ${name} printed no key`);
            }
            keys[name] = key;
        }

        executor = await startExecutor();
        const tools = join(scratch, "tools.toml");
        await writeFile(
            tools,
            [READ_TOOL, WRITE_TOOL]
                .map((tool) => `[tools.${tool}]\nurl = "${executor!.url}/tools/${tool}"\neffect = "${tool === WRITE_TOOL ? "write" : "read"}"\n`)
                .join("\n"),
        );

        const output = createWriteStream(log);
        server = spawn(binary, ["serve"], {
            env: {
                ...env,
                LISTEN_ADDR: "127.0.0.1:0",
                TOOLS_CONFIG: tools,
                SHUTDOWN_GRACE_SECS: "5",
                WEBHOOK_ALLOW_PRIVATE_ADDRESSES: "true",
                // A failed delivery is retried soon, so a slow first receiver costs a second, not a minute.
                WEBHOOK_BACKOFF_BASE_MS: "200",
                WEBHOOK_BACKOFF_MAX_SECS: "2",
                ...settings,
            },
            stdio: ["ignore", "ignore", "pipe"],
        });
        const address = await boundAddress(server, output);
        const baseUrl = `http://${address}`;
        await waitUntilReady(baseUrl, server, log);
        return { baseUrl, keys, executor, log, stop };
    } catch (error) {
        await stop();
        throw error;
    }
}

/** The address `serve` logs once it is bound (`"address":"127.0.0.1:PORT"`); its log goes on to `output`. */
function boundAddress(server: ChildProcess, output: NodeJS.WritableStream): Promise<string> {
    return new Promise((resolve, reject) => {
        let seen = "";
        let found = false;
        const timer = setTimeout(() => reject(new Error("serve logged no address within 30 s")), 30_000);
        server.stderr!.on("data", (chunk: Buffer) => {
            output.write(chunk);
            if (found) {
                return;
            }
            seen += chunk.toString("utf8");
            const match = /"address":"([^"]+)"/.exec(seen);
            if (match !== null) {
                found = true;
                clearTimeout(timer);
                resolve(match[1]!);
            }
        });
        server.once("exit", (code) => {
            clearTimeout(timer);
            reject(new Error(`serve exited with ${code} before it listened:\n${seen}`));
        });
    });
}

async function waitUntilReady(baseUrl: string, server: ChildProcess, log: string): Promise<void> {
    const deadline = Date.now() + 30_000;
    while (Date.now() < deadline && server.exitCode === null) {
        try {
            const response = await fetch(`${baseUrl}/readyz`);
            if (response.ok) {
                return;
            }
        } catch {
            // Not accepting yet.
        }
        await new Promise((resolve) => setTimeout(resolve, 100));
    }
    const tail = (await readFile(log, "utf8")).split("\n").slice(-20).join("\n");
    throw new Error(`approval-resume serve did not become ready; the end of its log:\n${tail}`);
}
