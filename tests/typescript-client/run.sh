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
# - the checked-in dist/ is what tsc builds from src/ now (scripts/dist.mjs), so an install from the repository needs
#   no build;
# - the adapters (docs/design.md §15, §16) with each framework's own scripted model: `approval-resume/ai-sdk` on
#   `ai` 7 (`MockLanguageModelV4` of `ai/test`, generateText and streamText) and `approval-resume/openai-agents` on
#   `@openai/agents` (`ScriptedModel` of `@openai/agents/testing`): a denial reaches the model with the exact
#   ADR-200 text and the tool never runs, an approval runs the tool once under the worker's claim with its
#   idempotency key, an edited approval runs it once with the edited arguments and the model reads the edit note, a
#   blank line, the output, a failing tool posts `Error: tool "…" failed.`, two workers resuming at once run it
#   once and the other reports the claim, and a new approval request appends a turn;
# - examples/ai-sdk-worker and examples/openai-agents-worker type-check with `tsc --strict` against the package,
#   installed in each from the repository as a user installs it (a packed copy; their own pinned packages, `npm ci`).
# The locked releases are tested here; tests/typescript-client/matrix.sh adds the oldest and newest of each
# declared peer range.
#
# CI runs it after the Rust tests, which build the binary; locally: `cargo build --bin approval-resume && bash
# tests/typescript-client/run.sh`. Node.js: the pinned LTS from npm (tests/typescript-client/node.sh); npm and the
# npm registry (the packages are pinned in clients/typescript/package-lock.json and installed with `npm ci` into
# clients/typescript/node_modules), Postgres as for the API tests, and `createdb`/`dropdb`. APPROVAL_RESUME_BIN
# overrides the binary, POSTGRES_ADMIN_URL the server. The service's logs are left in target/typescript-client/logs/.
set -euo pipefail

cd "$(dirname "$0")/../.."
package=clients/typescript

step() {
    printf '\n==> %s\n' "$*"
}

step "Node.js"
# shellcheck source=tests/typescript-client/node.sh
source tests/typescript-client/node.sh
use_current_node

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
    # --ignore-scripts: nothing of the packages needs a script, and none runs unasked.
    (cd "$package" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error)
    cp "$package/package-lock.json" "$stamp"
fi

cd "$package"
step "Generated types held to openapi.yaml (openapi-typescript $(node_modules/.bin/openapi-typescript --version | tr -dc '0-9.'))"
node scripts/generated-types.mjs --check

step "dist/ held to src/ (it is checked in, so an install from the repository builds nothing)"
node scripts/dist.mjs --check

step "tsc $(node_modules/.bin/tsc --version | tr -dc '0-9.') --strict --noEmit over the package and its tests"
rm -rf build-test
# The machine is small: the one type check covers src/ and test/ together (tsconfig.check.json; the tests import the
# package by its name, i.e. through dist/'s declarations and the package's exports map), and the test build only
# emits (--noCheck).
node_modules/.bin/tsc -p tsconfig.check.json --strict --noEmit
node_modules/.bin/tsc -p tsconfig.test.json --noCheck
echo "the package and its tests type-check"

step "The examples: tsc --strict against the package installed from the repository as a user installs it"
# Their package.json names the package `file:../../clients/typescript` and their .npmrc sets install-links, so npm
# installs a packed copy (dist/ and src/, no build), which resolves the framework from the example, not from
# clients/typescript/node_modules. `npm ci` installs afresh each time, so the copy is of the tree as it is.
for example in ../../examples/ai-sdk-worker ../../examples/openai-agents-worker; do
    (cd "$example" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error)
    "$example/node_modules/.bin/tsc" -p "$example/tsconfig.json" --strict --noEmit
    echo "$(basename "$example") type-checks"
done

step "Tests with node --test against $APPROVAL_RESUME_BIN"
# One process per test file, one after another: each starts its own service and database, and the machine is small.
node --test --test-concurrency=1 --test-timeout=60000 --test-reporter=spec build-test/*.test.js
