"""Resumes per second of LangGraph 1.2 with PostgresSaver: the `langgraph` phase of bench/run.sh (issue 43).

A graph whose one node stops at interrupt() before its tool calls run, checkpointed by PostgresSaver
(langgraph-checkpoint-postgres over psycopg) in the database given. Each client is a thread with its own
connection and checkpointer; clients are spread over as many processes as the machine has cores (one process
would hold the GIL for all of them and measure Python's lock, not LangGraph). Each client first starts its own
threads (one LangGraph thread per run) until they stop at the interrupt, which is not measured; then all clients
start together and resume each of their threads once with Command(resume={"approved": False}), the tool node
appending the denials, as the service's deny appends its results. Printed: one JSON line with the resumes, the
seconds from the common start to the last client's end, the rate and the latency percentiles.

    python bench/langgraph_resume.py --database-url URL --messages FILE --results FILE --clients 32 --per-client 40

FILE of --messages: the transcript (a JSON array of chat messages, its last turn with the pending tool_calls);
of --results: the tool messages the denial appends (a JSON array). Pinned versions: bench/langgraph-requirements.txt.
"""

import argparse
import json
import multiprocessing
import operator
import os
import sys
import threading
import time
import uuid
from typing import Annotated, TypedDict

import psycopg
from langgraph.checkpoint.postgres import PostgresSaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, interrupt
from psycopg.rows import dict_row


class State(TypedDict):
    messages: Annotated[list, operator.add]


def build(results):
    """The graph: the tool node asks for the decision before it runs anything; a denial appends `results`."""

    def tools(state):
        calls = state["messages"][-1]["tool_calls"]
        decision = interrupt({"calls": [{"id": c["id"], "tool": c["function"]["name"]} for c in calls]})
        if decision.get("approved"):
            raise RuntimeError("this benchmark only denies")
        return {"messages": results}

    builder = StateGraph(State)
    builder.add_node("tools", tools)
    builder.add_edge(START, "tools")
    builder.add_edge("tools", END)
    return builder


def connect(url):
    # As LangGraph's documentation sets up PostgresSaver's connection.
    return psycopg.Connection.connect(url, autocommit=True, prepare_threshold=0, row_factory=dict_row)


def client(args, messages, results, barrier, prefix, out):
    try:
        measure(args, messages, results, barrier, prefix, out)
    except BaseException:
        # The others would wait at the barrier for ever: break it, so that every client ends and the run fails.
        barrier.abort()
        raise


def measure(args, messages, results, barrier, prefix, out):
    with connect(args.database_url) as conn:
        graph = build(results).compile(checkpointer=PostgresSaver(conn))
        threads = [f"{prefix}-{k}" for k in range(args.per_client)]
        for thread in threads:
            state = graph.invoke({"messages": messages}, {"configurable": {"thread_id": thread}})
            if "__interrupt__" not in state:
                raise RuntimeError("the graph did not stop at its interrupt")
        barrier.wait()
        latencies, errors = [], 0
        started = time.time()
        for thread in threads:
            t0 = time.perf_counter()
            state = graph.invoke(Command(resume={"approved": False}), {"configurable": {"thread_id": thread}})
            latencies.append(time.perf_counter() - t0)
            if len(state["messages"]) != len(messages) + len(results):
                errors += 1
        out.append((started, time.time(), latencies, errors))


def process(args, index, clients, messages, results, barrier, queue):
    out, workers = [], []
    for c in range(clients):
        prefix = f"{args.tag}-{index}-{c}"
        workers.append(threading.Thread(target=client, args=(args, messages, results, barrier, prefix, out)))
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    if len(out) != clients:
        barrier.abort()
    queue.put(out)


def percentile(sorted_values, q):
    if not sorted_values:
        return None
    return sorted_values[min(len(sorted_values) - 1, int(q * len(sorted_values)))]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database-url", required=True)
    parser.add_argument("--messages", required=True)
    parser.add_argument("--results", required=True)
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--per-client", type=int, default=40)
    parser.add_argument("--processes", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--tag", default=uuid.uuid4().hex[:12], help="prefix of the LangGraph thread ids")
    args = parser.parse_args()
    with open(args.messages) as f:
        messages = json.load(f)
    with open(args.results) as f:
        results = json.load(f)
    with connect(args.database_url) as conn:
        PostgresSaver(conn).setup()

    processes = max(1, min(args.processes, args.clients))
    barrier = multiprocessing.Barrier(args.clients)
    queue = multiprocessing.Queue()
    children = []
    for index in range(processes):
        share = args.clients // processes + (1 if index < args.clients % processes else 0)
        child = multiprocessing.Process(target=process, args=(args, index, share, messages, results, barrier, queue))
        child.start()
        children.append(child)
    runs = [run for _ in children for run in queue.get()]
    for child in children:
        child.join()
    if len(runs) != args.clients:
        print(f"only {len(runs)} of {args.clients} clients finished", file=sys.stderr)
        sys.exit(1)
    seconds = max(end for _, end, _, _ in runs) - min(start for start, _, _, _ in runs)
    latencies = sorted(latency for _, _, values, _ in runs for latency in values)
    errors = sum(errors for _, _, _, errors in runs)
    resumes = len(latencies) - errors
    print(json.dumps({
        "resumes": resumes,
        "errors": errors,
        "seconds": seconds,
        "rate": resumes / seconds if seconds > 0 else 0.0,
        "p50_ms": percentile(latencies, 0.50) * 1000,
        "p99_ms": percentile(latencies, 0.99) * 1000,
        "processes": processes,
    }))


if __name__ == "__main__":
    main()
