#!/usr/bin/env bash
# What one deny and one registration write, against the straightforward floor (issue 53; BENCHMARKS.md, "What one
# deny writes"): WAL bytes and records by type, rows inserted and updated (HOT or not), row locks, B-tree leaf
# inserts, transactions committed. Counts, not times, so that a busy machine gives the same figures.
#
#   bash bench/wal_per_deny.sh     about 4 minutes after the build; the report is printed and kept in target/bench/wal.md
#
# It runs on a PostgreSQL cluster of its own (initdb under target/wal-cluster, a free port, autovacuum off, fsync off:
# neither changes what a transaction writes to the WAL), so that no other database's activity is in the WAL, and
# removes it afterwards. As root, the cluster runs as the OS user `postgres`, like tests/support/cluster.rs.
#
# Settings (environment variables, defaults in brackets):
#   BENCH_WAL_COUNT    denies (and registrations) per window, one at a time   [400]
#   BENCH_WAL_ROUNDS   alternations of the service and the floor              [3]
#   PG_BIN             PostgreSQL's server binaries                           [/usr/lib/postgresql/15/bin]
#   BENCH_BINARY       the service binary measured                            [target/release/approval-resume]
#   BENCH_WAL_SETUP_SQL  SQL run on the service's migrated schema before measuring (a what-if: a fill factor, a
#                      dropped key), said in the report                       [none]
set -euo pipefail

cd "$(dirname "$0")/.."
pg_bin=${PG_BIN:-/usr/lib/postgresql/15/bin}
cluster="$PWD/target/wal-cluster"
mkdir -p target/bench

cargo build --release --bin approval-resume --bench decisions

run_pg() {
    if [ "$(id -u)" = 0 ]; then
        (cd "$cluster" && runuser -u postgres -- "$@")
    else
        "$@"
    fi
}

rm -rf "$cluster"
mkdir -p "$cluster"
if [ "$(id -u)" = 0 ]; then
    chown postgres: "$cluster"
fi
run_pg "$pg_bin/initdb" -D "$cluster/data" -U postgres -A trust -E UTF8 --locale=C --no-sync >/dev/null
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
run_pg "$pg_bin/pg_ctl" -D "$cluster/data" -l "$cluster/postgres.log" -w -t 30 \
    -o "-p $port -c listen_addresses=127.0.0.1 -c unix_socket_directories=$cluster -c autovacuum=off -c fsync=off" \
    start >/dev/null
stop() {
    run_pg "$pg_bin/pg_ctl" -D "$cluster/data" -w -t 30 -m fast stop >/dev/null || true
    rm -rf "$cluster"
}
trap stop EXIT

BENCH_PG_URL="postgres://postgres@127.0.0.1:$port" \
    BENCH_DATABASE=approval_resume_wal \
    BENCH_WAL_DIR="$cluster/data/pg_wal" \
    PG_WALDUMP="$pg_bin/pg_waldump" \
    PGBENCH="${PGBENCH:-$pg_bin/pgbench}" \
    cargo bench --bench decisions -- wal | tee target/bench/wal.md
