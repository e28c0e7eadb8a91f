#!/usr/bin/env python3
"""Breaks a callgrind profile of the service down by part, from `callgrind_annotate` output.

    profile_breakdown.py <callgrind.out> <decisions> [<label>]

Two tables, both per deny (instructions, Ir):
  * self cost by part: every function's own instructions (callgrind_annotate, exclusive), put into the part its
    symbol prefix names (first match in PARTS wins). These add up to the total.
  * inclusive cost of entry points: callgrind_annotate --inclusive=yes, the function itself and everything it
    calls, for the functions that begin each part's work. These overlap (JSON serialization runs inside the
    handler) and are read as "how much hangs below this call".
Callgrind counts user-space instructions only: the kernel's share (socket reads and writes, epoll, futex) is in the
CPU time of profile.sh's `cpu` run, not here.
"""

import re
import subprocess
import sys
from collections import defaultdict

# (part, patterns on the function name); first match wins, so the specific parts come before the general ones.
PARTS = [
    ("allocation (malloc/free/realloc, Rust alloc shims)",
     r"^(malloc|free|realloc|calloc|cfree|_int_malloc|_int_free|_int_realloc|malloc_consolidate|sysmalloc|"
     r"unlink_chunk|tcache|__libc_malloc|__libc_free|__libc_realloc|__libc_calloc|__rust_alloc|__rust_dealloc|"
     r"__rust_realloc|__rdl_|__rg_|mi_|_mi_|mimalloc|alloc::alloc::|<alloc::alloc::Global|"
     r"alloc::raw_vec::finish_grow|alloc::raw_vec::RawVec.*grow|<mimalloc)"),
    ("memory copy/compare (libc memcpy, memmove, memset, memcmp)", r"^(__mem|mem(cpy|move|set|cmp)|__strlen|strlen|__str|bcmp)"),
    ("auth (key hash, client lookup)", r"(sha2::|approval_resume::keys::|approval_resume::http::extract::client_by_key|"
     r"approval_resume::storage::clients::|approval_resume::http::decision_tokens::)"),
    ("logging/tracing", r"^(<?tracing|<?sharded_slab|<tracing|tracing_core|tracing_subscriber|<&tracing|"
     r"<tracing_subscriber|<tracing_core|approval_resume::telemetry)"),
    ("metrics", r"^(<?approval_resume::metrics|approval_resume::app::count_request)"),
    ("rendering/model input (domain)", r"^<?approval_resume::domain::"),
    ("JSON parse (serde_json de)", r"(serde_json::de|serde_json::read|serde_json::value::de|serde_core::de|serde::de|"
     r"as serde_core::de::|Deserialize|Visitor|serde_json::raw)"),
    ("JSON serialize (serde_json ser)", r"(serde_json::ser|serde_json::value::ser|serde_core::ser|serde::ser|"
     r"Serialize|itoa|ryu|format_escaped_str)"),
    ("SQL driver (sqlx)", r"^<?(sqlx|<sqlx|sqlx_core|sqlx_postgres)|sqlx_(core|postgres)::"),
    ("tokio (scheduler, tasks, timers, I/O driver)", r"^<?(tokio|<tokio|mio|<mio)|tokio::"),
    ("HTTP (hyper, axum, tower, tower-http, http, httparse)",
     r"^<?(hyper|hyper_util|<hyper|axum|<axum|tower|<tower|tower_http|<tower_http|http::|<http|httparse|matchit|"
     r"http_body|<http_body|bytes|<bytes)|(hyper|axum|tower_http|tower)::"),
    ("ids and time (uuid, chrono, clock)", r"^<?(uuid|<uuid|chrono|<chrono|clock_gettime|__clock_gettime|__vdso)"),
    ("service code (approval_resume, other)", r"approval_resume::"),
    ("Rust std/core (formatting, hashing, strings, futures glue)", r"^<?(core::|std::|alloc::|<core|<std|<alloc|<&|"
     r"futures_util|futures_core|<futures|hashbrown|<hashbrown|smallvec|<smallvec|<\[|<T as|<F as|<str|<\(|<Option|"
     r"<Result|<u8|<usize|<i64|<bool|pin_project|once_cell|parking_lot|<parking_lot|lock_api|<lock_api|regex|"
     r"memchr|<memchr|aho_corasick|indexmap|<indexmap|crossbeam|<crossbeam|either|<either|__rust|rust_begin)"),
    ("libc other (syscall wrappers, pthread, locks)", r"^(__|_|pthread|epoll|send|recv|write|read|sched|futex|"
     r"syscall|clock|[a-z_]+@@GLIBC|__GI|__libc|lll_)"),
]

# Entry points read inclusively: (label, regex on the function name, exact function preferred)
ENTRY = [
    ("connection task (hyper HTTP/1: read, parse, middleware, write)", r"^approval_resume::listen::serve::\{\{closure\}\}::\{\{closure\}\}$"),
    ("the middleware stack below the first from_fn layer", r"^axum::middleware::from_fn::Next::run::\{\{closure\}\}$"),
    ("the decision handler (its own task, detach)", r"^approval_resume::http::decisions::decide::\{\{closure\}\}$"),
    ("auth: the key check (hash, lookup through the pool, scope)", r"^approval_resume::http::extract::(credential|key_or_token|client_by_key)::\{\{closure\}\}$"),
    ("auth: SHA-256 of the key", r"^sha2::sha256::compress256$"),
    ("serde_json parsing, all (jsonb transcript, request body)", r"^serde_json::de::from_trait$"),
    ("lock_run: the locked read (rows, jsonb transcript → tree)", r"^approval_resume::storage::decision_statements::lock_run::\{\{closure\}\}$"),
    ("sqlx: decode jsonb into Json<Vec<Value>>", r"^sqlx_postgres::types::json::<impl sqlx_core::decode::Decode<sqlx_postgres::database::Postgres> for sqlx_core::types::json::Json<T>>::decode$"),
    ("render: DecisionAnswer::of (model input)", r"^approval_resume::http::decisions::DecisionAnswer::of$"),
    ("answer: serialize to JSON bytes (axum Json)", r"^<axum::json::Json<T> as axum_core::response::into_response::IntoResponse>::into_response$"),
    ("answer: drop the trees", r"^core::ptr::drop_in_place<axum::json::Json<approval_resume::http::decisions::DecisionAnswer>>$"),
    ("logging: all tracing dispatch (spans, events, enter/exit)", r"^tracing_core::dispatcher::get_default$"),
    ("logging: the request's log line (event)", r"^tracing_core::event::Event::dispatch$"),
    ("logging: the request span (new)", r"^tracing::span::Span::new$"),
    ("metrics::http_request", r"^approval_resume::metrics::http_request$"),
    ("tokio: new tasks (detach, sqlx)", r"^tokio::runtime::scheduler::multi_thread::handle::Handle::bind_new_task$"),
    ("sqlx: returning a connection to the pool", r"^<sqlx_core::pool::connection::PoolConnection<DB> as core::ops::drop::Drop>::drop$"),
    ("allocation: __rust_alloc", r"^__rustc::__rust_alloc$"),
    ("allocation: __rust_dealloc", r"^__rustc::__rust_dealloc$"),
    ("allocation: __rust_realloc", r"^__rustc::__rust_realloc$"),
    ("memcpy/memmove", r"^__mem(cpy|move)_avx_unaligned_erms$"),
]

LINE = re.compile(r"^\s*([\d,]+) \(\s*[\d.]+%\)\s+(.*)$")


def annotate(path, inclusive):
    args = ["callgrind_annotate", "--auto=no", "--threshold=100", f"--inclusive={'yes' if inclusive else 'no'}", path]
    out = subprocess.run(args, check=True, capture_output=True, text=True).stdout
    total, rows = 0, []
    for line in out.splitlines():
        m = LINE.match(line)
        if not m:
            continue
        count = int(m.group(1).replace(",", ""))
        rest = m.group(2)
        if rest.endswith("PROGRAM TOTALS"):
            total = count
            continue
        rest = re.sub(r" \[[^\]]*\]$", "", rest)
        # "file:function": the file part never holds ':'; "???" where unknown.
        function = rest.split(":", 1)[1] if ":" in rest else rest
        rows.append((count, function))
    return total, rows


def main():
    path, decisions = sys.argv[1], int(sys.argv[2])
    label = sys.argv[3] if len(sys.argv) > 3 else path
    total, rows = annotate(path, inclusive=False)
    parts = defaultdict(int)
    unmatched = defaultdict(int)
    for count, function in rows:
        name = re.sub(r"'\d+$", "", function)
        for part, pattern in PARTS:
            if re.search(pattern, name):
                parts[part] += count
                break
        else:
            parts["other"] += count
            unmatched[name] += count
    print(f"### {label}: {total:,} instructions over {decisions} denies = {total / decisions:,.0f} per deny\n")
    print("| part (self cost, by symbol prefix) | instructions per deny | share |")
    print("|---|---:|---:|")
    for part, count in sorted(parts.items(), key=lambda kv: -kv[1]):
        print(f"| {part} | {count / decisions:,.0f} | {100 * count / total:.1f} % |")
    print(f"| **total** | **{total / decisions:,.0f}** | 100 % |")
    if unmatched:
        top = sorted(unmatched.items(), key=lambda kv: -kv[1])[:5]
        print("\nLargest functions in \"other\": " + "; ".join(f"`{n[:90]}` {c / decisions:,.0f}" for n, c in top))

    _, inclusive = annotate(path, inclusive=True)
    print("\n| entry point (inclusive: itself and all it calls) | instructions per deny | share |")
    print("|---|---:|---:|")
    for label, pattern in ENTRY:
        matches = [(c, f) for c, f in inclusive if re.search(pattern, f) and not re.search(r"'\d+$", f)]
        if not matches:
            print(f"| {label} | – | – |")
            continue
        # Several monomorphizations or closures: the largest (an outer one includes the inner ones it calls).
        count = max(c for c, _ in matches)
        print(f"| {label} | {count / decisions:,.0f} | {100 * count / total:.1f} % |")


if __name__ == "__main__":
    main()
