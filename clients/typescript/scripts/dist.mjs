// Checks that the checked-in dist/ is what tsc builds from src/ now, or rebuilds it. dist/ is checked in so that an
// install straight from the repository (`npm install --install-links <path>/clients/typescript`, or a git URL) needs
// no build on the installing machine, where the package's dev dependencies (tsc) are not installed.
//
//   node scripts/dist.mjs --write     rebuild dist/ (what `npm run build` does, from a clean directory)
//   node scripts/dist.mjs --check     exit 1, naming the first differing file, when dist/ is stale
//
// The check builds beside dist/ (build-dist-check/, the same depth, so the source maps' relative paths match).
import { execFile } from "node:child_process";
import { readFile, readdir, rm } from "node:fs/promises";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const tsc = join(root, "node_modules", "typescript", "bin", "tsc");
const mode = process.argv[2];
if (mode !== "--write" && mode !== "--check") {
    console.error("usage: dist.mjs --write | --check");
    process.exit(2);
}

const outDir = join(root, mode === "--write" ? "dist" : "build-dist-check");
await rm(outDir, { recursive: true, force: true });
// The check only emits (--noCheck: the same output, without the type check, which run.sh does once for src/ and
// test/ together); the write checks as it builds.
const check = mode === "--check" ? ["--noCheck"] : [];
await promisify(execFile)(process.execPath, [tsc, "-p", join(root, "tsconfig.json"), "--outDir", outDir, ...check], {
    cwd: root,
});
if (mode === "--write") {
    console.log("wrote dist/");
    process.exit(0);
}

async function files(directory) {
    const entries = await readdir(directory, { recursive: true, withFileTypes: true });
    return entries
        .filter((entry) => entry.isFile())
        .map((entry) => relative(directory, join(entry.parentPath, entry.name)))
        .sort();
}

try {
    const built = await files(outDir);
    const shipped = await files(join(root, "dist")).catch(() => []);
    const missing = built.filter((file) => !shipped.includes(file));
    const extra = shipped.filter((file) => !built.includes(file));
    if (missing.length > 0 || extra.length > 0) {
        console.error(`dist/ is stale: missing ${missing.join(", ") || "nothing"}; not built ${extra.join(", ") || "nothing"}`);
        console.error("run `npm run build:dist` in clients/typescript and commit dist/");
        process.exit(1);
    }
    for (const file of built) {
        const [now, then] = await Promise.all([readFile(join(outDir, file)), readFile(join(root, "dist", file))]);
        if (!now.equals(then)) {
            console.error(`dist/${file} is not what tsc builds from src/ now: run \`npm run build:dist\` and commit dist/`);
            process.exit(1);
        }
    }
    console.log(`dist/ is what tsc builds from src/ (${built.length} files)`);
} finally {
    await rm(outDir, { recursive: true, force: true });
}
