#!/usr/bin/env bash
# Peak memory of the service deciding (docs/benchmarks/profile-memory-round-trips.md, "Memory"): VmHWM from /proc/<pid>/status, reset through
# /proc/<pid>/clear_refs at the start of the measured denies, so it is the peak of those denies alone.
#
#   bash bench/memory.sh [label]     report in bench/results/profile/memory-<label>.md
#
# Two loads, each on a freshly started release binary (bench/profile_load.py, loopback, keep-alive clients):
#   8 clients deciding runs of 10,000 messages (about 1.8 MB of transcript each, MEMORY_LARGE_DENIES of them), in the
#   process that registered them and again in a fresh one (--fresh-service: the decisions' memory without what the
#   registrations left behind), and 64 clients deciding runs of 10 messages (MEMORY_SMALL_DENIES of them).
# The service inherits this script's environment: the binary sets the allocator's options itself (src/allocator.rs),
# and MIMALLOC_PURGE_DELAY or MIMALLOC_ARENA_EAGER_COMMIT here override them (docs/operations.md, "Memory").
# Settings: PROFILE_BINARY [target/release/approval-resume], MEMORY_LARGE_DENIES [64], MEMORY_SMALL_DENIES [5000].
set -euo pipefail
cd "$(dirname "$0")/.."

binary=${PROFILE_BINARY:-target/release/approval-resume}
label=${1:-$(git describe --always --dirty)}
out=bench/results/profile
work=target/profile/$label
mkdir -p "$out" "$work"
report=$out/memory-$label.md
row() { python3 bench/profile_row.py memory "$1"; }
{
    echo "# Peak RSS of the service deciding: $label"
    echo
    echo "Made by \`bash bench/memory.sh $label\` (PROFILE_BINARY=$binary, $(date -u +%FT%TZ))."
    echo "Binary: $(sha256sum "$binary" | cut -c1-12), $(git describe --always --dirty) of this checkout; $(nproc) CPUs."
    echo "Allocator settings from the environment: $(env | grep '^MIMALLOC_' | tr '\n' ' ' || true)"
    echo
    echo "| clients | messages | fresh process | denies | decisions/s | answer KiB | RSS before MiB | peak RSS MiB | service CPU ms/deny | load avg |"
    echo "|---:|---:|---|---:|---:|---:|---:|---:|---:|---|"
    row "$(python3 bench/profile_load.py --binary "$binary" --mode memory --clients 8 --messages 10000 \
        --decisions "${MEMORY_LARGE_DENIES:-64}" --warmup 8 --out "$work/memory.large.log")"
    row "$(python3 bench/profile_load.py --binary "$binary" --mode memory --clients 8 --messages 10000 \
        --decisions "${MEMORY_LARGE_DENIES:-64}" --warmup 8 --fresh-service --out "$work/memory.large-fresh.log")"
    row "$(python3 bench/profile_load.py --binary "$binary" --mode memory --clients 64 --messages 10 \
        --decisions "${MEMORY_SMALL_DENIES:-5000}" --warmup 200 --out "$work/memory.small.log")"
} 2> "$work/memory.stderr.txt" | tee "$report"
echo "kept in $report"
