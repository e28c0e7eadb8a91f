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
    arguments: dict[str, Any] = {"params": request.params or None}
    if request.json is not None:
        arguments["json"] = request.json
    elif request.operation.method in ("POST", "PUT"):
        # cancel and complete read no body; an empty one is what the service expects.
        arguments["content"] = b""
    if request.timeout is not None:
        arguments["timeout"] = request.timeout
    return arguments


def decode(request: Request, response: httpx.Response) -> Any:
    """The answer of a success; an `ApiError` is raised by the caller before this for any status of 400 or more."""
    answer = request.operation.answer
    if answer == "none":
        return None
    if answer == "text":
        return response.text
    return response.json()


def error(response: httpx.Response) -> ApiError | None:
    return ApiError.from_response(response) if response.status_code >= 400 else None
