#!/usr/bin/env python3
"""Runs the documents' console blocks against the real binary and compares what they print with what they show.

Every ```console block of the documents below (README.md's and docs/integration.md's only under the heading named)
is run as a reader would paste it: each `$ ` line (with the lines that continue it, as bash reads them) in one bash
session per document, in a scratch directory, on a database of its own. What a command prints (standard output and
error together) must be what the document shows under it, with ids, keys, digests, cursors and times matched by
their shape, and a line `…` standing for any lines (the build output of `cargo run`, say).

The session knows `cargo run [--release] [-q] [--example NAME] -- ARGS` and `approval-resume ARGS` as the binary and
example this checkout built (target/debug unless DOCS_PROFILE says otherwise). The documents name the service at
127.0.0.1:8080 and the example executor at 127.0.0.1:9000; both are moved to free ports in the commands and moved
back in what they print, so that nothing else listening there matters. A document that does not start the service
itself is run with one started beforehand, as the document says it should be.

    python3 tests/docs/run.py [DOCUMENT …]     # all of them by default; exits 1 on any difference
    python3 tests/docs/run.py --write DOCUMENT  # the same, and what differs is written into the document

It also checks that every `docker compose exec SERVICE …` the documents show names a service of docker-compose.yml
(`docker-compose config --services`; no container engine needed).

Python's standard library only; needs bash, curl, jq, psql (to drop the databases it made) and docker-compose.
"""

from __future__ import annotations

import dataclasses
import difflib
import os
import queue
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


@dataclasses.dataclass(frozen=True)
class Document:
    path: str
    # Only the blocks under this `## ` heading; None: every block.
    section: str | None
    # Whether the runner starts the service first (the document assumes one runs) or the document starts it.
    service_started_for_it: bool
    # A document that shows commands must keep showing some: a renamed heading would otherwise check nothing.
    has_blocks: bool = True


DOCUMENTS = [
    Document("docs/walkthrough.md", None, service_started_for_it=False),
    Document("README.md", "One deny with curl", service_started_for_it=True),
    Document("docs/errors.md", None, service_started_for_it=True),
    Document("docs/integration.md", "Ops", service_started_for_it=True),
    # Its commands need Docker today (the compose check below covers them); a console block added here is run.
    Document("docs/operations.md", None, service_started_for_it=True, has_blocks=False),
]

# The addresses the documents name, moved to free ports when run.
SERVICE_ADDRESS = "127.0.0.1:8080"
EXECUTOR_ADDRESS = "127.0.0.1:9000"

COMMAND_TIMEOUT_SECS = 60

# What differs from one run to the next, replaced by its shape on both sides before they are compared. Order
# matters: a UUID before the 8 hex digits of a key id, a digest before anything shorter.
SHAPES = [
    (re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"), "<uuid>"),
    (re.compile(r"\b\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:\d{2})"), "<time>"),
    (re.compile(r"^date: .*GMT$", re.MULTILINE), "date: <date>"),
    (re.compile(r"\b[0-9a-f]{64}\b"), "<digest>"),
    (re.compile(r"\bar_[0-9A-Za-z_-]+…?"), "<key>"),
    (re.compile(r"\bwhsec_[0-9A-Za-z+/=]+…?"), "<secret>"),
    (re.compile(r"-?\b[0-9]{1,16}_[0-9a-f]{32}\b"), "<cursor>"),
    (re.compile(r"\b[0-9a-f]{8}\b"), "<key id>"),
]

ANY_LINES = "…"


@dataclasses.dataclass
class Step:
    line: int  # where the command starts in the document, 1-based
    command: str
    expected: list[str]


def blocks(text: str, section: str | None) -> list[tuple[int, list[str], str]]:
    """The ```console blocks of `text` (under `## section` when given), each with the line it begins on and the
    indentation of its fence (a block in a list item), which its lines are read without."""
    found = []
    heading = None
    lines = text.split("\n")
    index = 0
    while index < len(lines):
        line = lines[index]
        if line.startswith("## "):
            heading = line[3:].strip()
        if line.strip() == "```console":
            start = index + 1
            end = start
            while end < len(lines) and lines[end].strip() != "```":
                end += 1
            if section is None or heading == section:
                indent = line[: len(line) - len(line.lstrip())]
                found.append((start + 1, [text_line.removeprefix(indent) for text_line in lines[start:end]], indent))
            index = end
        index += 1
    return found


def is_complete(command: str) -> bool:
    """Whether bash would run `command` as it stands, or wants more lines (a `\\`, an open heredoc or brace)."""
    # `bash -n` takes a backslash before the end of its input as the end; a reader's shell waits for the next line.
    if command.endswith("\\"):
        return False
    checked = subprocess.run(
        ["bash", "-n"], input=command + "\n", capture_output=True, text=True, check=False
    )
    wants_more = any(
        sign in checked.stderr for sign in ["unexpected end of file", "unexpected EOF", "delimited by end-of-file"]
    )
    if checked.returncode != 0 and not wants_more:
        raise SystemExit(f"not a bash command: {command!r}\n{checked.stderr}")
    return not wants_more


def steps(block_start: int, lines: list[str]) -> list[Step]:
    found: list[Step] = []
    index = 0
    while index < len(lines):
        line = lines[index]
        if not line.startswith("$ "):
            if found:
                found[-1].expected.append(line)
            elif line.strip():
                raise SystemExit(f"line {block_start + index}: output before any command: {line!r}")
            index += 1
            continue
        start = index
        command = line[2:]
        while not is_complete(command):
            index += 1
            if index == len(lines):
                raise SystemExit(f"line {block_start + start}: the command never ends")
            command += "\n" + lines[index]
        found.append(Step(block_start + start, command, []))
        index += 1
    return found


def shaped(lines: list[str]) -> list[str]:
    text = "\n".join(line.rstrip() for line in lines)
    for pattern, shape in SHAPES:
        text = pattern.sub(shape, text)
    result = text.split("\n")
    while result and not result[-1]:
        result.pop()
    while result and not result[0] and ANY_LINES not in result:
        result.pop(0)
    return result


def matches(expected: list[str], actual: list[str]) -> bool:
    """Line by line, `…` matching any number of lines."""
    # reachable[j]: the expected lines so far can match the first j actual lines.
    reachable = [True] + [False] * len(actual)
    for want in expected:
        if want.strip() == ANY_LINES:
            for j in range(1, len(actual) + 1):
                reachable[j] = reachable[j] or reachable[j - 1]
        else:
            reachable = [False] + [reachable[j - 1] and actual[j - 1] == want for j in range(1, len(actual) + 1)]
    return reachable[len(actual)]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class Session:
    """One bash process in a process group of its own; commands go in on stdin, output comes back to a marker."""

    def __init__(self, cwd: Path, env: dict[str, str], prelude: str):
        # The commands reach bash on a pipe of their own (fd 3), not on its standard input, which is /dev/null: a
        # command that reads its input (`curl -d @-` without a heredoc) must not eat the commands after it.
        commands, self.commands_end = os.pipe()
        self.process = subprocess.Popen(
            ["bash", "--noprofile", "--norc", f"/dev/fd/{commands}"],
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
            pass_fds=(commands,),
        )
        os.close(commands)
        self.stdin = os.fdopen(self.commands_end, "w")
        self.lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        self.counter = 0
        self.run(prelude)

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def run(self, command: str) -> list[str]:
        self.counter += 1
        marker = f"__docs_step_{self.counter}_{uuid.uuid4().hex}__"
        # The marker on a line of its own even after output without a final newline.
        self.stdin.write(f"{command}\nprintf '\\n%s\\n' {marker}\n")
        self.stdin.flush()
        output: list[str] = []
        deadline = time.monotonic() + COMMAND_TIMEOUT_SECS
        while True:
            try:
                line = self.lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise SystemExit(f"no end within {COMMAND_TIMEOUT_SECS} s: {command}") from None
            if line is None:
                raise SystemExit(f"the shell ended during: {command}\n{''.join(output)}")
            if line.rstrip("\n") == marker:
                break
            output.append(line)
        text = "".join(output)
        # The newline printed before the marker.
        text = text[:-1] if text.endswith("\n") else text
        return text.split("\n")

    def close(self) -> None:
        # Every process the document started (the service, the executor) is in this group.
        try:
            os.killpg(self.process.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
        # Background children stop on SIGTERM within the service's grace period.
        time.sleep(0.5)
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def prelude(binary: Path, examples: Path) -> str:
    return f"""
exec 2>&1
cargo() {{
    if [ "$1" != run ]; then echo "docs runner: only 'cargo run' is run here, not 'cargo $1'" >&2; return 2; fi
    shift
    local example=
    while [ $# -gt 0 ]; do
        case "$1" in
            --release|-q|--quiet) shift ;;
            --example) example="$2"; shift 2 ;;
            --) shift; break ;;
            *) break ;;
        esac
    done
    if [ -n "$example" ]; then "{examples}/$example" "$@"; else "{binary}" "$@"; fi
}}
approval-resume() {{ "{binary}" "$@"; }}
"""


def database_url(name: str) -> str:
    base = os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/approval_resume")
    parts = urllib.parse.urlsplit(base)
    return urllib.parse.urlunsplit(parts._replace(path=f"/{name}"))


def drop_database(name: str) -> None:
    admin = database_url("postgres")
    subprocess.run(
        ["psql", admin, "-q", "-c", f'drop database if exists "{name}" with (force)'],
        capture_output=True,
        check=False,
    )


def wait_until_ready(port: int, within: float = 60) -> None:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as answer:
                if answer.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.2)
    raise SystemExit(f"the service on port {port} was not ready within {within} s")


def run_document(document: Document, binary: Path, examples: Path, write: bool) -> list[str]:
    """Runs one document; answers its differences, each a message naming the line. With `write`, a command's
    output that differs replaces what the document shows (to regenerate it; read the diff before committing)."""
    text = (ROOT / document.path).read_text()
    found = blocks(text, document.section)
    if not found:
        where = f" under `## {document.section}`" if document.section else ""
        return [f"{document.path}: no ```console block{where} any more"] if document.has_blocks else []
    service_port, executor_port = free_port(), free_port()
    moved = {SERVICE_ADDRESS: f"127.0.0.1:{service_port}", EXECUTOR_ADDRESS: f"127.0.0.1:{executor_port}"}
    name = f"docs_{Path(document.path).stem.lower()}_{uuid.uuid4().hex[:12]}"
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": os.environ.get("HOME", "/tmp"),
        "LANG": "C.UTF-8",
        "DATABASE_URL": database_url(name),
        "LISTEN_ADDR": moved[SERVICE_ADDRESS],
        "LOG_FORMAT": "json",
    }
    differences: list[str] = []
    with tempfile.TemporaryDirectory(prefix="docs-") as scratch:
        session = Session(Path(scratch), env, prelude(binary, examples))
        try:
            if document.service_started_for_it:
                session.run(f'"{binary}" > service.log 2>&1 &')
                wait_until_ready(service_port)
            rewritten: list[tuple[int, int, list[str]]] = []
            for block_start, lines, indent in found:
                block: list[str] = []
                for step in steps(block_start, lines):
                    command = step.command
                    for ours, theirs in moved.items():
                        command = command.replace(ours, theirs)
                    actual = "\n".join(session.run(command))
                    for ours, theirs in moved.items():
                        actual = actual.replace(theirs, ours)
                    expected, got = shaped(step.expected), shaped(actual.split("\n"))
                    block.append(f"$ {step.command}")
                    if matches(expected, got):
                        block.extend(step.expected)
                        continue
                    diff = "\n".join(
                        difflib.unified_diff(expected, got, "the document", "the binary", lineterm="")
                    )
                    differences.append(f"{document.path}:{step.line}: $ {step.command}\n{diff}")
                    shown = actual.split("\n")
                    while shown and not shown[-1].strip():
                        shown.pop()
                    block.extend(line.rstrip() for line in shown)
                rewritten.append((block_start, len(lines), [indent + line if line else line for line in block]))
            if write and differences:
                document_lines = text.split("\n")
                for block_start, length, block in reversed(rewritten):
                    document_lines[block_start - 1 : block_start - 1 + length] = block
                (ROOT / document.path).write_text("\n".join(document_lines))
        finally:
            session.close()
            drop_database(name)
    return differences


# `docker compose exec service-1 …` and the like: the subcommands that name a service of the compose file.
COMPOSE_SERVICE = re.compile(r"docker[ -]compose\s+(?:exec|run|logs|restart|stop|start)\s+(?:-\S+\s+)*([A-Za-z0-9_.-]+)")


def compose_differences() -> list[str]:
    """Every service a document (or the compose file's own comment) names in a `docker compose` command is one
    `docker-compose config --services` lists. No container engine is needed: `config` only reads the file."""
    listed = subprocess.run(
        ["docker-compose", "config", "--services"], cwd=ROOT, capture_output=True, text=True, check=False
    )
    if listed.returncode != 0:
        return [f"docker-compose config --services failed: {listed.stderr.strip()}"]
    services = set(listed.stdout.split())
    differences = []
    for path in ["README.md", "docker-compose.yml", *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").glob("*.md"))]:
        for number, line in enumerate((ROOT / path).read_text().split("\n"), start=1):
            for named in COMPOSE_SERVICE.findall(line):
                if named not in services:
                    differences.append(
                        f"{path}:{number}: `{named}` is no service of docker-compose.yml ({', '.join(sorted(services))})"
                    )
    return differences


def main(arguments: list[str]) -> int:
    profile = os.environ.get("DOCS_PROFILE", "debug")
    target = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target")) / profile
    binary, examples = target / "approval-resume", target / "examples"
    for needed in [binary, examples / "echo_executor"]:
        if not needed.exists():
            print(f"{needed} is missing: cargo build --all-targets first", file=sys.stderr)
            return 2
    for tool in ["bash", "curl", "jq", "psql"]:
        if shutil.which(tool) is None:
            print(f"{tool} is needed", file=sys.stderr)
            return 2
    write = "--write" in arguments
    arguments = [argument for argument in arguments if argument != "--write"]
    chosen = [d for d in DOCUMENTS if not arguments or d.path in arguments]
    if arguments and len(chosen) != len(arguments):
        print(f"documents: {[d.path for d in DOCUMENTS]}", file=sys.stderr)
        return 2
    failed = 0
    if not arguments:
        if shutil.which("docker-compose") is None:
            # CI installs it (.ci/run); elsewhere say what was not checked rather than fail for a missing package.
            if os.environ.get("CI"):
                print("docker-compose is needed (Debian: apt-get install docker-compose)", file=sys.stderr)
                return 2
            print("skip the compose commands: docker-compose is not installed", file=sys.stderr)
        else:
            named = compose_differences()
            failed += bool(named)
            print("\n".join(f"FAIL {difference}" for difference in named) or "ok   docker compose commands name services of docker-compose.yml")
    for document in chosen:
        differences = run_document(document, binary, examples, write)
        if differences:
            failed += 1
            print(f"FAIL {document.path}: {len(differences)} command(s) print otherwise than the document shows")
            for difference in differences:
                print(difference, end="\n\n")
        else:
            print(f"ok   {document.path}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
