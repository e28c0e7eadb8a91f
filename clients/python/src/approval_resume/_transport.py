"""What the sync and async clients share around one exchange: the headers, and reading the answer."""

from typing import Any

import httpx

from .errors import ApiError
from .operations import Request

USER_AGENT = "approval-resume-python/0.1.0"


def headers(key: str, extra: dict[str, str] | None) -> dict[str, str]:
    return {"authorization": f"Bearer {key}", "user-agent": USER_AGENT, "accept": "application/json", **(extra or {})}


def send_arguments(request: Request) -> dict[str, Any]:
    """The keyword arguments of `httpx.Client.request` for `request`."""
    # Never follow a redirect, whatever the `httpx` client given was built with (errors.py says why).
    arguments: dict[str, Any] = {"params": request.params or None, "follow_redirects": False}
    if request.json is not None:
        arguments["json"] = request.json
    elif request.operation.method in ("POST", "PUT"):
        # cancel and complete read no body; an empty one is what the service expects.
        arguments["content"] = b""
    if request.timeout is not None:
        arguments["timeout"] = request.timeout
    return arguments


def decode(request: Request, response: httpx.Response) -> Any:
    """The answer of a success; an `ApiError` is raised by the caller before this for any other status."""
    answer = request.operation.answer
    if answer == "none":
        return None
    if answer == "text":
        return response.text
    return response.json()


def error(response: httpx.Response) -> ApiError | None:
    """The error of an answer that is not a 2xx: a redirect is refused like any error, never taken as done."""
    return None if 200 <= response.status_code < 300 else ApiError.from_response(response)
