"""The example workers (examples/python/) as real processes: started, waited on, killed, run to the end."""

import os
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path

from conftest import REPO, Ledger, Service

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
