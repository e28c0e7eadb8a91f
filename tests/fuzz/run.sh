#!/usr/bin/env bash
# Fuzzes the HTTP surface against its contract: Schemathesis (tests/fuzz/requirements.txt) generates valid and
# invalid requests for every operation of openapi.yaml and sends them to the real release binary. It proves that,
# for this seed's requests, the service never answers 5xx to bad input, and that every answer has a documented
# status, content type, headers and body shape (`--checks all`: also that requests without a valid key are
# refused, that bodies the spec refuses are rejected and bodies it takes are not, and that undocumented methods
# answer 405). A second, shorter pass aims the run view and the model input at a run registered in a native format
# (docs/design.md §14, tests/fixtures/native/anthropic.json) and denied, so `?format=` meets a transcript the other
# formats cannot represent. It fails on any failure Schemathesis reports and on any panic in the service's log.
#
# Run it from anywhere: `bash tests/fuzz/run.sh` (a few minutes on 2 cores, after the release build). Needs what
# the tests need (PostgreSQL on 127.0.0.1:5432 for the user `postgres` without a password, Rust), `psql`, `curl`,
# and Python 3.11+ with venv and PyPI on the first run (the venv is kept at target/fuzz-venv).
# Knobs: FUZZ_SEED (default 20261203), FUZZ_MAX_EXAMPLES per operation (default 100), FUZZ_ADMIN_URL (the
# maintenance database the private one is created from), PYTHON. The service log and a JUnit report are left in
# target/fuzz-report/. The run has a database of its own, dropped on exit, and stops the service on exit.
set -euo pipefail

cd "$(dirname "$0")/../.."

venv=target/fuzz-venv
admin_url="${FUZZ_ADMIN_URL:-postgres://postgres@127.0.0.1:5432/postgres}"
seed="${FUZZ_SEED:-20261203}"
max_examples="${FUZZ_MAX_EXAMPLES:-100}"
database="approval_resume_fuzz_$$"
database_url="${admin_url%/*}/${database}"
report=target/fuzz-report
service_log="$report/service.log"
binary=target/release/approval-resume
# The seeded run every operation on /v1/runs/{id} is aimed at, so that the fuzz reaches past 404. Its pending call is
# the one of the spec's examples, so the examples phase denies it with the example decision (the digest matches)
# and appends the example turn, and the fuzz that follows meets a run that has been through that.
run_id=f0220000-0000-4000-8000-000000000001
# Cancelling and completing end a run for good: they get a run of their own, so the one above stays alive.
final_run_id=f0220000-0000-4000-8000-000000000002
# A run in a native format (docs/design.md §14, tests/fixtures/native/anthropic.json: thinking blocks), denied once: a
# second pass aims the run view and the model input at it, so `?format=` meets a transcript that the other formats
# cannot represent (422 format_not_representable must be documented).
native_run_id=f0220000-0000-4000-8000-000000000003
owner_uid=7

service_pid=""

cleanup() {
    local status=$?
    if [[ -n "$service_pid" ]] && kill -0 "$service_pid" 2>/dev/null; then
        kill -TERM "$service_pid" 2>/dev/null || true
        wait "$service_pid" 2>/dev/null || true
    fi
    psql "$admin_url" -qAtc "drop database if exists \"$database\" with (force)" >/dev/null 2>&1 ||
        echo "tests/fuzz: could not drop the database $database" >&2
    exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

step() {
    printf '\n==> %s\n' "$*"
}

step "Python venv with Schemathesis ($venv)"
source tests/python-venv.sh
python_venv "$venv" tests/fuzz/requirements.txt
"$venv/bin/schemathesis" --version

step "Release build"
cargo build --release --locked

step "Private database $database"
psql "$admin_url" -qAtc "create database \"$database\"" >/dev/null

# Only the settings below reach the binary: a variable exported in the caller's shell must not change the run.
unset DATABASE_URL LISTEN_ADDR PRIVACY_LEVEL DATABASE_POOL_SIZE DATABASE_ACQUIRE_TIMEOUT_MS \
    DATABASE_STATEMENT_TIMEOUT_MS REQUEST_TIMEOUT_MS MAX_BODY_BYTES SHUTDOWN_GRACE_SECS RECOVERY_INTERVAL_SECS \
    RESUME_LEASE_MARGIN_MS TOOLS_CONFIG RETENTION_DAYS PURGE_INTERVAL_SECS LOG_FORMAT LOG_LEVEL
export DATABASE_URL="$database_url" LOG_FORMAT=json

step "A client with every scope"
key="$("$binary" clients add fuzz \
    --scope users:write --scope runs:write --scope runs:read --scope decisions:write \
    --scope decisions:anonymous --scope approvals:read --scope metrics:read --scope events:read \
    --scope webhooks:write 2>/dev/null)"
[[ "$key" == ar_* ]] || {
    echo "tests/fuzz: clients add printed no key" >&2
    exit 1
}

step "The service"
mkdir -p "$report"
rm -f "$service_log"
# Port 0: the kernel picks a free port, which the service logs; no window in which another process can take it.
LISTEN_ADDR=127.0.0.1:0 SHUTDOWN_GRACE_SECS=5 "$binary" serve >/dev/null 2>"$service_log" </dev/null &
service_pid=$!
address=""
for _ in $(seq 1 100); do
    address="$(grep -o '"address":"[^"]*"' "$service_log" 2>/dev/null | head -n 1 | cut -d '"' -f 4 || true)"
    [[ -n "$address" ]] && break
    kill -0 "$service_pid" 2>/dev/null || {
        echo "tests/fuzz: the service exited; its log:" >&2
        cat "$service_log" >&2
        exit 1
    }
    sleep 0.1
done
[[ -n "$address" ]] || {
    echo "tests/fuzz: the service did not say where it listens; its log:" >&2
    cat "$service_log" >&2
    exit 1
}
base="http://$address"
curl -fsS "$base/readyz" >/dev/null
echo "serving on $base"

step "Seed: user $owner_uid and runs $run_id, $final_run_id waiting for approval"
api() {
    local method=$1 path=$2 body=$3
    curl -fsS -X "$method" "$base$path" -H "Authorization: Bearer $key" -H 'Content-Type: application/json' \
        -d "$body" >/dev/null
}
api PUT "/v1/users/$owner_uid" '{"username": "ada", "is_admin": false, "can_approve_others": false, "disabled": false}'
register() {
    api POST /v1/runs "$(
        cat <<EOF
{
  "id": "$1",
  "owner_uid": $owner_uid,
  "messages": [
    {"role": "user", "content": "Write a meta description for page 12."},
    {"role": "assistant", "content": null, "tool_calls": [{
      "id": "call_1", "type": "function",
      "function": {"name": "update_page_metadata", "arguments": "{\"page\": 12, \"description\": \"Fresh bread daily.\"}"}
    }]}
  ],
  "tools": [{"name": "update_page_metadata", "effect": "write"}]
}
EOF
    )"
}
register "$run_id"
register "$final_run_id"
native="$(cat tests/fixtures/native/anthropic.json)"
native_run="$(curl -fsS -X POST "$base/v1/runs" -H "Authorization: Bearer $key" -H 'Content-Type: application/json' \
    -d "{\"id\":\"$native_run_id\",\"owner_uid\":$owner_uid,${native:1}")"
native_digest="$("$venv/bin/python" -c 'import json, sys; print(json.load(sys.stdin)["turn"]["digest"])' <<<"$native_run")"
api POST "/v1/runs/$native_run_id/decision" \
    "{\"approved\": false, \"decider_uid\": $owner_uid, \"turn_digest\": \"$native_digest\"}"

step "Schemathesis: seed $seed, at most $max_examples examples per operation"
# tests/fuzz/schemathesis.toml reads these. Hypothesis keeps its caches under target/, not in the work tree.
export FUZZ_RUN_ID="$run_id" FUZZ_FINAL_RUN_ID="$final_run_id" FUZZ_HOOKS=tests/fuzz/hooks.py
export HYPOTHESIS_STORAGE_DIRECTORY="$PWD/target/fuzz-hypothesis"
started=$SECONDS
status=0
"$venv/bin/schemathesis" --config-file tests/fuzz/schemathesis.toml run openapi.yaml \
    --url "$base" \
    --header "Authorization: Bearer $key" \
    --checks all \
    --seed "$seed" \
    --max-examples "$max_examples" \
    --generation-database none \
    --workers 1 \
    --request-timeout 30 \
    --no-color \
    --report junit --report-junit-path "$report/junit.xml" ||
    status=$?
echo "schemathesis finished in $((SECONDS - started)) s with exit code $status"

step "Schemathesis on the native run $native_run_id: the run view and the model input"
started=$SECONDS
FUZZ_NATIVE_RUN_ID="$native_run_id" "$venv/bin/schemathesis" --config-file tests/fuzz/schemathesis-native.toml \
    run openapi.yaml \
    --url "$base" \
    --header "Authorization: Bearer $key" \
    --include-operation-id getRun \
    --include-operation-id getModelInput \
    --checks all \
    --seed "$seed" \
    --max-examples "$max_examples" \
    --generation-database none \
    --workers 1 \
    --request-timeout 30 \
    --no-color \
    --report junit --report-junit-path "$report/junit-native.xml" ||
    status=1
echo "schemathesis (native run) finished in $((SECONDS - started)) s"

if grep -q 'panicked' "$service_log"; then
    echo "tests/fuzz: the service panicked; see $service_log:" >&2
    grep 'panicked' "$service_log" >&2
    status=1
fi
exit "$status"
