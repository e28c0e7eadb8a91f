#!/usr/bin/env bash
# Peak memory and small-decision latency while many clients send the largest bodies allowed (BENCHMARKS.md, "Big
# bodies"): MAX_BODY_BYTES_IN_FLIGHT bounds what the service holds, and large bodies are parsed off the threads
# that serve small requests.
#
#   bash bench/big_bodies.sh [label]     report in bench/results/profile/big-bodies-<label>.md; stops by itself
#
# One load on a freshly started release binary, loopback only (bench/big_bodies.py says what it sends): BIG_CLIENTS
# clients for BIG_SECONDS, BIG_OVER_LIMIT of them sending a Content-Length one byte over the route's limit, the
# others registering Anthropic runs of exactly MAX_BODY_BYTES (10,002 messages), beside one client deciding small
# runs every 20 ms, measured alone first and then under that load. The service runs with its defaults
# (MAX_BODY_BYTES 8 MiB, MAX_WORKER_STATE_BYTES 1 MiB, MAX_BODY_BYTES_IN_FLIGHT unset: 36 MiB); BIG_ENV adds
# NAME=VALUE settings (space-separated). The peak RSS (VmHWM, reset when the load starts) is held to BIG_RSS_BOUND_MIB.
# Settings: PROFILE_BINARY [target/release/approval-resume], BIG_CLIENTS [64], BIG_OVER_LIMIT [16], BIG_SECONDS [30],
# BIG_RSS_BOUND_MIB [192], BIG_ENV [], BIG_DATABASE [approval_resume_big_bodies] (created afresh and dropped after).
# Probes: BIG_SENDERS_IDLE=1 runs the senders at SCHED_IDLE, as if the load came from other machines;
# BIG_UNKNOWN_OWNER=1 registers every large body for an owner nobody registered (parsed whole, inserted never).
set -euo pipefail
cd "$(dirname "$0")/.."

binary=${PROFILE_BINARY:-target/release/approval-resume}
label=${1:-$(git describe --always --dirty)}
bound=${BIG_RSS_BOUND_MIB:-192}
out=bench/results/profile
work=target/profile/$label
mkdir -p "$out" "$work"
report=$out/big-bodies-$label.md
env_args=()
for pair in ${BIG_ENV:-}; do env_args+=(--env "$pair"); done
probe_args=()
[ -n "${BIG_SENDERS_IDLE:-}" ] && probe_args+=(--senders-idle)
[ -n "${BIG_UNKNOWN_OWNER:-}" ] && probe_args+=(--unknown-owner)
result=$(python3 bench/big_bodies.py --binary "$binary" --clients "${BIG_CLIENTS:-64}" \
    --over-limit "${BIG_OVER_LIMIT:-16}" --seconds "${BIG_SECONDS:-30}" --out "$work/big-bodies.log" \
    --database "${BIG_DATABASE:-approval_resume_big_bodies}" \
    "${env_args[@]}" "${probe_args[@]}" 2> "$work/big-bodies.stderr.txt")
{
    echo "# Big bodies: $label"
    echo
    echo "Made by \`bash bench/big_bodies.sh $label\` (PROFILE_BINARY=$binary, $(date -u +%FT%TZ))."
    echo "Binary: $(sha256sum "$binary" | cut -c1-12), $(git describe --always --dirty) of this checkout; $(nproc) CPUs."
    echo
    python3 - "$result" "$bound" <<'PY'
import json, sys
r, bound = json.loads(sys.argv[1]), float(sys.argv[2])
a, l = r["small_alone"], r["small_loaded"]
print(f'{r["clients"]} clients for {r["seconds"]:g} s ({r["over_limit_clients"]} over the limit), registrations of '
      f'{r["registration_bytes"]} bytes, {r["messages"]} messages; settings added: {r["env"] or "none"}; '
      f'load average after: {r["loadavg"]}.')
print()
print("| RSS before MiB | peak RSS MiB | bound MiB | within | large bodies answered | seconds to the answer, p50 / max |")
print("|---:|---:|---:|---|---|---|")
answers = ", ".join(f"{k}: {v}" for k, v in r["large_answers"].items())
seconds = ", ".join(f'{k}: {r["large_seconds_p50"][k]} / {r["large_seconds_max"][k]}' for k in r["large_answers"])
print(f'| {r["rss_before_mib"]} | **{r["peak_rss_mib"]}** | {bound:g} | {"yes" if r["peak_rss_mib"] <= bound else "**no**"} '
      f'| {answers} | {seconds} |')
print()
sa, sl = r["served_alone"], r["served_loaded"]
print("| small decisions | count | p50 ms | p99 ms | max ms | not 200 "
      "| as the service timed them: p50 / p99 / max ms |")
print("|---|---:|---:|---:|---:|---|---|")
for name, s, v in [("alone", a, sa), ("under the load", l, sl)]:
    served = f'{v["p50_ms"]} / {v["p99_ms"]} / {v["max_ms"]}' if v else "not counted alike: left out"
    print(f'| {name} | {s["decisions"]} | {s["p50_ms"]} | **{s["p99_ms"]}** | {s["max_ms"]} | {s["failed"] or "none"} '
          f'| {served} |')
print()
served_ratio = f', **{sl["p99_ms"] / sa["p99_ms"]:.2f}** as the service timed them' if sa else ""
print(f'p99 under the load ÷ alone: **{l["p99_ms"] / a["p99_ms"]:.2f}** at the client{served_ratio}')
print()
print(f'During the load: WAL written {r["wal_mib"]} MiB in {r["wal_syncs"]} syncs (pg_stat_wal, the whole server); CPU '
      f'seconds of the Postgres server {r["postgres_cpu_s"]} and of the service {r["service_cpu_s"]}, of '
      f'{r["cores"] * r["seconds"]:g} on the machine\'s {r["cores"]} cores; the senders took {r["senders_cpu_s"]}.')
PY
    echo
    echo '```json'
    echo "$result"
    echo '```'
} | tee "$report"
echo "kept in $report"
