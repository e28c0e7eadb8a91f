#!/usr/bin/env bash
# Validates the golden model inputs (tests/golden/, written by the Rust test tests/api/formats.rs) against the
# official openai and anthropic Python SDK types. CI runs it after the Rust tests; locally: `bash tests/sdk/run.sh`.
# Needs Python 3.11+ with venv (Debian: python3-venv) and access to PyPI on the first run; PYTHON picks the interpreter.
set -euo pipefail

cd "$(dirname "$0")/../.."

venv=target/sdk-venv
python="${PYTHON:-python3}"

"$python" -c 'import sys; sys.exit(sys.version_info < (3, 11))' || {
    echo "tests/sdk: Python 3.11 or newer is needed, $python is $("$python" --version 2>&1)" >&2
    exit 1
}

# Reuse the venv, unless it is broken (e.g. the interpreter it was made from is gone).
if ! "$venv/bin/python" -c '' >/dev/null 2>&1; then
    rm -rf "$venv"
    "$python" -m venv "$venv"
fi

"$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r tests/sdk/requirements.txt
"$venv/bin/python" tests/sdk/validate_formats.py
