"""A real SMTP server for tests/links: aiosmtpd on 127.0.0.1:PORT that insists on STARTTLS with the test
certificate, and writes every message it accepts to MAILDIR as one JSON file (envelope, headers, decoded body and
the raw message), named so that a listing sorts by arrival.

    python smtp_server.py PORT CERT KEY MAILDIR

Prints `ready` once it accepts connections and runs until SIGTERM or SIGINT. The suite's driver starts and stops it
(the service must survive the server being away and deliver once it is back).
"""

from __future__ import annotations

import email
import email.policy
import itertools
import json
import os
import signal
import ssl
import sys
import threading
import time
from pathlib import Path

from aiosmtpd.controller import Controller


class Collector:
    """Writes each message to the folder; the file appears whole (written aside, then renamed)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.counter = itertools.count()

    async def handle_DATA(self, server, session, envelope):  # noqa: N802 (aiosmtpd's hook name)
        message = email.message_from_bytes(envelope.original_content, policy=email.policy.default)
        body = message.get_body(preferencelist=("plain",))
        record = {
            "tls": session.ssl is not None,
            "mail_from": envelope.mail_from,
            "rcpt_tos": envelope.rcpt_tos,
            "from": str(message["From"]),
            "to": str(message["To"]),
            "subject": str(message["Subject"]),
            "content_type": message.get_content_type(),
            "body": body.get_content() if body is not None else "",
            "raw": envelope.original_content.decode("utf-8", "replace"),
        }
        name = f"{time.time_ns():020d}-{next(self.counter):04d}"
        partial = self.folder / f".{name}.tmp"
        partial.write_text(json.dumps(record), encoding="utf-8")
        partial.rename(self.folder / f"{name}.json")
        return "250 OK"


def main() -> None:
    port, cert, key, maildir = int(sys.argv[1]), sys.argv[2], sys.argv[3], Path(sys.argv[4])
    maildir.mkdir(parents=True, exist_ok=True)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    controller = Controller(
        Collector(maildir),
        hostname="127.0.0.1",
        port=port,
        server_hostname="localhost",
        tls_context=context,
        require_starttls=True,
    )
    controller.start()
    print("ready", flush=True)
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    stop.wait()
    controller.stop()
    os._exit(0)


if __name__ == "__main__":
    main()
