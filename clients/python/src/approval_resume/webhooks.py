"""Verifying the webhooks the service sends (docs/design.md §10): signed per the Standard Webhooks specification, and
checked here by that specification's own library (`standardwebhooks`), never by hand-written HMAC code.

    verifier = WebhookVerifier(subscription["secret"])
    event = verifier.verify(request_body_bytes, request_headers)   # raises WebhookVerificationError

Pass the body exactly as it arrived (bytes, before any JSON parsing): the signature is over those bytes. The
library refuses a timestamp more than five minutes away from now, so a captured request cannot be replayed later;
a retried delivery keeps its `webhook-id`, by which a receiver deduplicates.
"""

from collections.abc import Mapping
from typing import cast

from standardwebhooks.webhooks import Webhook
from standardwebhooks.webhooks import WebhookVerificationError as _LibraryError

from .models import Event


class WebhookVerificationError(Exception):
    """The request was not signed with the subscription's secret, was altered, lacks a header, or is too old."""


class WebhookVerifier:
    def __init__(self, secret: str) -> None:
        """`secret`: the subscription's `whsec_…` secret, as `create_webhook` answered it."""
        self._webhook = Webhook(secret)

    def verify(self, body: bytes | str, headers: Mapping[str, str]) -> Event:
        """The event of a request whose signature verifies; raises `WebhookVerificationError` otherwise."""
        try:
            return cast(Event, self._webhook.verify(body, dict(headers)))
        # The library raises ValueError (binascii.Error, a bad unpacking) on a malformed signature header, and
        # UnicodeDecodeError on a body that is not UTF-8: each is a request that does not verify.
        except (_LibraryError, ValueError) as error:
            raise WebhookVerificationError(str(error) or type(error).__name__) from error


def verify_webhook(secret: str, body: bytes | str, headers: Mapping[str, str]) -> Event:
    """`WebhookVerifier(secret).verify(body, headers)`, for one request."""
    return WebhookVerifier(secret).verify(body, headers)
