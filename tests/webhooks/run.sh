#!/usr/bin/env bash
# Proves that the service's webhook signatures verify with the Standard Webhooks specification's own Python library:
# a Rust test delivers real events to tests/webhooks/receiver.py, which checks each with `standardwebhooks` from
# PyPI. CI runs it after the Rust tests; locally: `bash tests/webhooks/run.sh`.
# Needs Python 3.11+ with venv (Debian: python3-venv), Postgres as for the API tests, and PyPI on the first run.
set -euo pipefail

cd "$(dirname "$0")/../.."

venv=target/webhooks-venv
source tests/python-venv.sh
python_venv "$venv" tests/webhooks/requirements.txt
WEBHOOKS_PYTHON="$PWD/$venv/bin/python" cargo nextest run --locked --test api --run-ignored only \
    webhooks::real_deliveries_verify_with_the_standardwebhooks_python_library
