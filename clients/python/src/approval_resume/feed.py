"""Following the tenant's events (`GET /v1/events?after&wait`, docs/design.md §10) with a stored cursor, so that a
reader restarted from its store neither misses an event nor handles one it had already handled.

The service gives a cursor per page (`next_cursor`), not per event. So the store keeps a `Checkpoint`: the cursor
the current page was read after, and the ids of that page's events already handled. A restarted reader reads the
same cursor again, gets that page's events again first (an event becomes readable only once every older
transaction has ended, so nothing can appear before them later), and skips the ones handled. Once every event of a
page is handled, the checkpoint moves on to its `next_cursor`.

An event counts as handled when `ack` says so, and the checkpoint is written before `ack` returns. A process that
dies after handling an event and before `ack` gets that one event again (at least once, never lost); make its
handling idempotent (events carry a stable `id`), or keep the checkpoint in the same transaction as the handling
with a `CursorStore` of your own.
"""

import json
import os
import tempfile
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from .async_client import AsyncClient
from .client import Client
from .models import Event, EventsPage


@dataclass(frozen=True)
class Checkpoint:
    #: The cursor the current page is read after; None: from the oldest event kept.
    after: str | None
    #: Ids of the events read after `after` that were handled already.
    handled: tuple[str, ...] = ()


class CursorStore(Protocol):
    """Where a reader keeps its checkpoint. `save` must be durable and atomic: after a crash, `load` gives the
    last checkpoint saved whole, never a torn one."""

    def load(self) -> Checkpoint | None: ...

    def save(self, checkpoint: Checkpoint) -> None: ...


class MemoryCursorStore:
    """A checkpoint that lives as long as the process: for a reader that starts from the beginning each time."""

    def __init__(self, checkpoint: Checkpoint | None = None) -> None:
        self.checkpoint = checkpoint

    def load(self) -> Checkpoint | None:
        return self.checkpoint

    def save(self, checkpoint: Checkpoint) -> None:
        self.checkpoint = checkpoint


class FileCursorStore:
    """A checkpoint in a JSON file, replaced atomically: written to a temporary file beside it, flushed to disk,
    renamed over it (`os.replace`, atomic on POSIX and Windows), and the directory flushed so the rename
    survives a power loss. `load` raises `ValueError` for a file that is not a checkpoint as `save` writes it."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)

    def load(self) -> Checkpoint | None:
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        return _checkpoint(self.path, text)

    def save(self, checkpoint: Checkpoint) -> None:
        document = json.dumps({"after": checkpoint.after, "handled": list(checkpoint.handled)})
        directory = self.path.parent
        descriptor, temporary = tempfile.mkstemp(prefix=f".{self.path.name}.", suffix=".tmp", dir=directory)
        try:
            with os.fdopen(descriptor, "w", encoding="utf-8") as file:
                file.write(document)
                file.flush()
                os.fsync(file.fileno())
            os.replace(temporary, self.path)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise
        _fsync_directory(directory)


def _checkpoint(path: Path, text: str) -> Checkpoint:
    """The checkpoint a file holds, or `ValueError` naming the file: a checkpoint read wrongly would skip events or
    handle them again (a string `"abc"` in `handled` would read as the three ids `a`, `b`, `c`), so anything but
    what `save` writes is refused rather than guessed at."""
    try:
        stored = json.loads(text)
    except ValueError as error:
        raise ValueError(f"{path}: not a checkpoint (not JSON: {error})") from None
    if not isinstance(stored, dict) or set(stored) != {"after", "handled"}:
        raise ValueError(f'{path}: not a checkpoint (expected an object with "after" and "handled" only)')
    after, handled = stored["after"], stored["handled"]
    if after is not None and not isinstance(after, str):
        raise ValueError(f'{path}: not a checkpoint ("after" must be a string or null)')
    if not isinstance(handled, list) or not all(isinstance(event_id, str) for event_id in handled):
        raise ValueError(f'{path}: not a checkpoint ("handled" must be a list of event ids)')
    return Checkpoint(after=after, handled=tuple(handled))


def _fsync_directory(directory: Path) -> None:
    if os.name != "posix":
        return
    descriptor = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


class _Position:
    """Where a reader stands: the checkpoint and the page being handled. No I/O, shared by both feeds."""

    def __init__(self, store: CursorStore) -> None:
        self.store = store
        checkpoint = store.load() or Checkpoint(after=None)
        self.after = checkpoint.after
        self.handled = list(checkpoint.handled)
        self.pending: list[Event] = []
        self.page_ids: set[str] = set()
        self.next_cursor: str | None = None

    def take(self, page: EventsPage) -> list[Event]:
        """The events of a freshly read page that are not handled yet."""
        self.page_ids = {event["id"] for event in page["events"]}
        self.next_cursor = page["next_cursor"]
        self.pending = [event for event in page["events"] if event["id"] not in self.handled]
        if not self.pending:
            self._advance()
        return list(self.pending)

    def ack(self, event: Event) -> None:
        if event["id"] in self.handled or event["id"] not in {pending["id"] for pending in self.pending}:
            return  # handled already (the iterator acks what a loop body acked itself), or not of this page
        self.pending = [pending for pending in self.pending if pending["id"] != event["id"]]
        self.handled.append(event["id"])
        if self.pending:
            self.store.save(Checkpoint(self.after, tuple(self.handled)))
        else:
            self._advance()

    def _advance(self) -> None:
        """Every event of the page is handled: the checkpoint moves past the page (one write)."""
        if self.next_cursor is None:
            return
        # Ids of a longer page read before a restart with a smaller `limit` stay until their page comes.
        handled = [event_id for event_id in self.handled if event_id not in self.page_ids]
        if self.next_cursor != self.after or handled != self.handled:
            self.after, self.handled = self.next_cursor, handled
            self.store.save(Checkpoint(self.after, tuple(self.handled)))
        self.next_cursor = None


class Feed:
    """The tenant's events (key scope `events:read`) from a stored checkpoint:

        feed = Feed(client, FileCursorStore("events.cursor"))
        for event in feed:
            handle(event)          # acknowledged when the loop asks for the next event

    or, to acknowledge explicitly, `for event in feed.poll(): handle(event); feed.ack(event)`.
    Leaving the `for` loop (break, an exception) leaves the event of that pass unacknowledged: a restarted
    reader gets it again, unless the body called `feed.ack(event)` first.
    """

    def __init__(self, client: Client, store: CursorStore, *, wait: int = 20, limit: int = 100) -> None:
        self._client = client
        self._position = _Position(store)
        self._wait = wait
        self._limit = limit

    @property
    def checkpoint(self) -> Checkpoint:
        return Checkpoint(self._position.after, tuple(self._position.handled))

    def poll(self) -> list[Event]:
        """The events not handled yet: those of the current page still unacknowledged, else the next page's,
        waiting up to `wait` seconds for one (an empty list when none came)."""
        if self._position.pending:
            return list(self._position.pending)
        page = self._client.follow_events(self._position.after, wait=self._wait, limit=self._limit)
        return self._position.take(page)

    def ack(self, event: Event) -> None:
        """Records `event` as handled, durably, before returning."""
        self._position.ack(event)

    def __iter__(self) -> Iterator[Event]:
        while True:
            for event in self.poll():
                yield event
                self.ack(event)


class AsyncFeed:
    """`Feed` for `AsyncClient`: `async for event in AsyncFeed(client, store): …`, or `await poll()` and `ack`.
    The store is called synchronously (a checkpoint is a few bytes)."""

    def __init__(self, client: AsyncClient, store: CursorStore, *, wait: int = 20, limit: int = 100) -> None:
        self._client = client
        self._position = _Position(store)
        self._wait = wait
        self._limit = limit

    @property
    def checkpoint(self) -> Checkpoint:
        return Checkpoint(self._position.after, tuple(self._position.handled))

    async def poll(self) -> list[Event]:
        if self._position.pending:
            return list(self._position.pending)
        page = await self._client.follow_events(self._position.after, wait=self._wait, limit=self._limit)
        return self._position.take(page)

    def ack(self, event: Event) -> None:
        self._position.ack(event)

    async def __aiter__(self) -> AsyncIterator[Event]:
        while True:
            for event in await self.poll():
                yield event
                self.ack(event)
