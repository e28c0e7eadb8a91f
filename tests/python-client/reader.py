"""A feed reader in a process of its own, for test_feed.py to stop and start again:

    python reader.py BASE_URL KEY STORE LOG LIMIT STOP_AFTER

It follows the feed from the checkpoint in STORE (a FileCursorStore), appends each event to LOG (one JSON line,
flushed to disk) and acknowledges it. It prints `waiting N` before each long poll, N being the events it handled
so far, so the test can kill it while it waits. With STOP_AFTER above 0 it ends abruptly (os._exit, no cleanup)
right after acknowledging that many events: a crash in the middle of a page.
"""

import json
import os
import sys

from approval_resume import Client, Feed, FileCursorStore


def main(base_url: str, key: str, store: str, log_path: str, limit: str, stop_after: str) -> None:
    handled = 0
    with Client(base_url, key) as client, open(log_path, "a", encoding="utf-8") as log:
        feed = Feed(client, FileCursorStore(store), wait=10, limit=int(limit))
        while True:
            print(f"waiting {handled}", flush=True)
            for event in feed.poll():
                log.write(json.dumps({"id": event["id"], "type": event["type"], "run": event["data"]["run_id"]}) + "\n")
                log.flush()
                os.fsync(log.fileno())
                feed.ack(event)
                handled += 1
                if handled == int(stop_after):
                    os._exit(0)


if __name__ == "__main__":
    main(*sys.argv[1:])
