// Generates src/generated/openapi.ts from the repository's openapi.yaml with the pinned openapi-typescript, or checks
// that the checked-in file is what the generator makes of the spec now (docs/design.md §16: each client is held to
// openapi.yaml by a test).
//
//   node scripts/generated-types.mjs --write            regenerate the checked-in file
//   node scripts/generated-types.mjs --check [SPEC]     exit 1, naming the first differing line, when it is stale
//
// SPEC defaults to ../../openapi.yaml; the tests pass a changed copy to prove the check fails on a change. The
// generator's own `--check` flag compares too, but says only "not up-to-date"; this says where, and it also fails
// on any warning the generator prints (a schema it could not represent), as tests/clients/run.sh does.
import { execFile } from "node:child_process";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const target = join(root, "src", "generated", "openapi.ts");
const generator = join(root, "node_modules", "openapi-typescript", "bin", "cli.js");

const [mode, specArgument] = process.argv.slice(2);
if (mode !== "--write" && mode !== "--check") {
    console.error("usage: generated-types.mjs --write | --check [SPEC]");
    process.exit(2);
}
const spec = resolve(specArgument ?? join(root, "..", "..", "openapi.yaml"));

const scratch = await mkdtemp(join(tmpdir(), "approval-resume-types-"));
let generated;
try {
    const output = join(scratch, "openapi.ts");
    // cwd is the scratch directory, so no redocly.yaml of the caller's changes what is generated.
    // `--default-non-nullable=false`: a member with a `default` (RegisterRun's `tools` and `require_second_approver`)
    // stays optional, as the service takes it; only request members and query parameters carry defaults.
    const { stdout, stderr } = await promisify(execFile)(
        process.execPath,
        [generator, spec, "--output", output, "--default-non-nullable=false"],
        { cwd: scratch },
    );
    const log = `${stdout}${stderr}`;
    if (log.includes("⚠")) {
        console.error(`openapi-typescript warned while reading ${spec}:\n${log}`);
        process.exit(1);
    }
    generated = await readFile(output, "utf8");
} finally {
    await rm(scratch, { recursive: true, force: true });
}

if (mode === "--write") {
    await writeFile(target, generated, "utf8");
    console.log(`wrote ${target} from ${spec}`);
    process.exit(0);
}

const current = await readFile(target, "utf8").catch(() => "");
if (current === generated) {
    console.log(`src/generated/openapi.ts is what openapi-typescript generates from ${spec}`);
    process.exit(0);
}
const want = generated.split("\n");
const have = current.split("\n");
let line = 0;
while (line < want.length && want[line] === have[line]) {
    line += 1;
}
console.error(
    `src/generated/openapi.ts is stale against ${spec}: first difference at line ${line + 1}\n` +
        `  checked in: ${have[line] ?? "(end of file)"}\n` +
        `  generated:  ${want[line] ?? "(end of file)"}\n` +
        "run `npm run generate` in clients/typescript and commit the result",
);
process.exit(1);
