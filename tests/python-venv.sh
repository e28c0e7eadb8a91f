# Sourced by tests/sdk/run.sh and tests/fuzz/run.sh: `python_venv DIR REQUIREMENTS` makes (or reuses) a venv at DIR
# with the pinned REQUIREMENTS installed from PyPI. Needs Python 3.11+ with venv; PYTHON picks the interpreter.

python_venv() {
    local venv=$1 requirements=$2
    local python="${PYTHON:-python3}"
    "$python" -c 'import sys; sys.exit(sys.version_info < (3, 11))' || {
        echo "$requirements: Python 3.11 or newer is needed, $python is $("$python" --version 2>&1)" >&2
        return 1
    }
    # Reuse the venv, unless it is broken (e.g. the interpreter it was made from is gone).
    if ! "$venv/bin/python" -c '' >/dev/null 2>&1; then
        rm -rf "$venv"
        "$python" -m venv "$venv"
    fi
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$requirements"
}
