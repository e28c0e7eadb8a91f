#!/usr/bin/env bash
# The statements (and so the round trips) of one approval with one call and a no-op executor, as Postgres ran them
# (docs/benchmarks/profile-memory-round-trips.md, "Round trips of an approval"): a private cluster with log_statement=all, the release binary,
# 20 approvals to warm the statement caches, then one approval between two marker statements; every statement the
# cluster logged between the markers is listed with the backend that ran it.
#
#   bash bench/approve_statements.sh [label]     report in bench/results/profile/approve-statements-<label>.md
#
# Periodic work (recovery sweep, event poll, expiry sweep) is slowed so that it does not fall between the markers; what
# is left is the approval's own, except the webhook dispatcher's look for subscriptions once a second (fixed, not a
# setting), which shows as `select exists (select 1 from webhook_subscriptions)` when it falls between them.
# Needs the Postgres server binaries (Debian: postgresql-15) and runs them as `postgres`.
set -euo pipefail
cd "$(dirname "$0")/.."

binary=$(realpath "${PROFILE_BINARY:-target/release/approval-resume}")
label=${1:-$(git describe --always --dirty)}
out=bench/results/profile
work=$(realpath -m "target/profile/$label")
mkdir -p "$out" "$work"
report=$out/approve-statements-$label.md
bin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
dir=$(mktemp -d /tmp/approval-resume-pg-XXXXXX)
chown postgres: "$dir"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
as_pg() { runuser -u postgres -- "$@"; }
as_pg "$bin/initdb" -D "$dir/data" -A trust -U postgres >/dev/null
cat >> "$dir/data/postgresql.conf" <<CONF
port = $port
listen_addresses = '127.0.0.1'
unix_socket_directories = '$dir'
log_statement = 'all'
log_line_prefix = '[%p] '
log_destination = 'stderr'
CONF
as_pg "$bin/pg_ctl" -D "$dir/data" -l "$dir/postgres.log" -w start >/dev/null
trap 'as_pg "$bin/pg_ctl" -D "$dir/data" -m immediate stop >/dev/null; rm -rf "$dir"' EXIT

python3 bench/profile_load.py --binary "$binary" --mode cpu --approve --mark --clients 1 --decisions 1 \
    --warmup 20 --pg-url "postgres://postgres@127.0.0.1:$port" --out "$work/approve.log" \
    --env RECOVERY_INTERVAL_SECS=3600 --env EVENTS_POLL_INTERVAL_MS=60000 \
    --env EXPIRY_SWEEP_INTERVAL_MS=3600000 > "$work/approve.json" 2>/dev/null
{
    echo "# Statements of one approval (one call, no-op executor): $label"
    echo
    echo "Made by \`${PROFILE_BINARY:+PROFILE_BINARY=$PROFILE_BINARY }bash bench/approve_statements.sh $label\` ($(date -u +%FT%TZ)); Postgres log_statement=all on a"
    echo "private cluster, the statements logged between the two markers, in order, by backend (pid). Binary:"
    echo "\`${binary#"$PWD"/}\` (the statements do not depend on the build profile)."
    echo
    python3 - "$dir/postgres.log" <<'PY'
import re, sys
lines = open(sys.argv[1], errors="replace").read().split("\n")
# A logged statement: "[pid] LOG:  statement: …" (simple protocol) or "[pid] LOG:  execute <name>: …" (extended);
# its text may continue on following lines without a prefix.
entries, current = [], None
for line in lines:
    m = re.match(r"^\[(\d+)\] (LOG|DETAIL|ERROR|STATEMENT|WARNING|FATAL):\s+(.*)$", line)
    if m:
        current = None
        if m.group(2) == "LOG":
            s = re.match(r"^(statement|execute [^:]*): (.*)$", m.group(3))
            if s:
                current = [m.group(1), s.group(1), s.group(2)]
                entries.append(current)
        continue
    if current is not None:
        current[2] += " " + line.strip()
start = next(i for i, e in enumerate(entries) if "measure-start" in e[2])
end = next(i for i, e in enumerate(entries) if "measure-end" in e[2])
inside = [e for e in entries[start + 1:end]]
pids = {}
print("| # | backend | kind | statement (first 150 characters) |")
print("|---:|---:|---|---|")
for n, (pid, kind, text) in enumerate(inside, 1):
    pids.setdefault(pid, len(pids) + 1)
    text = re.sub(r"\s+", " ", text).replace("|", "\\|")
    print(f"| {n} | {pids[pid]} | {kind.split()[0]} | `{text[:150]}` |")
print(f"\n**{len(inside)} statements** on {len(pids)} backend connection(s); each is one round trip "
      "(sqlx sends Bind/Execute/Sync of a cached prepared statement, or one simple query, and waits).")
PY
} | tee "$report"
echo "kept in $report"
