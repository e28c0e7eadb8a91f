"""The example workers (examples/python/) as real processes: started, waited on, killed, run to the end."""

import os
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from conftest import REPO, SHORT_LEASE_SECS, Ledger, Service, ShortLease, new_owner, wait_for_status

from approval_resume.models import RunView

EXAMPLES = REPO / "examples" / "python"
#: Seconds an example may take to finish a run (start-up imports the framework).
TIMEOUT = 120.0


def example_env(service: Service, key: str, owner: int, ledger: Ledger, **more: str) -> dict[str, str]:
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "PYTHONDONTWRITEBYTECODE": "1",
        "APPROVAL_RESUME_URL": service.base_url,
        "APPROVAL_RESUME_KEY": key,
        "OWNER_UID": str(owner),
        "PAGES_FILE": str(ledger.path),
        **more,
    }


@dataclass
class Worker:
    """An example started in the background, its output read line by line as it comes."""

    process: subprocess.Popen[str]
    lines: list[str] = field(default_factory=list)
    changed: threading.Condition = field(default_factory=threading.Condition)

    def read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            with self.changed:
                self.lines.append(line)
                self.changed.notify_all()
        with self.changed:
            self.changed.notify_all()

    def wait_for(self, text: str, timeout: float = TIMEOUT) -> bool:
        """Whether a line holding `text` came before `timeout` seconds or the process's end."""

        def seen() -> bool:
            return any(text in line for line in self.lines) or self.process.poll() is not None

        with self.changed:
            self.changed.wait_for(seen, timeout)
            return any(text in line for line in self.lines)

    def kill(self) -> None:
        """SIGKILL: the worker dies without a chance to clean anything up."""
        self.process.kill()
        self.process.wait(timeout=15)


def start_example(name: str, env: dict[str, str], *arguments: str) -> Worker:
    process = subprocess.Popen(
        [sys.executable, str(EXAMPLES / name), *arguments],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=Path(env["PAGES_FILE"]).parent,
    )
    worker = Worker(process)
    threading.Thread(target=worker.read, daemon=True).start()
    return worker


def run_example(name: str, env: dict[str, str], *arguments: str) -> str:
    """Runs an example to its end and answers its output; fails on a non-zero exit."""
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / name), *arguments],
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        cwd=Path(env["PAGES_FILE"]).parent,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def wait_for_ledger(ledger: Ledger, count: int, timeout: float = TIMEOUT) -> None:
    """Waits until the tool wrote `count` lines (a tool in another process started)."""
    deadline = time.monotonic() + timeout
    while len(ledger.runs()) < count:
        assert time.monotonic() < deadline, f"the tool did not run within {timeout}s"
        time.sleep(0.05)


def killed_while_its_tool_runs_then_lapsed(
    name: str, lease: ShortLease, ledger: Ledger, approve: Callable[[str, RunView, int], object]
) -> tuple[str, str]:
    """Starts example `name` with a slow tool on the short-lease service, decides its run with `approve`, kills the
    worker while its tool runs, waits until the lapsed claim has resumed the run, and resumes it with a new worker;
    answers the run's id and the new worker's output."""
    owner = new_owner(lease.decider)
    run_id = str(uuid.uuid4())
    env = example_env(lease.service, lease.worker_key, owner, ledger, RUN_ID=run_id, POLL_SECONDS="0.2")
    worker = start_example(name, {**env, "TOOL_SECONDS": "3600"})
    try:
        assert worker.wait_for("waits for approval"), "".join(worker.lines)
        approve(run_id, lease.decider.get_run(run_id), owner)
        wait_for_ledger(ledger, 1)
        assert lease.decider.get_run(run_id)["status"] == "released"
    finally:
        worker.kill()
    # Nobody posts: the claim lapses after SHORT_LEASE_SECS, and the service ends the call as interrupted.
    wait_for_status(lease.decider, run_id, "resumed", timeout=SHORT_LEASE_SECS * 6)
    return run_id, run_example(name, env, "resume", run_id)
