"""The real service for the adapters' tests (as tests/python-client/conftest.py starts it, without the loopback
executor and receiver those tests need): a fresh database, `approval-resume migrate`, API keys from `clients add`,
and `serve` on a free loopback port (a second one, whose claims lapse within seconds, for the tests of a lapse). Also
the users, the exact texts of docs/design.md §3, and a tool that counts its runs in a file, so that runs in other
processes count too.

APPROVAL_RESUME_BIN is the binary (default target/debug/approval-resume); ADAPTERS_ADMIN_URL the maintenance database
(default postgres://postgres@127.0.0.1:5432/postgres).
"""

import asyncio
import contextlib
import json
import os
import re
import signal
import subprocess
import time
import uuid
from collections.abc import Coroutine, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeVar

import pytest

from approval_resume import AsyncClient, Client, verdicts
from approval_resume.models import DecisionAnswer, DenialReason, PutUser, RunView

T = TypeVar("T")
REPO = Path(__file__).resolve().parents[2]
BINARY = Path(os.environ.get("APPROVAL_RESUME_BIN", REPO / "target" / "debug" / "approval-resume"))
ADMIN_URL = os.environ.get("ADAPTERS_ADMIN_URL", "postgres://postgres@127.0.0.1:5432/postgres")
#: A worker's key: registers, reads (with the worker state), posts results, appends turns, completes.
WORKER_SCOPES = ["runs:write", "runs:read", "users:write"]
#: The deciders' key (the chat backend and the AI Tasks module), and the audit's.
DECIDER_SCOPES = ["users:write", "runs:read", "decisions:write", "approvals:read"]
TOOL = "update_page_metadata"
#: The write tool's arguments as the scripted models propose them, and as a decider edits them.
ARGUMENTS = {"page": 12, "description": "Fresh bread daily."}
EDITED = {"page": 12, "description": "Rye on Sundays."}
OWNER_WHO = "by the user who started this run, the person you are talking to"
OTHER_WHO = "by another backend user, not the person you are talking to"


def denied_text(token: str) -> str:
    """The denied result of docs/design.md §3, for a denial without a reason."""
    who, advice = {
        "run_owner": (
            OWNER_WHO,
            "Tell them that they declined the approval themselves, not the system or an operator, and ask whether "
            "the change should be proposed again.",
        ),
        "other_user": (
            OTHER_WHO,
            "Tell the user that another backend user declined the approval; do not describe it as a system error.",
        ),
    }[token]
    return (
        f'Error: approval_denied (decided_by: {token}). The approval for tool "{TOOL}" was declined {who}. '
        f"Nothing was executed. {advice}"
    )


#: The denied result of docs/design.md §3 for the owner's denial with reason `skip`: a "never", whether the owner
#: posted it or a rule of theirs gave it.
NEVER_BY_OWNER_TEXT = (
    f'Error: approval_denied (decided_by: run_owner, reason: skip). The approval for tool "{TOOL}" was declined '
    f"{OWNER_WHO}. Nothing was executed. Tell them that they declined the approval themselves, not the system or an "
    "operator, and do not propose this change again."
)


def remembered_for_the_run(
    client: Client, run: RunView, decider_uid: int, approved: bool, reason: DenialReason | None = None
) -> DecisionAnswer:
    """A person's verdict on the whole turn, remembered for the rest of the run (`remember: "run"`, docs/design.md
    §18): the client's `decide` with the whole-turn body and `remember` beside it. The rule it makes decides the
    run's later turns of the tool at their registration."""
    body = verdicts.whole_turn(run["turn"]["digest"], decider_uid, approved, reason)
    body["remember"] = "run"
    return client.decide(run["id"], body)


def verdicts_by_turn(client: Client, run_id: str) -> list[tuple[int, str, bool, str | None]]:
    """Every verdict of the run's audit, turn after turn, as (turn, call, approved, the rule that gave it or None
    when a person posted it)."""
    return [
        (event["turn_index"], call["call_id"], call["approved"], call.get("rule_id"))
        for event in client.list_events(run_id)["approval_events"]
        for call in event["calls"]
    ]


EXPIRED_TEXT = (
    f'Error: approval_expired. No one decided on the approval for tool "{TOOL}" before it expired. Nothing was '
    "executed. Tell the user that the approval request expired without a decision, not that anyone declined it, and "
    "ask whether the change should be proposed again."
)


INTERRUPTED_TEXT = f'Error: tool "{TOOL}" was interrupted; whether it took effect is unknown.'

#: The service's text for a call whose tool failed (docs/design.md §3), which the adapter posts for a tool that raised.
PUBLISH_FAILED = 'Error: tool "publish_page" failed.'


def wait_for_status(client: Client, run_id: str, status: str, timeout: float = 15.0) -> None:
    """Waits until the run has `status` (the service's expiry sweep runs every second by default)."""
    deadline = time.monotonic() + timeout
    while client.get_run(run_id)["status"] != status:
        assert time.monotonic() < deadline, f"run {run_id} did not become {status} within {timeout}s"
        time.sleep(0.2)


@dataclass
class Service:
    base_url: str
    env: dict[str, str]

    def add_key(self, scopes: list[str]) -> str:
        command = [str(BINARY), "clients", "add", f"adapters-{uuid.uuid4().hex[:12]}", "--tenant", "default"]
        for scope in scopes:
            command += ["--scope", scope]
        key = subprocess.run(command, env=self.env, check=True, capture_output=True, text=True).stdout.strip()
        assert key.startswith("ar_"), key
        return key


def psql(sql: str) -> None:
    subprocess.run(["psql", ADMIN_URL, "-qAtc", sql], check=True, capture_output=True)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "lease: waits on a claim's lease (seconds each): the service's rule, not the framework's; "
        "`run.sh --matrix` leaves these to the locked run",
    )


@contextlib.contextmanager
def running_service(work: Path, name: str, **settings: str) -> Iterator[Service]:
    """The binary serving a database of its own (`name` in its name), with `settings` added to its environment."""
    if not BINARY.is_file():
        pytest.fail(f"no binary at {BINARY}: build it (cargo build --bin approval-resume) or set APPROVAL_RESUME_BIN")
    database = f"approval_resume_adapters_{name}_{os.getpid()}"
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "DATABASE_URL": f"{ADMIN_URL.rsplit('/', 1)[0]}/{database}",
        "LOG_FORMAT": "json",
        "LISTEN_ADDR": "127.0.0.1:0",
        "SHUTDOWN_GRACE_SECS": "5",
        # The loosest level, so that a run's own level is the one that applies.
        "PRIVACY_LEVEL": "full",
        **settings,
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
        yield Service(f"http://{address}", env)
    finally:
        if process is not None and process.poll() is None:
            process.send_signal(signal.SIGTERM)
            process.wait(timeout=15)
        psql(f'drop database if exists "{database}" with (force)')
    log_text = log_path.read_text(errors="replace")
    assert "panicked" not in log_text, log_text


@pytest.fixture(scope="session")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    with running_service(tmp_path_factory.mktemp("service"), "main") as running:
        yield running


#: The shortest lease the service takes (docs/design.md §15), for the tests of a claim that lapses.
SHORT_LEASE_SECS = 5


@dataclass
class ShortLease:
    """A service whose claims lapse after `SHORT_LEASE_SECS`, with a worker's key and a decider of its own."""

    service: Service
    worker_key: str
    decider: Client


@pytest.fixture(scope="session")
def short_lease(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ShortLease]:
    work = tmp_path_factory.mktemp("short-lease")
    with running_service(work, "lease", WORKER_CLAIM_TTL_SECS=str(SHORT_LEASE_SECS)) as running:
        with Client(running.base_url, running.add_key(DECIDER_SCOPES)) as decider:
            yield ShortLease(running, running.add_key(WORKER_SCOPES), decider)


@pytest.fixture(scope="session")
def worker_key(service: Service) -> str:
    return service.add_key(WORKER_SCOPES)


class Run(Protocol):
    def __call__(self, coroutine: Coroutine[Any, Any, T], /) -> T: ...


@pytest.fixture
def on_loop() -> Iterator[Run]:
    """Runs a coroutine on the test's one event loop (the worker's client keeps its connections on it)."""
    with asyncio.Runner() as runner:
        yield runner.run


@pytest.fixture
def worker_client(
    service: Service, worker_key: str, on_loop: Run
) -> Iterator[AsyncClient]:
    """A worker's asyncio client, used and closed on the test's event loop (`on_loop`)."""
    client = AsyncClient(service.base_url, worker_key)
    yield client
    on_loop(client.aclose())


@pytest.fixture(scope="session")
def decider(service: Service) -> Iterator[Client]:
    with Client(service.base_url, service.add_key(DECIDER_SCOPES)) as client:
        yield client


@pytest.fixture(scope="session")
def approver(decider: Client) -> int:
    """A backend user of the AI Tasks module who may decide others' runs."""
    decider.put_user(3, {"username": "grace", "is_admin": False, "can_approve_others": True, "disabled": False})
    return 3


def new_owner(decider: Client) -> int:
    uid = uuid.uuid4().int % 1_000_000_000 + 1000
    user: PutUser = {"username": f"owner-{uid}", "is_admin": False, "can_approve_others": False, "disabled": False}
    decider.put_user(uid, user)
    return uid


@pytest.fixture
def owner(decider: Client) -> int:
    """A backend user of its own for each test."""
    return new_owner(decider)


@dataclass
class Ledger:
    """What the write tool did, one JSON line per run, in a file: a tool run in another process counts too."""

    path: Path

    def write(self, **arguments: Any) -> None:
        with open(self.path, "a", encoding="utf-8") as ledger:
            ledger.write(json.dumps(arguments, sort_keys=True) + "\n")

    def runs(self) -> list[dict[str, Any]]:
        if not self.path.exists():
            return []
        return [json.loads(line) for line in self.path.read_text(encoding="utf-8").splitlines()]


@pytest.fixture
def ledger(tmp_path: Path) -> Ledger:
    return Ledger(tmp_path / "pages.jsonl")
