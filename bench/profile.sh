#!/usr/bin/env bash
# Where a deny's CPU goes in the service (docs/benchmarks/profile-memory-round-trips.md, "Profile of a deny"): a repeatable profile of the release
# binary under load, and its CPU time per deny.
#
#   bash bench/profile.sh [label]      report in bench/results/profile/<label>.md (label: `git describe` by default)
#
# 1. callgrind: the service under `valgrind --tool=callgrind`, instrumented only while PROFILE_DENIES denies of
#    10-message runs (then PROFILE_DENIES_LARGE denies of 1,000-message runs) are sent by 8 loopback clients
#    (bench/profile_load.py; seeding and a warm-up are not instrumented). Instruction counts do not depend on what
#    else the machine runs, so two builds compare on a busy machine too. Broken down by part with
#    bench/profile_breakdown.py; the per-message slope is (I(1000) - I(10)) / 990.
# 2. cpu: the same loads on the bare service; its utime + stime from /proc/<pid>/stat per deny. These do depend
#    on the machine's load, printed beside them (`uptime`).
#
# Settings: PROFILE_BINARY [target/release/approval-resume], PROFILE_DENIES [1000], PROFILE_DENIES_LARGE [100],
# PROFILE_CPU_DENIES [10000], PROFILE_CLIENTS [8], PROFILE_CALLGRIND=0 / PROFILE_CPU=0 to skip the callgrind / cpu runs.
# Needs valgrind (Debian: apt-get install -y valgrind), python3, psql, and Postgres as bench/run.sh does.
set -euo pipefail
cd "$(dirname "$0")/.."

binary=${PROFILE_BINARY:-target/release/approval-resume}
label=${1:-$(git describe --always --dirty)}
denies=${PROFILE_DENIES:-1000}
large=${PROFILE_DENIES_LARGE:-100}
cpu_denies=${PROFILE_CPU_DENIES:-10000}
clients=${PROFILE_CLIENTS:-8}
out=bench/results/profile
work=target/profile/$label
mkdir -p "$out" "$work"
report=$out/$label.md

load() { python3 bench/profile_load.py --binary "$binary" --clients "$clients" "$@"; }

{
    echo "# Profile of a deny: $label"
    echo
    echo "Made by \`bash bench/profile.sh $label\` (PROFILE_BINARY=$binary, $(date -u +%FT%TZ)), $clients clients."
    echo "Binary: $(sha256sum "$binary" | cut -c1-12), $(git describe --always --dirty) of this checkout."
    echo "Machine: $(nproc) CPUs; load before: $(cut -d' ' -f1-3 /proc/loadavg)."
    echo
    if [ "${PROFILE_CALLGRIND:-1}" = 1 ]; then
        echo "## callgrind (user-space instructions, Ir; independent of load)"
        echo
        load --mode callgrind --messages 10 --decisions "$denies" --warmup 100 --out "$work/callgrind.10" \
            > "$work/callgrind.10.json"
        echo "\`\`\`"; cat "$work/callgrind.10.json"; echo "\`\`\`"
        python3 bench/profile_breakdown.py "$work/callgrind.10.1" "$denies" "10 messages"
        echo
        load --mode callgrind --messages 1000 --decisions "$large" --warmup 16 --out "$work/callgrind.1000" \
            > "$work/callgrind.1000.json"
        echo "\`\`\`"; cat "$work/callgrind.1000.json"; echo "\`\`\`"
        python3 bench/profile_breakdown.py "$work/callgrind.1000.1" "$large" "1,000 messages"
        echo
        python3 - "$work/callgrind.10.1" "$denies" "$work/callgrind.1000.1" "$large" <<'PY'
import subprocess, sys
def per(path, n):
    out = subprocess.run(["callgrind_annotate", "--auto=no", "--threshold=1", path], capture_output=True,
                         text=True, check=True).stdout
    line = next(l for l in out.splitlines() if l.rstrip().endswith("PROGRAM TOTALS"))
    return int(line.split()[0].replace(",", "")) / int(n)
small, big = per(sys.argv[1], sys.argv[2]), per(sys.argv[3], sys.argv[4])
print(f"**Per deny: {small:,.0f} instructions at 10 messages, {big:,.0f} at 1,000; "
      f"slope {(big - small) / 990:,.0f} instructions per transcript message.**")
PY
        echo
        # The 30 costliest functions of each, self and inclusive, for what the tables group.
        for n in 10 1000; do
            # awk reads to the end: `head` would close the pipe early and, with pipefail, stop the script.
            callgrind_annotate --auto=no --threshold=100 "$work/callgrind.$n.1" | sed -n '/file:function/,$p' \
                | awk 'NR <= 42' | cut -c1-220 > "$out/$label.top-self.$n.txt"
            callgrind_annotate --auto=no --inclusive=yes --threshold=100 "$work/callgrind.$n.1" \
                | sed -n '/file:function/,$p' | grep -v "'[0-9]" | awk 'NR <= 82' | cut -c1-220 \
                > "$out/$label.top-inclusive.$n.txt"
        done
        echo "The costliest functions, self and inclusive, are kept beside this report in \`$label.top-*.txt\`."
        echo
    fi
    [ "${PROFILE_CPU:-1}" = 1 ] || exit 0
    echo "## CPU time of the bare service (utime + stime, /proc/<pid>/stat; depends on load)"
    echo
    echo "| messages | denies | decisions/s | service CPU ms/deny | user ms | system ms | answer KiB | load avg (1, 5, 15 min) |"
    echo "|---:|---:|---:|---:|---:|---:|---:|---|"
    for shape in "10 $cpu_denies" "1000 $((cpu_denies / 10))"; do
        set -- $shape
        json=$(load --mode cpu --messages "$1" --decisions "$2" --warmup 200 --out "$work/service.$1.log")
        python3 bench/profile_row.py cpu "$json"
    done
} 2> "$work/stderr.txt" | tee "$report"
echo "kept in $report"
