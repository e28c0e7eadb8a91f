#!/usr/bin/env bash
# The model inputs against the providers' official SDKs (PyPI, pinned in tests/sdk/requirements.txt):
# - tests/sdk/validate_formats.py validates the golden model inputs (tests/golden/, written by the Rust test
#   tests/api/formats.rs) against the openai and anthropic request types;
# - tests/sdk/native_sdks.py registers runs in each native format (docs/design.md §14) with the debug binary on a
#   private database, decides them, and sends each resumed input through the anthropic, openai and google-genai
#   clients to a local stand-in that checks each provider's continuation rules.
# CI runs it after the build and the Rust tests; locally: `bash tests/sdk/run.sh`. Needs Python 3.11+ with venv
# (Debian: python3-venv), PyPI on the first run, PostgreSQL on 127.0.0.1:5432 (user `postgres`, trust) and `psql`.
# PYTHON picks the interpreter, SDK_ADMIN_URL the maintenance database, SDK_BINARY the service binary. The last line
# adds both scripts' counts: `sdk: N passed, M failed`.
set -euo pipefail

cd "$(dirname "$0")/../.."

venv=target/sdk-venv
binary="${SDK_BINARY:-target/debug/approval-resume}"
source tests/python-venv.sh
python_venv "$venv" tests/sdk/requirements.txt
if [[ -z "${SDK_BINARY:-}" ]]; then
    # CI's build step has made it already; then this builds nothing.
    cargo build --locked --bin approval-resume
fi

passed=0
failed=0
status=0
for script in validate_formats.py native_sdks.py; do
    printf '\n==> tests/sdk/%s\n' "$script"
    args=()
    [[ "$script" == native_sdks.py ]] && args=(--binary "$binary")
    log="$(mktemp)"
    "$venv/bin/python" "tests/sdk/$script" "${args[@]}" | tee "$log" || status=1
    counts="$(tail -n 1 "$log")"
    rm -f "$log"
    if [[ "$counts" =~ ^([0-9]+)\ passed,\ ([0-9]+)\ failed$ ]]; then
        passed=$((passed + BASH_REMATCH[1]))
        failed=$((failed + BASH_REMATCH[2]))
    else
        echo "tests/sdk/$script did not finish with its counts" >&2
        failed=$((failed + 1))
        status=1
    fi
done
echo "sdk: $passed passed, $failed failed"
exit "$status"
