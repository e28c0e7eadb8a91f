#!/usr/bin/env bash
# Proves that openapi.yaml is a spec the common tools take as it is:
# - Redocly CLI lints it with every recommended rule as an error (tests/clients/redocly.yaml; the places where a rule
#   does not apply are listed, with the reason, in tests/clients/.redocly.lint-ignore.yaml);
# - openapi-typescript generates its types without a warning, and `tsc --strict` type-checks tests/clients/check.ts
#   against them (every model-input union narrows on its discriminator; a wrong value is a compile error);
# - openapi-python-client generates a client with no warning but the one listed below, and tests/clients/walk.py
#   drives the real service with it: register, read, the inbox, deny, approve (through the example echo executor),
#   the model input in all three formats, the events and a 409, each answer parsed into the model it documents.
#
# Run it from anywhere: `bash tests/clients/run.sh` (about a minute once the debug build and the packages are in
# place). Needs what the tests need (PostgreSQL on 127.0.0.1:5432 for the user `postgres` without a password,
# Rust), `psql`, `curl`, Node.js 20.19+ with npm and the npm registry, and Python 3.11+ with venv and PyPI. The
# tools are pinned: tests/clients/package.json and package-lock.json (installed with `npm ci` into
# target/clients/node), tests/clients/requirements.txt (the venv is kept at target/clients-venv). The generated
# code and the logs are left in target/clients/. The run has a database of its own, dropped on exit, and stops
# the service and the executor on exit. Knobs: CLIENTS_ADMIN_URL (the maintenance database the private one is
# created from), PYTHON.
set -euo pipefail

cd "$(dirname "$0")/../.."

work=target/clients
node="$work/node"
bin="$node/node_modules/.bin"
venv=target/clients-venv
admin_url="${CLIENTS_ADMIN_URL:-postgres://postgres@127.0.0.1:5432/postgres}"
database="approval_resume_clients_$$"
database_url="${admin_url%/*}/${database}"
service_log="$work/service.log"
executor_log="$work/executor.log"
# The debug build: CI's build step has already made both, so this check adds no build of its own there.
binary=target/debug/approval-resume
executor=target/debug/examples/echo_executor

service_pid=""
executor_pid=""

stop() {
    local pid=$1
    if [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null; then
        kill -TERM "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    fi
}

cleanup() {
    local status=$?
    stop "$service_pid"
    stop "$executor_pid"
    psql "$admin_url" -qAtc "drop database if exists \"$database\" with (force)" >/dev/null 2>&1 ||
        echo "tests/clients: could not drop the database $database" >&2
    exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

step() {
    printf '\n==> %s\n' "$*"
}

fail() {
    echo "tests/clients: $*" >&2
    exit 1
}

# Waits until `log` holds a line matching `pattern` and prints the first match; `pid` must stay alive meanwhile.
wait_for_line() {
    local pid=$1 log=$2 pattern=$3 found=""
    for _ in $(seq 1 100); do
        found="$(grep -o "$pattern" "$log" 2>/dev/null | head -n 1 || true)"
        [[ -n "$found" ]] && break
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    [[ -n "$found" ]] || {
        echo "tests/clients: no line matching $pattern in $log:" >&2
        cat "$log" >&2
        return 1
    }
    printf '%s\n' "$found"
}

rm -rf "$work/typescript" "$work/python" "$work"/*.log
mkdir -p "$work/typescript" "$work/python"

step "Node tools from tests/clients/package-lock.json (npm ci)"
# Redocly CLI 2 needs Node.js 20.19 or newer (Debian 12's own nodejs package is 18; the CI machines come with 20).
node -e 'const [major, minor] = process.versions.node.split(".").map(Number);
    process.exit(major > 20 || (major === 20 && minor >= 19) ? 0 : 1)' ||
    fail "Node.js 20.19 or newer is needed, $(command -v node || echo 'no node') is $(node --version 2>/dev/null)"
mkdir -p "$node"
# `npm ci` starts from an empty node_modules each time; a rerun with the same lock file keeps what the last one put.
if cmp -s tests/clients/package-lock.json "$node/installed-package-lock.json" && [[ -x "$bin/redocly" ]]; then
    echo "already installed from this lock file"
else
    rm -f "$node/installed-package-lock.json"
    cp tests/clients/package.json tests/clients/package-lock.json "$node/"
    (cd "$node" && npm ci --no-audit --no-fund --loglevel=error)
    cp tests/clients/package-lock.json "$node/installed-package-lock.json"
fi
# No usage reports and no update notices: CI reaches only the package registries.
export REDOCLY_TELEMETRY=off REDOCLY_SUPPRESS_UPDATE_NOTICE=true

step "Lint: Redocly CLI $("$bin/redocly" --version), every recommended rule an error"
"$bin/redocly" lint openapi.yaml --config tests/clients/redocly.yaml --format stylish

step "TypeScript: openapi-typescript $("$bin/openapi-typescript" --version | tr -dc '0-9.'), then tsc $("$bin/tsc" --version | tr -dc '0-9.') --strict"
"$bin/openapi-typescript" openapi.yaml --output "$work/typescript/api.d.ts" 2>&1 | tee "$work/openapi-typescript.log"
# It reports what it could not represent with a warning sign and still exits 0.
if grep -q '⚠' "$work/openapi-typescript.log"; then
    fail "openapi-typescript warned (above)"
fi
cp tests/clients/check.ts "$work/typescript/"
"$bin/tsc" --strict --noEmit --target es2022 --module nodenext --moduleResolution nodenext \
    "$work/typescript/check.ts"
echo "check.ts type-checks against the generated types"

step "Python: openapi-python-client (venv $venv)"
source tests/python-venv.sh
python_venv "$venv" tests/clients/requirements.txt
generator_log="$work/openapi-python-client.log"
"$venv/bin/openapi-python-client" generate --path openapi.yaml --config tests/clients/openapi-python-client.yaml \
    --meta none --output-path "$work/python/approval_resume_client" >"$generator_log" 2>&1 ||
    fail "openapi-python-client failed; see $generator_log: $(cat "$generator_log")"
# The one warning allowed: GET /openapi.yaml answers YAML, which the generator does not parse, so the generated
# function hands back the raw bytes (`content`) and no parsed body. The document is right to say YAML: that is what
# the route serves. Any other warning (a schema it could not process, an answer it would drop) fails the check.
unexpected="$(grep -E 'WARNING|Unable to|Cannot parse|Failure to process' "$generator_log" |
    grep -v -e '^WARNING parsing GET /openapi.yaml within ops\.$' \
        -e '(Unsupported content_type application/yaml), response will be omitted' || true)"
if [[ -n "$unexpected" ]]; then
    cat "$generator_log" >&2
    fail "openapi-python-client warned: $unexpected"
fi
export PYTHONPATH="$PWD/$work/python"
"$venv/bin/python" -c 'import approval_resume_client.api.decisions.decide, approval_resume_client.models'
echo "the generated client imports, decide included"

step "Debug build of the service and the example echo executor"
cargo build --locked --bin approval-resume --example echo_executor

step "Private database $database, a client key, the executor and the service"
psql "$admin_url" -qAtc "create database \"$database\"" >/dev/null
# Only the settings below reach the binary: a variable exported in the caller's shell must not change the run.
unset DATABASE_URL LISTEN_ADDR PRIVACY_LEVEL DATABASE_POOL_SIZE DATABASE_ACQUIRE_TIMEOUT_MS \
    DATABASE_STATEMENT_TIMEOUT_MS REQUEST_TIMEOUT_MS MAX_BODY_BYTES SHUTDOWN_GRACE_SECS RECOVERY_INTERVAL_SECS \
    RESUME_LEASE_MARGIN_MS TOOLS_CONFIG RETENTION_DAYS PURGE_INTERVAL_SECS LOG_FORMAT LOG_LEVEL
export DATABASE_URL="$database_url" LOG_FORMAT=json
key="$("$binary" clients add clients-check \
    --scope users:write --scope runs:write --scope runs:read --scope decisions:write --scope approvals:read \
    2>/dev/null)"
[[ "$key" == ar_* ]] || fail "clients add printed no key"

# Port 0 for both: the kernel picks free ports, which each logs; no window in which another process takes one.
"$executor" 127.0.0.1:0 >/dev/null 2>"$executor_log" </dev/null &
executor_pid=$!
executor_url="$(wait_for_line "$executor_pid" "$executor_log" 'http://[0-9.:]*')"
printf '[tools.update_page_metadata]\nurl = "%s/tools/update_page_metadata"\neffect = "write"\n' "$executor_url" \
    >"$work/tools.toml"

LISTEN_ADDR=127.0.0.1:0 SHUTDOWN_GRACE_SECS=5 TOOLS_CONFIG="$work/tools.toml" "$binary" serve \
    >/dev/null 2>"$service_log" </dev/null &
service_pid=$!
address="$(wait_for_line "$service_pid" "$service_log" '"address":"[^"]*"' | cut -d '"' -f 4)"
base="http://$address"
curl -fsS "$base/readyz" >/dev/null
echo "executor at $executor_url, service at $base"

step "Walk the service with the generated Python client"
"$venv/bin/python" tests/clients/walk.py "$base" "$key"

if grep -q 'panicked' "$service_log"; then
    grep 'panicked' "$service_log" >&2
    fail "the service panicked; see $service_log"
fi
