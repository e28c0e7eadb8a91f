#!/usr/bin/env bash
# The benchmark of approval-resume (BENCHMARKS.md says what it measures and how to read it).
#
#   bash bench/run.sh              the whole benchmark, about 7 minutes after the build; the report is printed and kept in
#                                  target/bench/report.md, the micro-benchmarks in target/bench/core.txt
#   bash bench/run.sh pool-sweep   deny throughput by DATABASE_POOL_SIZE (how the default pool size was chosen)
#
# Needs: cargo, a Postgres server (trust auth) at BENCH_PG_URL, and pgbench (Debian: package postgresql-15).
# It creates and drops the database BENCH_DATABASE; nothing else on the server is touched.
#
# Settings (environment variables, defaults in brackets):
#   BENCH_PG_URL          server URL without a database      [postgres://postgres@127.0.0.1:5432]
#   BENCH_DATABASE        database created afresh            [approval_resume_bench]
#   BENCH_POOL_SIZE       the service's DATABASE_POOL_SIZE   [16]
#   BENCH_CONCURRENCY     virtual clients per phase          [1,8,32,64]
#   BENCH_SECONDS         measured seconds per phase         [8]
#   BENCH_WARMUP_SECONDS  warm-up seconds per phase          [1]
#   BENCH_PHASES          any of deny,floor,previous,latency,events,approve,mixed,scaling,native   [all]
#                         (floor: pgbench with bench/deny_floor_naive.sql, the target, and bench/deny_floor.sql,
#                         the service's own SQL, and with approve also bench/approve_floor_naive.sql;
#                         previous: bench/deny_floor_previous.sql, the deny before the outbox)
#                         (events: feed and webhook latency during the latency phase; leave it out when
#                         BENCH_BINARY is a build from before events, i.e. before the outbox)
#                         (native: denies of an Anthropic run with thinking beside an OpenAI chat run of the
#                         same size, alternated; `BENCH_PHASES=native bash bench/run.sh` runs it alone)
#   BENCH_NATIVE_BYTES    size of the native phase's registrations  [35000]
#   BENCH_NATIVE_CLIENTS  clients of the native phase        [1,8,32]
#   BENCH_NATIVE_ROUNDS   alternations of the native phase   [3]
#   BENCH_NATIVE_DECISIONS  decisions per native phase       [1500]
#   BENCH_BINARY          the service binary measured          [target/release/approval-resume]
#   Phases run only when named in BENCH_PHASES (issues 43 and 40; each alternates the service with something else,
#   round by round, each round deciding (or registering) BENCH_ALT_DECISIONS runs on BENCH_ALT_CLIENTS clients, and
#   prints the ratio):
#     straightforward     deny of a 41-message (35 KB, two pending calls) and a 3-message transcript against
#                         bench/deny_floor_straightforward.sql; then the 41-message deny's p99 at half its saturating load
#     langgraph           the 41-message deny against LangGraph 1.2's resume (bench/langgraph_resume.py, PostgresSaver);
#                         the venv target/bench/langgraph-venv is made from bench/langgraph-requirements.txt (PyPI)
#     base                today's deny against the build of BENCH_BASE_COMMIT, built in release in a git worktree
#                         under target/bench-base/ (its own target dir there)
#     registration        today's registration of the 41-message transcript (no rule in the database) against the
#                         same base build's, each registering BENCH_ALT_DECISIONS distinct runs a round; with the
#                         statements per registration if the server loads pg_stat_statements (issue 40, item 5)
#   BENCH_ALT_CLIENTS     clients of those phases            [32]
#   BENCH_ALT_ROUNDS      alternations                       [3]
#   BENCH_ALT_DECISIONS   runs decided per measurement       [1500]
#   BENCH_LANGGRAPH_PER_CLIENT  LangGraph threads resumed per client  [20]
#   BENCH_BASE_COMMIT     the build base and registration compare with  [the newest merge before HEAD on its first-parent
#                         line: the previous landing]
#   BENCH_SCALING_CLIENTS clients of the scaling phases      [8]
#   BENCH_SWEEP_POOLS     pool sizes of pool-sweep           [4,8,16,32,64]
#   BENCH_MICRO=0         skip the criterion micro-benchmarks
#   PGBENCH               path to pgbench                    [found on PATH or in /usr/lib/postgresql/*/bin]
set -euo pipefail

cd "$(dirname "$0")/.."

if [ -z "${PGBENCH:-}" ] && ! command -v pgbench >/dev/null 2>&1 \
    && ! compgen -G "/usr/lib/postgresql/*/bin/pgbench" >/dev/null; then
    echo "pgbench not found: install it (Debian: apt-get install -y postgresql-15) or set PGBENCH" >&2
    exit 1
fi

mkdir -p target/bench
phases=",${BENCH_PHASES:-},"

if [[ "$phases" == *,langgraph,* ]]; then
    # The LangGraph phase's interpreter, remade whenever the pinned requirements change.
    venv=target/bench/langgraph-venv
    if ! cmp -s bench/langgraph-requirements.txt "$venv/requirements.txt" 2>/dev/null; then
        rm -rf "$venv"
        python3 -m venv "$venv"
        "$venv/bin/pip" install --quiet -r bench/langgraph-requirements.txt
        cp bench/langgraph-requirements.txt "$venv/requirements.txt"
    fi
    export BENCH_LANGGRAPH_PYTHON="$PWD/$venv/bin/python"
fi

if [[ "$phases" == *,base,* || "$phases" == *,registration,* ]]; then
    # The base build: its own checkout (git worktree, detached) and its own target dir, so that neither today's
    # target/release nor the working tree changes; a first build starts from a copy of today's release
    # dependencies, which cargo reuses where the base's lock file names the same.
    base_commit=$(git rev-parse --verify "${BENCH_BASE_COMMIT:-$(git log --first-parent --merges -n 1 --format=%H HEAD~1)}^{commit}")
    base_dir="$PWD/target/bench-base/${base_commit:0:12}"
    if [ ! -d "$base_dir/src" ]; then
        git worktree add --detach "$base_dir/src" "$base_commit"
    fi
    if [ ! -d "$base_dir/target/release" ] && [ -d target/release/deps ]; then
        mkdir -p "$base_dir/target/release"
        cp -a target/release/deps target/release/build target/release/.fingerprint "$base_dir/target/release/"
    fi
    (cd "$base_dir/src" && CARGO_TARGET_DIR="$base_dir/target" cargo build --release --locked --bin approval-resume)
    export BENCH_BASE_BINARY="$base_dir/target/release/approval-resume"
    export BENCH_BASE_COMMIT="${base_commit:0:7} ($(git log -n 1 --format=%cs "$base_commit"))"
fi
# The service under test is the shipped binary, built in release; the harness is a bench target (release too).
# One cargo invocation for both, so that dependencies are built once, with one set of features.
cargo build --release --bin approval-resume --bench decisions

started=$(date +%s)
cargo bench --bench decisions -- "$@" | tee target/bench/report.md

if [ "$#" -eq 0 ] && [ "${BENCH_MICRO:-1}" = 1 ]; then
    echo
    echo "## Micro-benchmarks of the pure core (criterion, 1 s warm-up, 2 s measurement each)"
    echo
    cargo bench --bench core -- --warm-up-time 1 --measurement-time 2 | tee target/bench/core.txt
fi
echo "bench/run.sh took $(($(date +%s) - started)) s after the build."
