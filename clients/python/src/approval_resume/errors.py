"""One error type for every answer that is not a success: the service's `application/problem+json` (RFC 9457),
read into `ApiError` with its status, stable `code`, detail, request id and `Retry-After`.

The answers a worker acts on get their own subclasses (`ClaimedError`, `ClaimLapsedError`, `ClaimRequiredError`), so a
worker can `except ClaimedError` rather than compare codes; they are still `ApiError`s.

A redirect (3xx) is an error too, `ApiError` with no `code`: the service never redirects, so one comes from something
between (a proxy, a load balancer, a moved host), and following it would send a decision, results or a worker state,
with the key, to another address; taking it as a success would report done what was never done.

Transport failures (no answer at all: refused connection, timeout) stay `httpx.TransportError`: there is no
problem to read, and the caller may want to tell "the service said no" from "the service was not reached".
"""

import email.utils
import time
from typing import cast

import httpx

from .models import Problem


class ApiError(Exception):
    """The service answered with an error status. Switch on `code` (openapi.yaml's `Problem.code`)."""

    def __init__(
        self,
        status: int,
        code: str | None,
        detail: str,
        *,
        title: str | None = None,
        request_id: str | None = None,
        retry_after: float | None = None,
        problem: Problem | None = None,
    ) -> None:
        super().__init__(f"{status} {code or 'error'}: {detail}" + (f" (request {request_id})" if request_id else ""))
        self.status = status
        #: The problem's stable `code`; `None` only for an answer that was no problem document (e.g. a proxy's page).
        self.code = code
        self.detail = detail
        self.title = title
        #: The `x-request-id` the service logged the request under; quote it when asking ops.
        self.request_id = request_id
        #: Seconds the service asked to wait (`Retry-After`, on every 503 and on 429).
        self.retry_after = retry_after
        #: The problem document as it came, when there was one.
        self.problem = problem

    @classmethod
    def from_response(cls, response: httpx.Response) -> "ApiError":
        """The error an answer that is not a success (a status outside 200..299) stands for."""
        if 300 <= response.status_code < 400:
            location = response.headers.get("location", "")
            return cls(
                response.status_code,
                None,
                f"the answer was a redirect{' to ' + location if location else ''}, which the client does not follow",
                title=response.reason_phrase,
                request_id=response.headers.get("x-request-id"),
            )
        retry_after = parse_retry_after(response.headers.get("retry-after"))
        header_id = response.headers.get("x-request-id")
        try:
            body = response.json()
        except ValueError:
            body = None
        if isinstance(body, dict) and isinstance(body.get("code"), str):
            kind = _BY_CODE.get(body["code"], ApiError) if response.status_code == 409 else ApiError
            return kind(
                response.status_code,
                body["code"],
                str(body.get("detail", "")),
                title=body.get("title"),
                request_id=body.get("request_id") or header_id,
                retry_after=retry_after,
                problem=cast(Problem, body),
            )
        # Not a problem document: whatever stands between client and service answered. A short, plain excerpt.
        return cls(
            response.status_code,
            None,
            response.text[:200] or response.reason_phrase,
            title=response.reason_phrase,
            request_id=header_id,
            retry_after=retry_after,
        )


def parse_retry_after(value: str | None) -> float | None:
    """Seconds from a `Retry-After` header: delay-seconds (what this service sends) or an HTTP date."""
    if value is None:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


class ClaimedError(ApiError):
    """409 `claimed`: another worker holds a live claim on the run (docs/design.md §15); run nothing. `until` is when
    that claim lapses, if the service said (RFC 3339)."""

    @property
    def until(self) -> str | None:
        return None if self.problem is None else self.problem.get("until")


class ClaimLapsedError(ApiError):
    """409 `claim_lapsed`: the poster's claim passed its `until`; the service ended its unposted calls with the
    `interrupted` result and resumed the run. Run nothing more of that turn."""


class ClaimRequiredError(ApiError):
    """409 `claim_required`: results were posted without a claim; claim the run first (`claim`)."""


_BY_CODE: dict[str, type[ApiError]] = {
    "claimed": ClaimedError,
    "claim_lapsed": ClaimLapsedError,
    "claim_required": ClaimRequiredError,
}
