#!/usr/bin/env bash
# Validates the golden model inputs (tests/golden/, written by the Rust test tests/api/formats.rs) against the
# official openai and anthropic Python SDK types. CI runs it after the Rust tests; locally: `bash tests/sdk/run.sh`.
# Needs Python 3.11+ with venv (Debian: python3-venv) and access to PyPI on the first run; PYTHON picks the interpreter.
set -euo pipefail

cd "$(dirname "$0")/../.."

venv=target/sdk-venv
source tests/python-venv.sh
python_venv "$venv" tests/sdk/requirements.txt
"$venv/bin/python" tests/sdk/validate_formats.py
