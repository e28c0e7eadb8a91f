#!/usr/bin/env bash
# Instructions Postgres spends on one deny's write statement (the second statement of bench/deny_floor.sql), counted
# by callgrind on a private cluster, for the schema after each migration given (BENCHMARKS.md, "Checks as domains").
# Instruction counts, unlike seconds, repeat from run to run whatever else the machine is doing.
#
#   bash bench/postgres_instructions.sh                 schemas through 0009 and through 0010, and 0009 without any CHECK
#   bash bench/postgres_instructions.sh 0008 0010       schemas through the migrations named
#
# Each schema gets one waiting run with one call; the statement decides it inside a transaction that is rolled back
# (so the figure holds no commit), through pgbench -M prepared on one connection, 100 and then 600 times on fresh
# connections; the difference over 500 is the cost of one statement without the connection's start.
# Needs: valgrind, pgbench and the server binaries of PostgreSQL (Debian: postgresql-15). Takes about two minutes;
# the cluster lives in a temporary directory on PORT (5499) and is removed at the end.
set -euo pipefail

cd "$(dirname "$0")/.."
root=$(pwd)
bin=${PG_BIN:-$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)}
port=${PORT:-5499}
schemas=("$@")
[ "${#schemas[@]}" -gt 0 ] || schemas=(0009 0010 0009-without-checks)

work=$(mktemp -d /tmp/postgres-instructions.XXXXXX)
as_postgres() {
    if [ "$(id -u)" = 0 ]; then
        chown -R postgres "$work"
        su postgres -s /bin/bash -c "$1"
    else
        bash -c "$1"
    fi
}
psql_=(psql -h 127.0.0.1 -p "$port" -U postgres -q -v ON_ERROR_STOP=1)
stop() {
    as_postgres "$bin/pg_ctl -D $work/data stop -m fast" >/dev/null 2>&1 || true
    # Processes under valgrind write their counts as they exit, after the server says it stopped.
    sleep 3
    rm -rf "$work"
}
trap stop EXIT

if pg_isready -h 127.0.0.1 -p "$port" >/dev/null 2>&1; then
    echo "port $port is taken by another server; set PORT" >&2
    exit 1
fi

as_postgres "$bin/initdb -D $work/data -A trust -U postgres" >/dev/null
as_postgres "cd $work && nohup valgrind --tool=callgrind --trace-children=yes --callgrind-out-file=$work/cg.%p \
    $bin/postgres -D $work/data -p $port -k $work -c synchronous_commit=off -c autovacuum=off \
    > $work/server.log 2>&1 &"
for _ in $(seq 1 120); do
    pg_isready -h 127.0.0.1 -p "$port" >/dev/null 2>&1 && break
    sleep 1
done

run_id=00000000-0000-0000-0000-000000000001
digest=$(printf 'a%.0s' $(seq 1 64))
statement="$work/write.sql"
{
    echo '\set uid 1'
    echo 'begin;'
    awk '/^with resumed as/,0' "$root/bench/deny_floor.sql" | sed "s/md5('floor' || :n)::uuid/'$run_id'::uuid/g"
    echo 'rollback;'
} > "$statement"

# The callgrind total of the backend that served one pgbench run of `count` transactions.
backend_instructions() {
    local database=$1 count=$2 before after file
    before=$(ls "$work"/cg.* 2>/dev/null | sort || true)
    pgbench -n -M prepared -c 1 -t "$count" -D turn=0 -D content=denied -D callid=call_r_0 -D tool=write_file \
        -D argbytes=2 -D resbytes=6 -D digest="$digest" -D client=bench -D payload='{}' \
        -f "$statement" -h 127.0.0.1 -p "$port" -U postgres "$database" >/dev/null
    sleep 2
    after=$(ls "$work"/cg.* | sort)
    file=$(comm -13 <(echo "$before") <(echo "$after") | tail -1)
    sed -n 's/^summary: //p' "$file"
}

printf '| schema | instructions per write statement |\n|---|---:|\n'
for schema in "${schemas[@]}"; do
    database="s_${schema//-/_}"
    last=${schema%%-*}
    "${psql_[@]}" -c "create database $database"
    for migration in "$root"/migrations/*.sql; do
        number=$(basename "$migration" | cut -c1-4)
        [ "$number" \> "$last" ] && break
        "${psql_[@]}" -d "$database" -f "$migration" >/dev/null
    done
    if [ "$schema" != "$last" ]; then
        "${psql_[@]}" -d "$database" -At -c "select format('alter table %s drop constraint %I;', conrelid::regclass,
            conname) from pg_constraint where contype = 'c' and conrelid <> 0" | "${psql_[@]}" -d "$database"
    fi
    "${psql_[@]}" -d "$database" -c "
        insert into runs (id, tenant, owner_uid, status, privacy_level, require_second_approver, registration_hash,
                          tools, messages, turn_index, turn_digest)
        values ('$run_id', 'default', 1, 'waiting_for_approval', 'metadata', false, '\\x00', '[]', '[]', 0, '$digest');
        insert into turn_calls (run_id, turn_index, position, call_id, tool, arguments, effect)
        values ('$run_id', 0, 0, 'call_r_0', 'write_file', '{}', 'write');"
    small=$(backend_instructions "$database" 100)
    large=$(backend_instructions "$database" 600)
    printf '| through %s | %s |\n' "$schema" "$(( (large - small) / 500 ))"
done
