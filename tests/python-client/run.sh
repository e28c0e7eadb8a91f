#!/usr/bin/env bash
# Tests clients/python (the Python client package, docs/design.md §16) against the real service: installs the package
# from its folder (built by its pinned backend, hatchling) into a venv with the locked versions of
# tests/python-client/requirements.txt, type-checks it and the tests with `mypy --strict`, then runs pytest: the spec tests hold
# the package to openapi.yaml, the others start the binary on a fresh database (conftest.py) and walk it.
#
# Run it from anywhere: `bash tests/python-client/run.sh`. Needs Python 3.11+ with venv and PyPI on the first run,
# `psql`, PostgreSQL on 127.0.0.1:5432 for the user `postgres` without a password, and the debug binary
# (APPROVAL_RESUME_BIN, default target/debug/approval-resume; CI's build step makes it). The venv is kept at
# target/python-client-venv. Knobs: APPROVAL_RESUME_BIN, PYTHON_CLIENT_ADMIN_URL (the maintenance database the
# test database is created from), PYTHON.
set -euo pipefail

cd "$(dirname "$0")/../.."

venv=target/python-client-venv
source tests/python-venv.sh
python_venv "$venv" tests/python-client/requirements.txt
# Not editable and without dependencies: the tests import the package as pip installs it, and the lock above is the
# only source of its dependencies (`pip check` proves they satisfy the package's own requirements).
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps --force-reinstall ./clients/python
"$venv/bin/python" -m pip check --disable-pip-version-check

export MYPY_CACHE_DIR="$PWD/target/python-client-mypy-cache"
# The package, strictly; then the tests, as a user's code: against the installed package and its py.typed. The three
# framework adapters import their frameworks, which this venv does not have: tests/adapters/run.sh checks them.
(cd clients/python && "../../$venv/bin/mypy" --strict --no-incremental \
    --exclude 'adapters/(openai_agents|pydantic_ai|langgraph)\.py$' src/approval_resume)
(cd tests/python-client && "../../$venv/bin/mypy" --strict --no-incremental --explicit-package-bases .)

export APPROVAL_RESUME_BIN="${APPROVAL_RESUME_BIN:-$PWD/target/debug/approval-resume}"
export PYTHONDONTWRITEBYTECODE=1
cd tests/python-client
"../../$venv/bin/python" -m pytest -p no:cacheprovider -q
