"""The real service for the tests of clients/python: a fresh database, `approval-resume migrate`, API keys from
`clients add`, a loopback tool executor and webhook receiver in this process, and `serve` on a free loopback port.

The binary is APPROVAL_RESUME_BIN, by default the repository's target/debug/approval-resume. The database is
created from PYTHON_CLIENT_ADMIN_URL (the maintenance database, default postgres://postgres@127.0.0.1:5432/postgres)
and dropped at the end. Only the settings named here reach the binary: a variable of the caller's shell does not.
"""

import json
import os
import re
import signal
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from approval_resume import Client

REPO = Path(__file__).resolve().parents[2]
BINARY = Path(os.environ.get("APPROVAL_RESUME_BIN", REPO / "target" / "debug" / "approval-resume"))
ADMIN_URL = os.environ.get("PYTHON_CLIENT_ADMIN_URL", "postgres://postgres@127.0.0.1:5432/postgres")
TOOL = "update_page_metadata"
PUBLIC_URL = "http://approvals.test"
ALL_SCOPES = [
    "users:write",
    "runs:write",
    "runs:read",
    "decisions:write",
    "approvals:read",
    "events:read",
    "webhooks:write",
    "metrics:read",
]


@dataclass
class Recorder:
    """What a loopback server received: one (path, headers, body) per request, and a way to wait for more."""

    requests: list[tuple[str, dict[str, str], bytes]] = field(default_factory=list)
    changed: threading.Condition = field(default_factory=threading.Condition)

    def add(self, path: str, headers: dict[str, str], body: bytes) -> None:
        with self.changed:
            self.requests.append((path, headers, body))
            self.changed.notify_all()

    def wait_for(self, predicate: Any, timeout: float = 15.0) -> list[tuple[str, dict[str, str], bytes]]:
        """The requests so far, once `predicate(requests)` holds; fails the test after `timeout` seconds."""
        with self.changed:
            if not self.changed.wait_for(lambda: predicate(self.requests), timeout):
                raise AssertionError(f"not received within {timeout}s: {len(self.requests)} request(s)")
            return list(self.requests)


def serve_loopback(recorder: Recorder, answer: Any) -> ThreadingHTTPServer:
    """An HTTP server on a free loopback port that records every POST and answers `answer(path, body)`."""

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("content-length", "0")))
            recorder.add(self.path, {key.lower(): value for key, value in self.headers.items()}, body)
            status, payload = answer(self.path, body)
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def execute(path: str, body: bytes) -> tuple[int, bytes]:
    """The tool executor: says what it ran, with the arguments it got, so a test sees edited ones arrive."""
    call = json.loads(body)
    content = f"{call['tool']} ran for user {call['owner_uid']} with {json.dumps(call['arguments'], sort_keys=True)}"
    return 200, json.dumps({"content": content, "is_error": False}).encode()


@dataclass
class Service:
    base_url: str
    database_url: str
    executor: Recorder
    receiver: Recorder
    receiver_url: str
    env: dict[str, str]

    def add_key(self, name: str, scopes: list[str], tenant: str = "default") -> str:
        """A new API client's key (`approval-resume clients add`)."""
        command = [str(BINARY), "clients", "add", name, "--tenant", tenant]
        for scope in scopes:
            command += ["--scope", scope]
        key = subprocess.run(command, env=self.env, check=True, capture_output=True, text=True).stdout.strip()
        assert key.startswith("ar_"), key
        return key

    def client(self, scopes: list[str] | None = None, tenant: str = "default", **options: Any) -> Client:
        key = self.add_key(f"python-{uuid.uuid4().hex[:12]}", scopes or ALL_SCOPES, tenant)
        return Client(self.base_url, key, **options)


def psql(sql: str) -> None:
    subprocess.run(["psql", ADMIN_URL, "-qAtc", sql], check=True, capture_output=True)


@pytest.fixture(scope="session")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    if not BINARY.is_file():
        pytest.fail(f"no binary at {BINARY}: build it (cargo build --bin approval-resume) or set APPROVAL_RESUME_BIN")
    work = tmp_path_factory.mktemp("service")
    database = f"approval_resume_python_client_{os.getpid()}"
    database_url = f"{ADMIN_URL.rsplit('/', 1)[0]}/{database}"
    executor, receiver = Recorder(), Recorder()
    executor_server = serve_loopback(executor, execute)
    receiver_server = serve_loopback(receiver, lambda path, body: (204, b""))
    executor_url = f"http://127.0.0.1:{executor_server.server_address[1]}"
    receiver_url = f"http://127.0.0.1:{receiver_server.server_address[1]}/hooks"
    tools = work / "tools.toml"
    tools.write_text(f'[tools.{TOOL}]\nurl = "{executor_url}/tools/{TOOL}"\neffect = "write"\n')
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "DATABASE_URL": database_url,
        "LOG_FORMAT": "json",
        "LISTEN_ADDR": "127.0.0.1:0",
        "SHUTDOWN_GRACE_SECS": "5",
        "TOOLS_CONFIG": str(tools),
        # The loosest level, so that a run's own level is the one that applies (the stricter of the two does).
        "PRIVACY_LEVEL": "full",
        # The receiver is on loopback, which webhooks may reach only when the service allows it (tests only).
        "WEBHOOK_ALLOW_PRIVATE_ADDRESSES": "true",
        # So that the service makes approval links (docs/design.md §20); the port is its own pick (LISTEN_ADDR's 0),
        # so the links name this address, and test_links.py opens their paths on the service's. No SMTP_URL: no mail.
        "PUBLIC_URL": PUBLIC_URL,
    }
    psql(f'drop database if exists "{database}" with (force)')
    psql(f'create database "{database}"')
    log_path = work / "service.log"
    process = None
    try:
        subprocess.run([str(BINARY), "migrate"], env=env, check=True, capture_output=True)
        with open(log_path, "wb") as log:
            process = subprocess.Popen([str(BINARY), "serve"], env=env, stdout=subprocess.DEVNULL, stderr=log)
        address = None
        for _ in range(200):
            found = re.search(r'"address":"([^"]+)"', log_path.read_text(errors="replace"))
            if found:
                address = found.group(1)
                break
            if process.poll() is not None:
                break
            time.sleep(0.05)
        if address is None:
            pytest.fail(f"the service did not start:\n{log_path.read_text(errors='replace')}")
        yield Service(f"http://{address}", database_url, executor, receiver, receiver_url, env)
    finally:
        if process is not None and process.poll() is None:
            process.send_signal(signal.SIGTERM)
            process.wait(timeout=15)
        executor_server.shutdown()
        receiver_server.shutdown()
        psql(f'drop database if exists "{database}" with (force)')
    log_text = log_path.read_text(errors="replace")
    assert "panicked" not in log_text, log_text


@pytest.fixture(scope="session")
def api(service: Service) -> Iterator[Client]:
    """A client of the default tenant holding every scope the tests use."""
    with service.client() as client:
        yield client


def new_run_id() -> str:
    return str(uuid.uuid4())


def chat_transcript(*calls: tuple[str, str]) -> list[dict[str, Any]]:
    """A user message and the assistant turn that waits, with one call of TOOL per (call id, arguments)."""
    return [
        {"role": "system", "content": "You edit the bakery's website."},
        {"role": "user", "content": "Write a meta description for page 12."},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": call_id, "type": "function", "function": {"name": TOOL, "arguments": arguments}}
                for call_id, arguments in calls
            ],
        },
    ]
