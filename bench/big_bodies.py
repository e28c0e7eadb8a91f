#!/usr/bin/env python3
"""Loopback load for bench/big_bodies.sh: the largest bodies allowed, sent by many clients at once, beside a client
that decides small runs; prints the service's peak RSS, what the large bodies were answered, and the small
decisions' latency alone and under that load, as one JSON line.

Standard library only, like bench/profile_load.py (whose service start and small transcripts it shares). Seeding
(users, the small runs) is never measured. Then, in one service process:

  alone   the small client decides runs one after another, one every --small-interval-ms, nothing else running
          (as many as the loaded phase will: both p99s rest on as many decisions)
  loaded  --clients clients send large bodies for --seconds, while the small client goes on as before:
          --over-limit of them POST /v1/runs with a Content-Length one byte over the route's limit
          (MAX_BODY_BYTES + MAX_WORKER_STATE_BYTES), the others register Anthropic runs of exactly MAX_BODY_BYTES
          (10,000 messages: rounds of a question, a thinking and tool_use turn, its tool_result and an answer, the
          system prompt padded to the size). A client sends its body in 256 KiB writes and reads an answer as soon
          as one arrives (as curl does), so an answer given before the body is read is seen; after a 503 it waits
          Retry-After, after a 413 200 ms, then sends the next one.

The small decisions are reported twice: as the client timed them, and as the service did (its "request served" log
lines), which leaves the client's side of the loopback out. The senders' own CPU seconds are reported too;
--senders-idle runs them at SCHED_IDLE, as if the load came from other machines. --unknown-owner registers every
large body for an owner nobody registered: the service does all of its own work on each, and Postgres inserts none.

The peak RSS is VmHWM from /proc/<pid>/status, reset through /proc/<pid>/clear_refs when the loaded phase starts.
"""

import argparse
import http.client
import json
import multiprocessing
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from profile_load import OWNERS, TOOLS, Client, free_port, in_parallel, transcript, vm_field  # noqa: E402

WRITE_TOOL, READ_TOOL = "update_page_metadata", "read_page"
SYSTEM = ("You are the site assistant of a content management system. You may read pages and propose "
          "changes to their metadata; every change waits for the approval of a backend user.")
QUESTION = "Please look at the page about our opening hours and make the meta description shorter."
RESULT = ("{\"title\":\"Opening hours\",\"path\":\"/about/hours\",\"meta_description\":\"We are open Monday to "
          "Friday from 9 to 18 and on Saturday from 10 to 14.\",\"language\":\"en\"}")
ANSWER = "I have read the page. The current meta description is 212 characters long; I suggest a shorter one."
THINKING = ("The user wants a shorter meta description; I should read the page first, keep the opening hours "
            "exact and stay under 155 characters. ")
ID_PLACEHOLDER = "00000000-0000-0000-0000-000000000000"
CHUNK = 256 * 1024
UNKNOWN_OWNER = 4321  # four digits where the body says 1: three bytes more, taken off its padding


def anthropic_registration(size, messages):
    """A registration body of exactly `size` bytes in format anthropic with `messages` messages (a multiple of 4),
    the last one the pending assistant turn; its id is ID_PLACEHOLDER, to be replaced by one of the same length."""
    rounds = []
    for r in range((messages - 2) // 4):
        tool_id = f"toolu_e{r}"
        rounds += [
            {"role": "user", "content": QUESTION},
            {"role": "assistant", "content": [
                {"type": "thinking", "thinking": f"Round {r}. {THINKING * 8}", "signature": f"sig{r:06d}" * 40},
                {"type": "tool_use", "id": tool_id, "name": READ_TOOL, "input": {"path": "/about/hours"}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": tool_id, "content": RESULT}]},
            {"role": "assistant", "content": [{"type": "text", "text": ANSWER}]},
        ]
    rounds.append({"role": "user", "content": QUESTION})
    rounds.append({"role": "assistant", "content": [
        {"type": "tool_use", "id": "toolu_pending", "name": WRITE_TOOL,
         "input": {"path": "/about/hours", "meta_description": "Open Mon-Fri 9-18, Sat 10-14."}}]})
    assert len(rounds) == messages, len(rounds)

    def body(system):
        return json.dumps({"id": ID_PLACEHOLDER, "owner_uid": 1, "format": "anthropic", "system": system,
                           "messages": rounds, "tools": TOOLS}, separators=(",", ":")).encode()

    short = len(body(SYSTEM))
    if short > size:
        sys.exit(f"{messages} messages take {short} bytes, more than MAX_BODY_BYTES ({size})")
    padded = body(SYSTEM + " " * (size - short))
    assert len(padded) == size
    return padded


class Tally:
    """What the large bodies were answered, counted under a lock."""

    def __init__(self):
        self.lock = threading.Lock()
        self.counts = {}
        self.seconds = {}

    def add(self, kind, seconds):
        with self.lock:
            self.counts[kind] = self.counts.get(kind, 0) + 1
            self.seconds.setdefault(kind, []).append(seconds)


def send_large(port, key, head, body, declared):
    """POSTs `body` (up to `declared` bytes, the Content-Length sent) on a new connection, in CHUNK writes,
    reading the answer as soon as one arrives. Returns (status or a failure's name, Retry-After seconds)."""
    conn = socket.create_connection(("127.0.0.1", port), timeout=120)
    try:
        conn.sendall(head + f"content-length: {declared}\r\n\r\n".encode())
        answer = b""
        sent = 0
        while sent < len(body):
            readable, _, _ = select.select([conn], [], [], 0)
            if readable:
                break
            try:
                sent += conn.send(body[sent:sent + CHUNK])
            except OSError:
                break
        try:
            while b"\r\n\r\n" not in answer:
                part = conn.recv(65536)
                if not part:
                    break
                answer += part
        except OSError as error:
            return type(error).__name__, 0
        if not answer.startswith(b"HTTP/1.1 "):
            return "closed unanswered", 0
        status = int(answer[9:12])
        retry = 0
        for line in answer.split(b"\r\n\r\n")[0].split(b"\r\n"):
            if line.lower().startswith(b"retry-after:"):
                retry = int(line.split(b":")[1])
        return status, retry
    finally:
        conn.close()


def percentile(values, p):
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(len(ordered) * p))], 2)


def send_large_bodies(a, port, key, head, registration, over_limit, stop_at, answers):
    """The load, in a process of its own: a.clients threads sending large bodies until `stop_at`, a.over_limit of
    them over the route's limit, the others registrations with a fresh run id each; puts the Tally in `answers`."""
    if a.senders_idle:
        # Set before the threads start, which inherit it.
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
    tally = Tally()

    def large_client(i):
        over = i < a.over_limit
        while time.time() < stop_at:
            body = over_limit if over else registration.replace(ID_PLACEHOLDER.encode(),
                                                                str(uuid.uuid4()).encode(), 1)
            started = time.perf_counter()
            status, retry = send_large(port, key, head, body, len(body))
            kind = f"{'over-limit' if over else 'registration'} {status}"
            tally.add(kind, time.perf_counter() - started)
            if status == 503:
                time.sleep(retry or 1)
            elif status == 413:
                time.sleep(0.2)

    threads = [threading.Thread(target=large_client, args=(i,)) for i in range(a.clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    tally.lock = None
    times = os.times()
    answers.put((tally, times.user + times.system))


def wal_and_fsyncs(admin):
    """The server's WAL written (bytes) and its WAL syncs so far (pg_stat_wal, every database); the syncs are 0
    where pg_stat_wal no longer counts them (Postgres 18 moved them to pg_stat_io)."""
    query = ("select wal_bytes, coalesce((to_jsonb(w) ->> 'wal_sync')::bigint, 0) from pg_stat_wal w")
    out = subprocess.run(["psql", "-qXAt", admin, "-c", query], check=True, capture_output=True,
                         text=True).stdout.strip()
    written, syncs = out.split("|")
    return int(float(written)), int(syncs)


def cpu_seconds(pids, reaped=()):
    """User and system CPU seconds spent so far by the processes `pids` (those still alive), and by the children
    that the processes `reaped` have waited for."""
    total, tick = 0, os.sysconf("SC_CLK_TCK")
    for pid in pids:
        try:
            fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])
        if pid in reaped:
            total += int(fields[13]) + int(fields[14])
    return total / tick


def postgres_cpu_seconds():
    """CPU seconds of the whole Postgres server so far: its processes alive now, and those that have ended, which
    the postmaster (the one whose parent is not a postgres process) has reaped; so a backend that ends during a
    measurement is counted whole."""
    pids = postgres_pids()
    postmasters = set()
    for pid in pids:
        try:
            parent = int(open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[1])
        except OSError:
            continue
        if parent not in pids:
            postmasters.add(pid)
    return cpu_seconds(pids, postmasters)


def postgres_pids():
    """Every process of the Postgres server (its backends, WAL writer, checkpointer, …)."""
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if open(f"/proc/{entry}/comm").read().strip() == "postgres":
                    pids.append(int(entry))
            except OSError:
                pass
    return pids


def served_latencies(log_path):
    """The latencies (ms) the service logged for the small decisions answered 200 ("request served"), in the order
    served: the client counts the same ones, so the first as many as it decided alone are those."""
    latencies = []
    with open(log_path) as log:
        for line in log:
            if '"request served"' in line and '"/v1/runs/{id}/decision"' in line:
                record = json.loads(line)
                if record["status"] == 200:
                    latencies.append(record["latency_ms"])
    return latencies


def latency_summary(latencies, failures=None):
    summary = {"decisions": len(latencies), "p50_ms": percentile(latencies, 0.5),
               "p99_ms": percentile(latencies, 0.99), "max_ms": percentile(latencies, 1.0)}
    if failures is not None:
        summary["failed"] = failures
    return summary


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--binary", required=True)
    p.add_argument("--clients", type=int, default=64)
    p.add_argument("--over-limit", type=int, default=16, help="of the clients, how many send over-limit bodies")
    p.add_argument("--seconds", type=float, default=30)
    p.add_argument("--messages", type=int, default=10_002)
    p.add_argument("--small-interval-ms", type=float, default=20)
    p.add_argument("--small-alone", type=int, default=None,
                   help="small decisions measured alone [as many as the loaded phase sends: --seconds / interval]")
    p.add_argument("--max-body-bytes", type=int, default=8 * 1024 * 1024)
    p.add_argument("--max-worker-state-bytes", type=int, default=1024 * 1024)
    p.add_argument("--pg-url", default="postgres://postgres@127.0.0.1:5432")
    p.add_argument("--database", default="approval_resume_big_bodies")
    p.add_argument("--out", required=True, help="the service log")
    p.add_argument("--unknown-owner", action="store_true",
                   help="register for an owner nobody registered: the service parses every body, inserts none")
    p.add_argument("--senders-idle", action="store_true",
                   help="run the senders at SCHED_IDLE, as if the load came from other machines")
    p.add_argument("--env", action="append", default=[], help="NAME=VALUE for the service")
    a = p.parse_args()

    admin = f"{a.pg_url}/postgres"
    psql = lambda sql: subprocess.run(["psql", "-qX", admin, "-c", sql], check=True, stdout=subprocess.DEVNULL)
    psql(f"drop database if exists {a.database} with (force)")
    psql(f"create database {a.database}")
    env = dict(os.environ, DATABASE_URL=f"{a.pg_url}/{a.database}", LOG_LEVEL="warn")
    env.pop("TOOLS_CONFIG", None)
    key = subprocess.run([a.binary, "clients", "add", "big-bodies", "--scope", "runs:write", "--scope",
                          "users:write", "--scope", "decisions:write"], env=env, check=True, capture_output=True,
                         text=True).stdout.strip()
    port = free_port()
    # The service's defaults but for the port and the logs (info as JSON, to a file, as the harness runs it).
    env.update(LISTEN_ADDR=f"127.0.0.1:{port}", LOG_LEVEL="info,sqlx=warn", LOG_FORMAT="json",
               MAX_BODY_BYTES=str(a.max_body_bytes), MAX_WORKER_STATE_BYTES=str(a.max_worker_state_bytes))
    for pair in a.env:
        name, value = pair.split("=", 1)
        env[name] = value
    log = open(a.out, "w")
    service = subprocess.Popen([a.binary, "serve"], env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                               stderr=log)
    try:
        deadline = time.time() + 120
        while True:
            try:
                c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
                c.request("GET", "/readyz")
                if c.getresponse().status == 200:
                    break
            except OSError:
                pass
            if time.time() > deadline or service.poll() is not None:
                sys.exit("the service did not become ready")
            time.sleep(0.2)
        pid = service.pid

        seeders = [Client(port, key) for _ in range(8)]
        in_parallel(seeders, list(range(1, OWNERS + 1)), lambda c, uid: c.send(
            "PUT", f"/v1/users/{uid}", json.dumps({"username": f"user{uid}", "is_admin": False,
                                                  "can_approve_others": False, "disabled": False})))
        small_messages = json.dumps(transcript(10, 1), separators=(",", ":"))
        tools = json.dumps(TOOLS, separators=(",", ":"))

        def register_small(c, i):
            rid, owner = str(uuid.uuid4()), i % OWNERS + 1
            status, body = c.send("POST", "/v1/runs",
                                  f'{{"id":"{rid}","owner_uid":{owner},"messages":{small_messages},'
                                  f'"tools":{tools}}}')
            if status != 201:
                raise RuntimeError(f"POST /v1/runs: {status} {body[:200]!r}")
            return rid, owner, json.loads(body)["turn"]["digest"]

        interval = a.small_interval_ms / 1000
        if a.small_alone is None:
            # As many alone as under the load, so that both p99s rest on as many decisions.
            a.small_alone = int(a.seconds / interval)
        small_total = a.small_alone + int(a.seconds / interval) + 200
        print(f"seeding {small_total} small runs …", file=sys.stderr)
        small_runs = in_parallel(seeders, list(range(small_total)), register_small)
        if a.unknown_owner:
            # The same body, its owner a uid nobody registered: parsed, checked and hashed whole, then refused 422
            # by the owner's lookup, so nothing is inserted. Three spaces fewer of padding keep its size.
            known = anthropic_registration(a.max_body_bytes - 3, a.messages)
            registration = known.replace(b'"owner_uid":1,', f'"owner_uid":{UNKNOWN_OWNER},'.encode(), 1)
            assert len(registration) == a.max_body_bytes, "the body no longer names owner 1 where expected"
        else:
            registration = anthropic_registration(a.max_body_bytes, a.messages)
        route_limit = a.max_body_bytes + a.max_worker_state_bytes
        over_limit = registration + b" " * (route_limit + 1 - len(registration))
        head = (f"POST /v1/runs HTTP/1.1\r\nhost: 127.0.0.1\r\nauthorization: Bearer {key}\r\n"
                f"content-type: application/json\r\n").encode()

        small = Client(port, key)
        next_run = iter(small_runs)

        def decide_small(until):
            """Decides small runs one every `interval` until `until()` says stop; returns latencies in ms and the
            statuses other than 200."""
            latencies, failures = [], {}
            while not until():
                rid, owner, digest = next(next_run)
                started = time.perf_counter()
                status, _ = small.send("POST", f"/v1/runs/{rid}/decision",
                                       f'{{"approved":false,"decider_uid":{owner},"turn_digest":"{digest}"}}')
                elapsed = time.perf_counter() - started
                if status == 200:
                    latencies.append(elapsed * 1000)
                else:
                    failures[status] = failures.get(status, 0) + 1
                time.sleep(max(0.0, interval - elapsed))
            return latencies, failures

        count = iter(range(a.small_alone + 1))
        alone, alone_failures = decide_small(lambda: next(count) >= a.small_alone)

        with open(f"/proc/{pid}/clear_refs", "w") as f:
            f.write("5")
        rss_before = vm_field(pid, "VmRSS:")
        wal_before, syncs_before = wal_and_fsyncs(admin)
        server_cpu_before, service_cpu_before = postgres_cpu_seconds(), cpu_seconds([pid])
        stop_at = time.time() + a.seconds
        rss_samples = []

        def sample_rss():
            while time.time() < stop_at + 5:
                rss_samples.append(vm_field(pid, "VmRSS:"))
                time.sleep(0.1)

        # The large bodies are sent from a process of their own: in this one, the small client's thread would wait
        # for Python's interpreter lock behind 64 senders (up to its 5 ms switch interval at a time), and that wait
        # would be counted in the small decisions' latency as if the service had taken it.
        answers = multiprocessing.get_context("fork").Queue()
        senders = multiprocessing.get_context("fork").Process(
            target=send_large_bodies,
            args=(a, port, key, head, registration, over_limit, stop_at, answers))
        senders.start()
        sampler = threading.Thread(target=sample_rss)
        sampler.start()
        loaded, loaded_failures = decide_small(lambda: time.time() >= stop_at)
        tally, senders_cpu = answers.get(timeout=300)
        senders.join()
        sampler.join()
        hwm = vm_field(pid, "VmHWM:")
        wal_after, syncs_after = wal_and_fsyncs(admin)
        server_cpu = postgres_cpu_seconds()
        service_cpu = cpu_seconds([pid]) - service_cpu_before
        served = served_latencies(a.out)
        # The client retries a request once after a broken connection: a decision the service served whose answer
        # was lost would be one more here, and would shift the split. Then the service's figures are left out.
        if len(served) != len(alone) + len(loaded):
            print(f"the service logged {len(served)} decisions answered 200, the client counted "
                  f"{len(alone) + len(loaded)}: its own timings are left out", file=sys.stderr)
            served = []
        result = {
            "clients": a.clients, "over_limit_clients": a.over_limit, "seconds": a.seconds,
            "registration_bytes": len(registration), "messages": a.messages,
            "env": " ".join(a.env),
            "rss_before_mib": round(rss_before / 1024, 1), "peak_rss_mib": round(hwm / 1024, 1),
            "large_answers": dict(sorted(tally.counts.items())),
            "large_seconds_p50": {k: percentile(v, 0.5) for k, v in sorted(tally.seconds.items())},
            "large_seconds_max": {k: round(max(v), 2) for k, v in sorted(tally.seconds.items())},
            "small_alone": latency_summary(alone, alone_failures),
            "small_loaded": latency_summary(loaded, loaded_failures),
            # The same decisions as the service timed them, from its log: what the load adds inside the service
            # (and its database), without the client's side of the loopback.
            "served_alone": latency_summary(served[:len(alone)]) if served else None,
            "served_loaded": latency_summary(served[len(alone):]) if served else None,
            "loadavg": " ".join(open("/proc/loadavg").read().split()[:3]),
            "wal_mib": round((wal_after - wal_before) / 2**20, 1), "wal_syncs": syncs_after - syncs_before,
            "postgres_cpu_s": round(server_cpu - server_cpu_before, 1),
            "service_cpu_s": round(service_cpu, 1), "cores": os.cpu_count(),
            "senders_cpu_s": round(senders_cpu, 1),
            # Meaningful with --over-limit 0 and few clients (no 503 reads): the service's CPU per registration.
            "service_cpu_ms_per_201": round(service_cpu * 1000 / max(1, tally.counts.get("registration 201", 0)),
                                            1),
        }
        print(json.dumps(result))
    finally:
        service.send_signal(signal.SIGTERM)
        try:
            service.wait(timeout=60)
        except subprocess.TimeoutExpired:
            service.kill()
            service.wait()
        subprocess.run(["psql", "-qX", admin, "-c", f"drop database if exists {a.database} with (force)"],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


if __name__ == "__main__":
    main()
