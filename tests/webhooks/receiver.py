"""A webhook receiver that verifies each request with the Standard Webhooks Python library (PyPI `standardwebhooks`).

Run by the Rust test `webhooks::real_deliveries_verify_with_the_standardwebhooks_python_library` (through
tests/webhooks/run.sh): `receiver.py PORT` with the subscription's secret in WEBHOOK_SECRET. It prints `listening`,
then one JSON line per request: {"verified": bool, "webhook_id": ..., "type": ..., "error": ...}, and answers 204
to a verified request, 400 to any other.
"""

import json
import os
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from standardwebhooks.webhooks import Webhook, WebhookVerificationError

WEBHOOK = Webhook(os.environ["WEBHOOK_SECRET"])


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("content-length", "0")))
        report = {"verified": False, "webhook_id": self.headers.get("webhook-id")}
        try:
            event = WEBHOOK.verify(body, dict(self.headers.items()))
            report.update(verified=True, type=event["type"], event_id=event["id"])
        except (WebhookVerificationError, ValueError) as error:
            report["error"] = str(error)
        print(json.dumps(report), flush=True)
        self.send_response(204 if report["verified"] else 400)
        self.end_headers()

    def log_message(self, *args):
        pass


server = ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler)
print("listening", flush=True)
server.serve_forever()
