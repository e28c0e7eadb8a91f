#!/usr/bin/env bash
# Proves the TypeScript client (clients/typescript) against openapi.yaml and the real binary:
# - its generated types (src/generated/openapi.ts) are what the pinned openapi-typescript makes of openapi.yaml now
#   (a spec changed without `npm run generate` fails here);
# - the package builds with tsc to dist/, and `tsc --strict --noEmit` type-checks the package and its tests (whose
#   `@ts-expect-error` lines prove wrong verdicts are compile errors);
# - node's own test runner drives `approval-resume` (a fresh database, migrate, clients add, serve on a free loopback
#   port with WEBHOOK_ALLOW_PRIVATE_ADDRESSES=true, a loopback tool executor) through the built package, imported by
#   its name as a user would: users, registration, the inbox, decisions whole and per call with an edit, the model
#   input, turns, the feed with a file cursor across a restart of the reader, webhooks the service signed;
# - the AI SDK adapter (`approval-resume/ai-sdk`, docs/design.md §16) with the SDK's own mock model (`ai/test`): a
#   write tool suspends the run, a denial reaches the model as `execution-denied` with the exact ADR-200 text, an
#   approval lets the SDK run the tool once and the adapter post its result, which the audit shows, a restart after
#   the results were posted runs nothing again, and a second approval request appends a turn;
# - examples/ai-sdk-worker type-checks with `tsc --strict` against the built package (its own pinned packages,
#   `npm ci` into examples/ai-sdk-worker/node_modules, the package itself linked from clients/typescript).
#
# CI runs it after the Rust tests, which build the binary; locally: `cargo build --bin approval-resume && bash
# tests/typescript-client/run.sh`. Needs Node.js 20+ with npm and the npm registry (the packages are pinned in
# clients/typescript/package-lock.json and installed with `npm ci` into clients/typescript/node_modules), Postgres
# as for the API tests, and `createdb`/`dropdb`. APPROVAL_RESUME_BIN overrides the binary, POSTGRES_ADMIN_URL the
# server. The service's logs are left in target/typescript-client/logs/.
set -euo pipefail

cd "$(dirname "$0")/../.."
package=clients/typescript

step() {
    printf '\n==> %s\n' "$*"
}

node -e 'process.exit(Number(process.versions.node.split(".")[0]) >= 20 ? 0 : 1)' ||
    { echo "Node.js 20 or newer is needed, $(command -v node || echo 'no node') is $(node --version 2>/dev/null)" >&2; exit 1; }

export APPROVAL_RESUME_BIN="${APPROVAL_RESUME_BIN:-$PWD/target/debug/approval-resume}"
if [ ! -x "$APPROVAL_RESUME_BIN" ]; then
    echo "no binary at $APPROVAL_RESUME_BIN: cargo build --bin approval-resume first" >&2
    exit 1
fi

step "Packages from $package/package-lock.json (npm ci)"
# `npm ci` starts from an empty node_modules each time; a rerun with the same lock file keeps what the last one put.
stamp="$package/node_modules/.installed-package-lock.json"
if cmp -s "$package/package-lock.json" "$stamp"; then
    echo "already installed from this lock file"
else
    # --ignore-scripts: the package's own `prepare` (a build) runs below, as its own step.
    (cd "$package" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error)
    cp "$package/package-lock.json" "$stamp"
fi

cd "$package"
step "Generated types held to openapi.yaml (openapi-typescript $(node_modules/.bin/openapi-typescript --version | tr -dc '0-9.'))"
node scripts/generated-types.mjs --check

step "Build to dist/, then tsc $(node_modules/.bin/tsc --version | tr -dc '0-9.') --strict --noEmit over the package and its tests"
rm -rf dist build-test
# The machine is small: the builds only emit (--noCheck), and the one type check covers src/ and test/ together
# (tsconfig.check.json; the tests import the package by its name, i.e. through dist/'s declarations and the
# package's exports map). `npm run build` on its own checks as it builds.
node_modules/.bin/tsc -p tsconfig.json --noCheck
node_modules/.bin/tsc -p tsconfig.check.json --strict --noEmit
node_modules/.bin/tsc -p tsconfig.test.json --noCheck
echo "the package and its tests type-check"

step "examples/ai-sdk-worker: tsc --strict against the built package"
example=../../examples/ai-sdk-worker
example_stamp="$example/node_modules/.installed-package-lock.json"
if ! cmp -s "$example/package-lock.json" "$example_stamp"; then
    (cd "$example" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error)
    cp "$example/package-lock.json" "$example_stamp"
fi
"$example/node_modules/.bin/tsc" -p "$example/tsconfig.json" --strict --noEmit
echo "the example type-checks"

step "Tests with node --test against $APPROVAL_RESUME_BIN"
# One process per test file, one after another: each starts its own service and database, and the machine is small.
node --test --test-concurrency=1 --test-timeout=60000 --test-reporter=spec build-test/*.test.js
