#!/usr/bin/env bash
# Tests the framework adapters of clients/python (approval_resume.adapters, docs/design.md §16) against the real
# service: installs the package from its folder with the locked versions of tests/adapters/requirements.txt (the
# OpenAI Agents SDK, Pydantic AI, LangChain and LangGraph included), type-checks the adapters, the examples and the
# tests with `mypy --strict`, then runs pytest: each framework, driven by its own scripted test model (no model key),
# suspends on a write tool, reads a denial's exact text, runs an approved (and an edited) call once in the worker, two
# workers resuming at once run it once (the other reports the claim), and an example worker killed while its tool runs
# leaves its claim to lapse (conftest.py starts the binary on fresh databases, one with a 5-second lease).
#
# `--matrix` then tests the adapters again against the oldest and the newest release of each range the package's
# extras declare (clients/python/pyproject.toml), resolved when it runs, each set in a venv of its own
# (target/adapters-matrix-{oldest,newest}): a release that breaks an adapter fails the run. The matrix runs the tests
# only (mypy checks the locked set), less those marked `lease` (they wait on the service's lease, whatever the
# release).
#
# Run it from anywhere: `bash tests/adapters/run.sh [--matrix]`. Needs Python 3.11+ with venv and PyPI on the first
# run, `psql`, PostgreSQL on 127.0.0.1:5432 for the user `postgres` without a password, and the debug binary
# (APPROVAL_RESUME_BIN, default target/debug/approval-resume). The venv is kept at target/adapters-venv. Knobs:
# APPROVAL_RESUME_BIN, ADAPTERS_ADMIN_URL (the maintenance database the test database is created from), PYTHON.
set -euo pipefail

cd "$(dirname "$0")/../.."

matrix=false
case "${1:-}" in
    --matrix) matrix=true ;;
    "") ;;
    *) echo "usage: $0 [--matrix]" >&2; exit 2 ;;
esac

export APPROVAL_RESUME_BIN="${APPROVAL_RESUME_BIN:-$PWD/target/debug/approval-resume}"
export PYTHONDONTWRITEBYTECODE=1
# Neither framework may reach a model provider or its tracing service: the scripted models need no key.
export OPENAI_AGENTS_DISABLE_TRACING=1
unset OPENAI_API_KEY

# pytest in tests/adapters with the venv's Python, and any further pytest arguments.
run_tests() {
    local venv=$1
    shift
    (cd tests/adapters && "../../$venv/bin/python" -m pytest -p no:cacheprovider -q "$@")
}

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

echo "adapters: the locked releases (tests/adapters/requirements.txt)"
run_tests "$venv"

if ! $matrix; then
    exit 0
fi

# The requirement of each extra as pyproject.toml declares it, one a line ("name>=min,<max"), and its oldest release
# ("name==min"): every range has a lower bound, so "oldest" is a release the adapter claims to work with.
python="${PYTHON:-python3}"
ranges=$("$python" - <<'EOF'
import re, tomllib
with open("clients/python/pyproject.toml", "rb") as file:
    extras = tomllib.load(file)["project"]["optional-dependencies"]
for requirements in extras.values():
    for requirement in requirements:
        if not re.fullmatch(r"[A-Za-z0-9_.-]+>=[0-9][^,<>=]*,<[0-9][^,]*", requirement):
            raise SystemExit(f"pyproject.toml: {requirement!r} is not of the form name>=oldest,<bound")
        print(requirement)
EOF
)
# Test-only tools, not the frameworks': pytest, and the LangGraph example's checkpointer.
tools=(pytest langgraph-checkpoint-sqlite)
# A release past a declared bound (the newest on PyPI, when the range stops short of it): a line "name newest bound"
# for each requirement whose range leaves its newest release out. A range must not lag the releases the adapters
# pass: such releases are tested too (`beyond`, below), and when they pass, the run fails until the bound is widened.
beyond=$("$python" - "$ranges" <<'EOF'
import json, re, sys, urllib.request

def release(text):
    return tuple(int(part) for part in re.match(r"[0-9]+(?:\.[0-9]+)*", text).group(0).split("."))

for requirement in sys.argv[1].splitlines():
    name, bound = re.fullmatch(r"([A-Za-z0-9_.-]+)>=[^,]+,<(.+)", requirement).groups()
    # PyPI's JSON API: `info.version` is the newest release that is not a prerelease.
    with urllib.request.urlopen(f"https://pypi.org/pypi/{name}/json", timeout=60) as answer:
        newest = json.load(answer)["info"]["version"]
    if release(newest) >= release(bound):
        print(name, newest, bound)
EOF
)
ends=(oldest newest)
if [ -n "$beyond" ]; then
    ends+=(beyond)
fi
for end in "${ends[@]}"; do
    matrix_venv="target/adapters-matrix-$end"
    rm -rf "$matrix_venv"
    "$python" -m venv "$matrix_venv"
    wanted=()
    while read -r requirement; do
        if [ "$end" = oldest ]; then
            wanted+=("${requirement%%>=*}==$(sed -E 's/.*>=([^,]+),.*/\1/' <<<"$requirement")")
        elif [ "$end" = beyond ]; then
            wanted+=("${requirement%%,<*}")
        else
            wanted+=("$requirement")
        fi
    done <<<"$ranges"
    # The newest release of each range, whatever the pip cache holds: --upgrade, and no lock.
    "$matrix_venv/bin/python" -m pip install --quiet --disable-pip-version-check --upgrade \
        "./clients/python" "${wanted[@]}" "${tools[@]}"
    "$matrix_venv/bin/python" -m pip check --disable-pip-version-check
    echo "adapters: the $end release of each range:"
    "$matrix_venv/bin/python" -m pip list --disable-pip-version-check --format=freeze \
        | grep -iE '^(openai-agents|pydantic-ai-slim|langchain|langgraph)=='
    # The tests that wait on a lease prove the service's rule, the same with every release: the locked run has them.
    if [ "$end" != beyond ]; then
        run_tests "$matrix_venv" -m "not lease"
    elif run_tests "$matrix_venv" -m "not lease"; then
        echo "adapters: the releases past the declared bounds pass; widen each bound in clients/python/pyproject.toml" \
            "(and its README's table, docs/design.md §16, TESTING.md) to include them:" >&2
        while read -r name newest bound; do
            echo "  $name $newest (declared <$bound)" >&2
        done <<<"$beyond"
        exit 1
    else
        echo "adapters: the releases past the declared bounds fail the tests above; the bounds stay:" \
            "$(tr '\n' ';' <<<"$beyond")"
    fi
done
