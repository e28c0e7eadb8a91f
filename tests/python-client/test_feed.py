"""The feed with a stored checkpoint: a reader that crashes in the middle of a page, or is killed while it waits,
and is started again from its store, handles every event of the tenant exactly once, in the feed's order."""

import json
import os
import signal
import subprocess
import sys
import threading
import uuid
from pathlib import Path

import pytest
from conftest import Service, chat_transcript, new_run_id

from approval_resume import Checkpoint, Client, Feed, FileCursorStore, MemoryCursorStore
from approval_resume.models import Event, RunView

READER = Path(__file__).with_name("reader.py")
OWNER = 7
FEED_SCOPES = ["users:write", "runs:write", "runs:read", "decisions:write", "events:read"]


def tenant_client(service: Service) -> Client:
    """A client of a tenant of its own: its feed holds only this test's events."""
    api = service.client(FEED_SCOPES, tenant=f"feed-{uuid.uuid4().hex[:12]}")
    api.put_user(OWNER, {"username": "ada", "is_admin": False, "can_approve_others": False, "disabled": False})
    return api


def register(api: Client) -> RunView:
    messages = chat_transcript(("call_1", '{"page": 12}'))
    return api.register_run({"id": new_run_id(), "owner_uid": OWNER, "messages": messages})


def every_event(api: Client, count: int) -> list[Event]:
    """The tenant's whole feed from the start, read by a reader with nothing stored."""
    feed = Feed(api, MemoryCursorStore(), wait=5, limit=1000)
    events: list[Event] = []
    while len(events) < count:
        page = feed.poll()
        assert page, f"the feed holds {len(events)} events, expected {count}"
        for event in page:
            events.append(event)
            feed.ack(event)
    return events


class Reader:
    def __init__(self, api: Client, work: Path, key: str, limit: int, stop_after: int = 0) -> None:
        command = [sys.executable, str(READER), api_base(api), key, str(work / "cursor.json"), str(work / "log")]
        self.process = subprocess.Popen(
            command + [str(limit), str(stop_after)], stdout=subprocess.PIPE, text=True, env={**os.environ}
        )

    def kill_once_waiting_with(self, handled: int, timeout: float = 60.0) -> None:
        """Kills the reader (SIGKILL) once it has handled `handled` events and waits for the next one; fails if it
        handles more (a repeat) or does not get there within `timeout` seconds."""
        assert self.process.stdout is not None
        watchdog = threading.Timer(timeout, self.process.kill)
        watchdog.start()
        try:
            for line in self.process.stdout:
                count = int(line.split()[1])
                if count >= handled:
                    self.process.kill()
                    self.process.wait(timeout=10)
                    assert count == handled, f"the reader handled {count} events, expected {handled}"
                    return
        finally:
            watchdog.cancel()
        raise AssertionError(f"the reader ended (status {self.process.wait()}) before handling {handled} events")


def api_base(api: Client) -> str:
    return api._base_url  # noqa: SLF001 - the test's own client, to start a reader at the same service


def logged(work: Path) -> list[str]:
    return [json.loads(line)["id"] for line in (work / "log").read_text().splitlines()]


def test_a_restarted_reader_neither_misses_nor_repeats_an_event(service: Service, tmp_path: Path) -> None:
    tenant = f"feed-{uuid.uuid4().hex[:12]}"
    key = service.add_key(f"reader-{tenant}", FEED_SCOPES, tenant)
    api = Client(service.base_url, key)
    api.put_user(OWNER, {"username": "ada", "is_admin": False, "can_approve_others": False, "disabled": False})
    runs = [register(api) for _ in range(5)]  # 5 x run.waiting

    # The first reader reads a page of 4 and crashes right after handling its third event.
    first = Reader(api, tmp_path, key, limit=4, stop_after=3)
    assert first.process.wait(timeout=60) == 0
    checkpoint = FileCursorStore(tmp_path / "cursor.json").load()
    assert checkpoint is not None and checkpoint.after is None and len(checkpoint.handled) == 3

    for run in runs:
        api.deny(run["id"], run["turn"]["digest"], OWNER)  # 5 x run.resumed
    # The second starts from the store, handles the page's fourth event and everything since, and is killed while
    # it waits for more.
    Reader(api, tmp_path, key, limit=4).kill_once_waiting_with(1 + 6)

    for run in runs[:2]:
        api.complete_run(run["id"])  # 2 x run.completed
    Reader(api, tmp_path, key, limit=100).kill_once_waiting_with(2)

    truth = every_event(api, 12)
    assert logged(tmp_path) == [event["id"] for event in truth]
    assert len(set(logged(tmp_path))) == 12
    kinds = [event["type"] for event in truth]
    assert kinds == ["run.waiting"] * 5 + ["run.resumed"] * 5 + ["run.completed"] * 2, kinds
    api.close()


def test_an_event_left_unacknowledged_is_read_again_and_the_acknowledged_ones_are_not(service: Service) -> None:
    api = tenant_client(service)
    [register(api) for _ in range(3)]
    store = MemoryCursorStore()
    first = Feed(api, store, wait=5)
    events = first.poll()
    assert len(events) == 3
    first.ack(events[1])  # out of order: the first stays unacknowledged
    assert store.checkpoint == Checkpoint(after=None, handled=(events[1]["id"],))

    again = Feed(api, store, wait=5)
    assert [event["id"] for event in again.poll()] == [events[0]["id"], events[2]["id"]]
    again.ack(events[0])
    again.ack(events[2])
    assert store.checkpoint is not None and store.checkpoint.after is not None and store.checkpoint.handled == ()
    assert Feed(api, store, wait=0).poll() == []
    api.close()


def test_the_iterator_acknowledges_an_event_when_the_next_one_is_asked_for(service: Service) -> None:
    api = tenant_client(service)
    [register(api) for _ in range(2)]
    store = MemoryCursorStore()
    seen = []
    for event in Feed(api, store, wait=5):
        seen.append(event["id"])
        if len(seen) == 2:
            break  # the second one is left unacknowledged
    assert store.checkpoint == Checkpoint(after=None, handled=(seen[0],))
    assert [event["id"] for event in Feed(api, store, wait=5).poll()] == [seen[1]]
    api.close()


def test_the_file_store_keeps_the_last_whole_checkpoint_when_a_write_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = FileCursorStore(tmp_path / "cursor.json")
    assert store.load() is None
    store.save(Checkpoint(after="12_3", handled=("evt_a",)))

    def interrupted(source: str, target: str) -> None:
        raise OSError("disk gone")

    monkeypatch.setattr(os, "replace", interrupted)
    with pytest.raises(OSError):
        store.save(Checkpoint(after="99_9", handled=()))
    monkeypatch.undo()
    assert store.load() == Checkpoint(after="12_3", handled=("evt_a",))
    assert [path.name for path in tmp_path.iterdir()] == ["cursor.json"]
    store.save(Checkpoint(after="99_9"))
    assert FileCursorStore(tmp_path / "cursor.json").load() == Checkpoint(after="99_9", handled=())


@pytest.mark.parametrize(
    "stored",
    [
        '{"after": "12_3", "handled": "abc"}',
        '{"after": 12, "handled": []}',
        '{"after": null, "handled": [1, 2]}',
        '{"after": null}',
        '{"after": null, "handled": [], "extra": 1}',
        '["12_3", []]',
        "not json",
    ],
)
def test_the_file_store_refuses_a_file_that_is_not_a_checkpoint(tmp_path: Path, stored: str) -> None:
    path = tmp_path / "cursor.json"
    path.write_text(stored, encoding="utf-8")
    with pytest.raises(ValueError, match="not a checkpoint"):
        FileCursorStore(path).load()
