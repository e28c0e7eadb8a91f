#!/usr/bin/env bash
# Tests the framework adapters of clients/python (approval_resume.adapters, docs/design.md §16) against the real
# service: installs the package from its folder with the locked versions of tests/adapters/requirements.txt (the
# OpenAI Agents SDK and Pydantic AI included), type-checks the adapters, the examples and the tests with
# `mypy --strict`, then runs pytest: each framework, driven by its own scripted test model (no model key), suspends
# on a write tool, reads a denial's exact text, runs an approved call once in the worker, and a worker process
# killed between the release and its results is restarted and finishes the run (conftest.py starts the binary on a
# fresh database).
#
# Run it from anywhere: `bash tests/adapters/run.sh`. Needs Python 3.11+ with venv and PyPI on the first run, `psql`,
# PostgreSQL on 127.0.0.1:5432 for the user `postgres` without a password, and the debug binary
# (APPROVAL_RESUME_BIN, default target/debug/approval-resume). The venv is kept at target/adapters-venv. Knobs:
# APPROVAL_RESUME_BIN, ADAPTERS_ADMIN_URL (the maintenance database the test database is created from), PYTHON.
set -euo pipefail

cd "$(dirname "$0")/../.."

venv=target/adapters-venv
source tests/python-venv.sh
python_venv "$venv" tests/adapters/requirements.txt
# Not editable and without dependencies: the lock above is the only source of the package's dependencies and of its
# extras' (`pip check` proves they satisfy what the package asks for).
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps --force-reinstall ./clients/python
"$venv/bin/python" -m pip check --disable-pip-version-check

# One cache, emptied first and shared by the three checks, so the frameworks (large) are analysed once per run.
export MYPY_CACHE_DIR="$PWD/target/adapters-mypy-cache"
rm -rf "$MYPY_CACHE_DIR"
(cd clients/python && "../../$venv/bin/mypy" --strict src/approval_resume/adapters)
"$venv/bin/mypy" --strict examples/python
(cd tests/adapters && "../../$venv/bin/mypy" --strict --explicit-package-bases .)

export APPROVAL_RESUME_BIN="${APPROVAL_RESUME_BIN:-$PWD/target/debug/approval-resume}"
export PYTHONDONTWRITEBYTECODE=1
# Neither framework may reach a model provider or its tracing service: the scripted models need no key.
export OPENAI_AGENTS_DISABLE_TRACING=1
unset OPENAI_API_KEY
cd tests/adapters
"../../$venv/bin/python" -m pytest -p no:cacheprovider -q
