"""When a request is sent again, and after how long. Kept explicit and small rather than a retry library: the
only waits are the service's own `Retry-After` and a short pause after a refused connection.

Safe to send again:
- after a connection that was never made (`httpx.ConnectError`): nothing reached the service, whatever the call;
- after 503 (database unavailable, or the request timed out: a decision may still have completed) or 429 (too
  many waiting feed readers, docs/design.md §17), only for calls whose repeat answers the same as the first
  (`Operation.idempotent`): reads, the user upsert, and every write the service itself makes idempotent
  (registration, decisions, turns, cancel, complete: docs/design.md §5, §8). Creating and removing a webhook
  subscription and rotating its secret are not: a repeat would make a second subscription, answer 404 for one
  that was removed, or rotate again and retire the secret the first rotation kept overlapping.
"""

from dataclasses import dataclass

RETRY_STATUSES = frozenset({429, 503})


@dataclass(frozen=True)
class RetryPolicy:
    #: Attempts in all, the first included; 1 sends every request once.
    attempts: int = 3
    #: The longest wait honoured; a longer `Retry-After` is cut to it.
    max_wait: float = 30.0
    #: Wait after a refused connection, times the attempt number.
    connect_backoff: float = 0.5

    def __post_init__(self) -> None:
        if self.attempts < 1:
            raise ValueError("attempts must be at least 1")
        if self.max_wait < 0 or self.connect_backoff < 0:
            raise ValueError("waits must not be negative")

    def wait_after_status(self, attempt: int, idempotent: bool, status: int, retry_after: float | None) -> float | None:
        """Seconds to wait before sending again after answer `status`, or None not to send again."""
        if attempt >= self.attempts or not idempotent or status not in RETRY_STATUSES or retry_after is None:
            return None
        return min(retry_after, self.max_wait)

    def wait_after_connect_error(self, attempt: int) -> float | None:
        """Seconds to wait before connecting again after the connection was refused, or None to give up."""
        if attempt >= self.attempts:
            return None
        return min(self.connect_backoff * attempt, self.max_wait)
