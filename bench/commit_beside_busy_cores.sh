#!/usr/bin/env bash
# What a Postgres commit costs while the machine's cores are busy at the lowest CPU priority (docs/benchmarks/big-bodies.md,
# "Large bodies at SCHED_IDLE"). Large bodies are parsed at SCHED_IDLE (src/http/large_body_threads.rs), which gives
# every waking thread the core at once; this shows what that cannot give: one client's single-row INSERT commits,
# through pgbench, with nothing else running, beside busy loops at SCHED_IDLE (chrt -i 0) on one core and on every
# core, and beside busy loops at normal priority on every core; and, for the disk alone, pg_test_fsync's fdatasync of
# one 8 kB write beside nothing and beside idle loops on every core.
#
#   bash bench/commit_beside_busy_cores.sh        about a minute; prints a table, and keeps nothing
#
# Needs pgbench and pg_test_fsync (Debian: postgresql-15), chrt (util-linux), and a Postgres server (trust auth) at
# BENCH_PG_URL [postgres://postgres@127.0.0.1:5432], where it creates and drops the database commit_probe.
set -euo pipefail

pg_url=${BENCH_PG_URL:-postgres://postgres@127.0.0.1:5432}
# The server's own programs: Debian's /usr/bin/pg_test_fsync is a wrapper that needs a cluster to pick a version.
bin=$(dirname "$(ls /usr/lib/postgresql/*/bin/pgbench 2>/dev/null | tail -1 || command -v pgbench)")
cores=$(nproc)
seconds=${PROBE_SECONDS:-6}
work=$(mktemp -d)
loops=()
trap 'kill "${loops[@]}" 2>/dev/null || true; rm -rf "$work"; psql -q "$pg_url/postgres" -c "drop database if exists commit_probe" >/dev/null' EXIT

psql -q "$pg_url/postgres" -c "drop database if exists commit_probe" -c "create database commit_probe" >/dev/null
psql -q "$pg_url/commit_probe" -c "create table probe (id bigserial primary key, v int not null)" >/dev/null
echo "insert into probe (v) values (1);" > "$work/insert.sql"

# Starts `count` busy loops, each under `prefix` (e.g. chrt -i 0), until stop_loops.
start_loops() {
    local count=$1; shift
    for _ in $(seq 1 "$count"); do
        "$@" sh -c 'while :; do :; done' &
        loops+=($!)
    done
    sleep 1
}
stop_loops() {
    kill "${loops[@]}" 2>/dev/null || true
    wait "${loops[@]}" 2>/dev/null || true
    loops=()
}

commit_ms() {
    "$bin/pgbench" -n -c 1 -T "$seconds" -f "$work/insert.sql" "$pg_url/commit_probe" 2>/dev/null |
        awk '/latency average/ {print $4}'
}
fdatasync_us() {
    "$bin/pg_test_fsync" -s 2 -f "$work/fsync.probe" 2>/dev/null |
        awk '/^[[:space:]]*fdatasync / {print $(NF-1); exit}'
}

echo "| beside | INSERT commit, ms (pgbench, 1 client, ${seconds} s) | fdatasync of 8 kB, µs (pg_test_fsync) |"
echo "|---|---:|---:|"
echo "| nothing | $(commit_ms) | $(fdatasync_us) |"
start_loops 1 chrt -i 0
echo "| 1 busy loop at SCHED_IDLE (of $cores cores) | $(commit_ms) | |"
stop_loops
start_loops "$cores" chrt -i 0
echo "| $cores busy loops at SCHED_IDLE | $(commit_ms) | $(fdatasync_us) |"
stop_loops
start_loops "$cores" env
echo "| $cores busy loops at normal priority | $(commit_ms) | |"
stop_loops
echo "| nothing, again | $(commit_ms) | |"
