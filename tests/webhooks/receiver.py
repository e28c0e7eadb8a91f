"""A webhook receiver that verifies each request with the Standard Webhooks Python library (PyPI `standardwebhooks`).

Run by the Rust test `webhooks::real_deliveries_verify_with_the_standardwebhooks_python_library` (through
tests/webhooks/run.sh): `receiver.py PORT` with the subscription's secrets in WEBHOOK_SECRETS, space-separated (a
rotated subscription's new and old secret, both signing during the overlap). Each request is verified with each
secret on its own, as a receiver that knows only one of them would. It prints `listening`, then one JSON line per
request: {"verified": bool, "verified_with": [bool per secret], "webhook_id": ..., "type": ..., "error": ...},
"verified" true when every secret verified it, and answers 204 to such a request, 400 to any other.
"""

import json
import os
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from standardwebhooks.webhooks import Webhook, WebhookVerificationError

WEBHOOKS = [Webhook(secret) for secret in os.environ["WEBHOOK_SECRETS"].split()]


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("content-length", "0")))
        report = {"verified_with": [], "webhook_id": self.headers.get("webhook-id")}
        for webhook in WEBHOOKS:
            try:
                event = webhook.verify(body, dict(self.headers.items()))
                report.update(type=event["type"], event_id=event["id"])
                report["verified_with"].append(True)
            except (WebhookVerificationError, ValueError) as error:
                report["error"] = str(error)
                report["verified_with"].append(False)
        report["verified"] = all(report["verified_with"])
        print(json.dumps(report), flush=True)
        self.send_response(204 if report["verified"] else 400)
        self.end_headers()

    def log_message(self, *args):
        pass


server = ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler)
print("listening", flush=True)
server.serve_forever()
