#!/usr/bin/env python3
"""Loopback load for bench/profile.sh and bench/memory.sh: one service, N denies at C clients, one measurement.

Standard library only (threads, http.client with keep-alive), so that it runs wherever the service builds. The
transcripts are those of benches/decisions/transcript.rs (same messages, same pending write call), each decision is
a deny by the run's owner, as in the harness's deny phases. Seeding and a warm-up are never measured.

Modes:
  callgrind  the service runs under `valgrind --tool=callgrind --instr-atstart=no`; instrumentation is switched on
             (callgrind_control -i on) after the warm-up and the profile dumped (-d) after the last deny
  cpu        the service runs bare; prints its CPU time (utime + stime from /proc/<pid>/stat) per deny
  memory     the service runs bare; prints its peak RSS (VmHWM, reset through /proc/<pid>/clear_refs at the start
             of the measured denies) and its CPU time per deny
"""

import argparse
import http.client
import json
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid

OWNERS = 100
WRITE_TOOL = "update_page_metadata"
READ_TOOL = "read_page"
SYSTEM = ("You are the site assistant of a content management system. You may read pages and propose "
          "changes to their metadata; every change waits for the approval of a backend user.")
USER = "Please look at the page about our opening hours and make the meta description shorter."
ASSISTANT = ("I have read the page. The current meta description is 212 characters long; search engines "
             "show about 155. I suggest the shorter version below.")
TOOL_RESULT = ("{\"title\":\"Opening hours\",\"path\":\"/about/hours\",\"meta_description\":\"We are open "
               "Monday to Friday from 9 to 18 and on Saturday from 10 to 14. On public holidays the office stays "
               "closed.\",\"language\":\"en\"}")
WRITE_ARGS = ("{\"path\":\"/about/hours\",\"meta_description\":\"Open Mon-Fri 9-18, Sat 10-14; closed on "
              "public holidays. Contact: office@example.org\"}")


def call(cid, name, arguments):
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": arguments}}


def transcript(messages, calls, tag="r"):
    """benches/decisions/transcript.rs::transcript, message for message."""
    out = [{"role": "system", "content": SYSTEM}]
    fillers = messages - 2
    for i in range(fillers):
        last = i + 1 == fillers
        k = i % 4
        if k == 0 or (k == 1 and last):
            out.append({"role": "user", "content": USER})
        elif k == 1:
            out.append({"role": "assistant", "content": None,
                        "tool_calls": [call(f"{tag}_e{i}", READ_TOOL, "{\"path\":\"/about/hours\"}")]})
        elif k == 2:
            out.append({"role": "tool", "tool_call_id": f"{tag}_e{i - 1}", "content": TOOL_RESULT})
        else:
            out.append({"role": "assistant", "content": ASSISTANT})
    pending = [call(f"call_{tag}_{j}", WRITE_TOOL, WRITE_ARGS) if j % 2 == 0
               else call(f"call_{tag}_{j}", READ_TOOL, "{\"path\":\"/about/hours\"}") for j in range(calls)]
    out.append({"role": "assistant", "content": None, "tool_calls": pending})
    return out


TOOLS = [{"name": WRITE_TOOL, "effect": "write"}, {"name": READ_TOOL, "effect": "read"}]


class Client:
    """One keep-alive connection."""

    def __init__(self, port, key):
        self.port, self.key = port, key
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)

    def send(self, method, path, body):
        headers = {"Authorization": f"Bearer {self.key}", "Content-Type": "application/json"}
        for attempt in range(2):
            try:
                self.conn.request(method, path, body=body, headers=headers)
                response = self.conn.getresponse()
                return response.status, response.read()
            except (http.client.HTTPException, OSError):
                if attempt:
                    raise
                self.conn.close()
                self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=600)


def in_parallel(clients, jobs, work):
    """Runs work(client, job) for every job, one thread per client; returns the results in job order."""
    todo = queue.Queue()
    for i, job in enumerate(jobs):
        todo.put((i, job))
    results = [None] * len(jobs)
    errors = []

    def worker(client):
        while True:
            try:
                i, job = todo.get_nowait()
            except queue.Empty:
                return
            try:
                results[i] = work(client, job)
            except Exception as error:  # noqa: BLE001 - reported below
                errors.append(repr(error))

    threads = [threading.Thread(target=worker, args=(c,)) for c in clients]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        sys.exit(f"{len(errors)} requests failed, first: {errors[0]}")
    return results


def proc_stat_ms(pid):
    """(user, system) CPU milliseconds of the process, all its threads."""
    text = open(f"/proc/{pid}/stat").read()
    fields = text[text.rfind(")") + 2:].split()
    tick_ms = 1000.0 / os.sysconf("SC_CLK_TCK")
    return int(fields[11]) * tick_ms, int(fields[12]) * tick_ms


def vm_field(pid, name):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith(name):
            return int(line.split()[1])
    return 0


def start_executor(config_path):
    """A no-op tool executor on a free loopback port answering {"content":"ok","is_error":false}; returns the
    TOOLS_CONFIG file naming it for both tools (as benches/decisions/executor.rs does)."""
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self):
            self.rfile.read(int(self.headers.get("content-length", 0)))
            body = b'{"content":"ok","is_error":false}'
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_address[1]
    with open(config_path, "w") as f:
        for tool, effect in [(WRITE_TOOL, "write"), (READ_TOOL, "read")]:
            f.write(f'[tools.{tool}]\nurl = "http://127.0.0.1:{port}/tools/{tool}"\neffect = "{effect}"\n'
                    f'timeout_ms = 5000\n\n')
    return config_path


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--binary", required=True)
    p.add_argument("--mode", choices=["callgrind", "cpu", "memory"], required=True)
    p.add_argument("--messages", type=int, default=10)
    p.add_argument("--calls", type=int, default=1)
    p.add_argument("--clients", type=int, default=8)
    p.add_argument("--decisions", type=int, default=2000)
    p.add_argument("--warmup", type=int, default=200)
    p.add_argument("--pool-size", default="16")
    p.add_argument("--pg-url", default="postgres://postgres@127.0.0.1:5432")
    p.add_argument("--database", default="approval_resume_profile")
    p.add_argument("--out", required=True, help="callgrind output file, or the service log")
    p.add_argument("--approve", action="store_true",
                   help="approve instead of deny, both tools pointed at a no-op executor in this process")
    p.add_argument("--mark", action="store_true",
                   help="run `select 'measure-start'` / `'measure-end'` on the database around the measured decisions "
                        "(a marker in a log_statement=all log)")
    p.add_argument("--env", action="append", default=[], help="NAME=VALUE for the service")
    p.add_argument("--fresh-service", action="store_true",
                   help="stop the service after seeding and start a new one to decide: the figures are the decisions' "
                        "alone, without what the registrations left in the process (memory mode)")
    a = p.parse_args()

    admin = f"{a.pg_url}/postgres"
    subprocess.run(["psql", "-qX", admin, "-c", f"drop database if exists {a.database} with (force)"],
                   check=True, stdout=subprocess.DEVNULL)
    subprocess.run(["psql", "-qX", admin, "-c", f"create database {a.database}"], check=True,
                   stdout=subprocess.DEVNULL)
    db_url = f"{a.pg_url}/{a.database}"
    env = dict(os.environ, DATABASE_URL=db_url, LOG_LEVEL="warn")
    env.pop("TOOLS_CONFIG", None)
    key = subprocess.run([a.binary, "clients", "add", "profile", "--scope", "runs:write", "--scope", "users:write",
                          "--scope", "decisions:write"], env=env, check=True, capture_output=True,
                         text=True).stdout.strip()

    port = free_port()
    # The production defaults of the harness (benches/decisions/service.rs): info logs as JSON, to a file.
    env.update(LISTEN_ADDR=f"127.0.0.1:{port}", DATABASE_POOL_SIZE=a.pool_size, LOG_LEVEL="info,sqlx=warn",
               LOG_FORMAT="json")
    for pair in a.env:
        name, value = pair.split("=", 1)
        env[name] = value
    if a.approve:
        env["TOOLS_CONFIG"] = start_executor(a.out + ".tools.toml")
    command = [a.binary, "serve"]
    log = open(a.out + ".log" if a.mode == "callgrind" else a.out, "w")
    if a.mode == "callgrind":
        command = ["valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={a.out}"] + command

    def start():
        service = subprocess.Popen(command, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                   stderr=log)
        deadline = time.time() + 180
        while True:
            try:
                c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
                c.request("GET", "/readyz")
                if c.getresponse().status == 200:
                    return service
            except OSError:
                pass
            if time.time() > deadline or service.poll() is not None:
                service.kill()
                sys.exit("the service did not become ready")
            time.sleep(0.2)

    service = start()
    try:

        clients = [Client(port, key) for _ in range(a.clients)]
        seeders = clients[: max(a.clients, 1)]
        in_parallel(seeders, list(range(1, OWNERS + 1)), lambda c, uid: c.send(
            "PUT", f"/v1/users/{uid}", json.dumps({"username": f"user{uid}", "is_admin": False,
                                                  "can_approve_others": False, "disabled": False})))
        messages = json.dumps(transcript(a.messages, a.calls), separators=(",", ":"))
        tools = json.dumps(TOOLS, separators=(",", ":"))

        def register(c, i):
            rid, owner = str(uuid.uuid4()), i % OWNERS + 1
            status, body = c.send("POST", "/v1/runs",
                                  f'{{"id":"{rid}","owner_uid":{owner},"messages":{messages},"tools":{tools}}}')
            if status != 201:
                raise RuntimeError(f"POST /v1/runs: {status} {body[:200]!r}")
            return rid, owner, json.loads(body)["turn"]["digest"]

        total = a.warmup + a.decisions
        print(f"seeding {total} runs of {a.messages} messages …", file=sys.stderr)
        runs = in_parallel(seeders, list(range(total)), register)

        if a.fresh_service:
            service.terminate()
            service.wait(timeout=60)
            service = start()
            clients = [Client(port, key) for _ in range(a.clients)]

        answer_bytes = []

        approved = "true" if a.approve else "false"

        def deny(c, run):
            rid, owner, digest = run
            status, body = c.send("POST", f"/v1/runs/{rid}/decision",
                                  f'{{"approved":{approved},"decider_uid":{owner},"turn_digest":"{digest}"}}')
            if status != 200:
                raise RuntimeError(f"deny: {status} {body[:200]!r}")
            answer_bytes.append(len(body))

        in_parallel(clients, runs[: a.warmup], deny)
        answer_bytes.clear()
        pid = service.pid
        if a.mode == "callgrind":
            subprocess.run(["callgrind_control", "-i", "on", str(pid)], check=True, stdout=subprocess.DEVNULL)
        if a.mode == "memory":
            with open(f"/proc/{pid}/clear_refs", "w") as f:
                f.write("5")
        mark = lambda text: subprocess.run(["psql", "-qXAt", db_url, "-c", f"select '{text}'"], check=True,
                                           stdout=subprocess.DEVNULL) if a.mark else None
        mark("measure-start")
        rss_before = vm_field(pid, "VmRSS:")
        cpu_before = proc_stat_ms(pid)
        started = time.time()
        in_parallel(clients, runs[a.warmup:], deny)
        wall = time.time() - started
        cpu_after = proc_stat_ms(pid)
        user, system = cpu_after[0] - cpu_before[0], cpu_after[1] - cpu_before[1]
        cpu = user + system
        hwm = vm_field(pid, "VmHWM:")
        mark("measure-end")
        if a.mode == "callgrind":
            subprocess.run(["callgrind_control", "-d", str(pid)], check=True, stdout=subprocess.DEVNULL)
        load = open("/proc/loadavg").read().split()[:3]
        result = {
            "mode": a.mode, "messages": a.messages, "calls": a.calls, "clients": a.clients,
            "decisions": a.decisions, "seconds": round(wall, 2), "decisions_per_s": round(a.decisions / wall, 1),
            "service_cpu_ms_per_deny": round(cpu / a.decisions, 4),
            "user_ms_per_deny": round(user / a.decisions, 4), "system_ms_per_deny": round(system / a.decisions, 4),
            "answer_kib": round(sum(answer_bytes) / len(answer_bytes) / 1024, 1),
            "rss_before_mib": round(rss_before / 1024, 1), "peak_rss_mib": round(hwm / 1024, 1),
            "loadavg": " ".join(load), "fresh_service": a.fresh_service,
        }
        print(json.dumps(result))
    finally:
        service.send_signal(signal.SIGTERM)
        try:
            service.wait(timeout=60)
        except subprocess.TimeoutExpired:
            service.kill()
            service.wait()


if __name__ == "__main__":
    main()
