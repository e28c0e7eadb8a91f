"""approval-resume's Python client (docs/design.md §16): the HTTP API, the feed of events with a stored cursor, and
webhook verification. Framework adapters live in `approval_resume.adapters` (optional extras)."""

from . import models, verdicts
from .async_client import AsyncClient
from .client import Client
from .errors import ApiError, ClaimedError, ClaimLapsedError, ClaimRequiredError
from .feed import AsyncFeed, Checkpoint, CursorStore, Feed, FileCursorStore, MemoryCursorStore
from .retry import RetryPolicy
from .verdicts import approve_call, deny_call
from .webhooks import WebhookVerificationError, WebhookVerifier, verify_webhook

__all__ = [
    "ApiError",
    "AsyncClient",
    "AsyncFeed",
    "Checkpoint",
    "ClaimLapsedError",
    "ClaimRequiredError",
    "ClaimedError",
    "Client",
    "CursorStore",
    "Feed",
    "FileCursorStore",
    "MemoryCursorStore",
    "RetryPolicy",
    "WebhookVerificationError",
    "WebhookVerifier",
    "approve_call",
    "deny_call",
    "models",
    "verdicts",
    "verify_webhook",
]
