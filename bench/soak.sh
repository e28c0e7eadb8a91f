#!/usr/bin/env bash
# The soak of approval-resume: the release binary under minutes of bounded mixed load (registrations, reads, the
# inbox, deny and approve decisions through a no-op executor, replays, model input, completions), its resident
# memory and its database connections sampled every few seconds. benches/soak.rs says what it does and checks.
#
#   bash bench/soak.sh             3 minutes of load after the build; prints the samples and the verdict, and keeps
#                                  them in target/bench/soak.md (the service's log in target/bench/soak-service.log)
#
# It fails (exit status non-zero) when the mean RSS of the last third of the samples exceeds the first third's by
# more than SOAK_RSS_GROWTH_PCT % + SOAK_RSS_SLACK_MIB MiB, when the service held more database connections than
# its pool size, or when any request was answered 5xx, not at all, or not as expected.
#
# Needs: cargo and a Postgres server (trust auth) at BENCH_PG_URL. It drops and creates the database SOAK_DATABASE;
# nothing else on the server is touched.
#
# Settings (environment variables, defaults in brackets):
#   SOAK_SECS            seconds of load                          [180]
#   SOAK_CLIENTS         virtual clients                          [8]
#   SOAK_RATE            most requests per second, all together   [300]
#   SOAK_SAMPLE_SECS     seconds between samples                  [5]
#   SOAK_POOL_SIZE       the service's DATABASE_POOL_SIZE         [10, its default]
#   SOAK_RSS_GROWTH_PCT  allowed RSS growth, percent              [20]
#   SOAK_RSS_SLACK_MIB   allowed RSS growth on top, MiB           [8]
#   SOAK_DATABASE        database created afresh                  [approval_resume_soak]
#   BENCH_PG_URL         server URL without a database            [postgres://postgres@127.0.0.1:5432]
set -euo pipefail

cd "$(dirname "$0")/.."

mkdir -p target/bench
cargo build --release --bin approval-resume
cargo bench --bench soak --no-run

started=$(date +%s)
cargo bench --bench soak | tee target/bench/soak.md
echo "bench/soak.sh took $(($(date +%s) - started)) s after the build."
