#!/usr/bin/env bash
# Instructions Postgres spends on a deny, counted by callgrind on a private cluster (docs/benchmarks/decision-path.md, "Checks as
# domains" and "Postgres's work per deny"). Instruction counts, unlike seconds, repeat from run to run whatever else
# the machine is doing.
#
#   bash bench/postgres_instructions.sh                 the write statement, schemas through 0009 and through 0010,
#                                                       and 0009 without any CHECK
#   bash bench/postgres_instructions.sh 0008 0010       the write statement, schemas through the migrations named
#   bash bench/postgres_instructions.sh deny            whole denies, committed, on the newest schema: the naive
#                                                       floor's transaction (bench/deny_floor_naive.sql) beside the
#                                                       service's read, its write, and both (bench/deny_floor.sql),
#                                                       and its write of denies in batches of 2 and 8, per deny
#                                                       (bench/deny_batch_sql.py)
#   bash bench/postgres_instructions.sh approve         whole approvals of one call, committed, on the newest schema:
#                                                       the service's read (bench/deny_floor.sql's), its taking write,
#                                                       its closing write (bench/approve_floor.sql), and all three,
#                                                       beside its deny's write and whole deny (bench/deny_floor.sql),
#                                                       and the naive floors' deny and approval
#                                                       (bench/deny_floor_naive.sql, bench/approve_floor_naive.sql)
#
# Schema mode: each schema gets one waiting run with one call; the write statement decides it inside a transaction
# that is rolled back (so the figure holds no commit). Deny and approve modes: 40,000 waiting runs with one call and a
# 10-message transcript, copied into the naive floor's tables as the harness does (benches/decisions/floor.rs);
# each transaction decides a fresh run and commits (synchronous_commit off: the commit's work is counted, the wait
# for the disk is not). Either way each file runs through pgbench -M prepared on one connection, 100 and then 600
# times on fresh connections; the difference over 500 is the cost of one transaction without the connection's
# start. In deny mode one file is run first and not reported: the first connections of a new database cost more.
# Needs: valgrind, pgbench and the server binaries of PostgreSQL (Debian: postgresql-15). Takes one to three minutes;
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

digest=$(printf 'a%.0s' $(seq 1 64))
key_hash="\\x$(printf '%064d' 1)"
content='Error: approval_denied (decided_by: run_owner).'
# The variables of the floor files, as the harness gives them (benches/decisions/floor.rs); -c 1, so n = base + i.
variables=(-D nc=1 -D i=0 -D keyhash="$key_hash" -D scope=decisions:write -D tenant=default -D turn=0
    -D digest="$digest" -D client=bench -D content="$content" -D callid=call_r_0 -D tool=write_file -D argbytes=2
    -D resbytes=${#content} -D payload='{}'
    -D toolmessage="{\"role\":\"tool\",\"tool_call_id\":\"call_r_0\",\"content\":\"$content\"}"
    -D leaseowner=00000000-0000-0000-0000-0000000000aa -D result='{"ok":true}' -D okbytes=2
    -D okmessage='{"role":"tool","tool_call_id":"call_r_0","content":"ok"}'
    -D verdicts='[{"call_id":"call_r_0","approved":true,"reason":null,"edited":false,"arguments_sha256":null}]')

# The callgrind total of the backend that served one pgbench run of `count` transactions of `file` from run `base`.
backend_instructions() {
    local database=$1 file=$2 base=$3 count=$4 before after backend
    before=$(ls "$work"/cg.* 2>/dev/null | sort || true)
    if ! pgbench -n -M prepared -c 1 -t "$count" -D base="$base" "${variables[@]}" -f "$file" \
        -h 127.0.0.1 -p "$port" -U postgres "$database" > "$work/pgbench.out" 2>&1 \
        || ! grep -q "failed transactions: 0 " "$work/pgbench.out"; then
        echo "pgbench failed on $file:" >&2
        cat "$work/pgbench.out" >&2
        exit 1
    fi
    sleep 2
    after=$(ls "$work"/cg.* | sort)
    # pgbench opens a connection of its own before its clients'; the client's backend is the one that ran most.
    backend=$(for file in $(comm -13 <(echo "$before") <(echo "$after")); do
        sed -n 's/^summary: //p' "$file"
    done | sort -n | tail -1)
    echo "$backend"
}

# Instructions per transaction of `file`, from runs `base` on (700 of them).
per_transaction() {
    local database=$1 file=$2 base=$3 small large
    small=$(backend_instructions "$database" "$file" "$base" 100)
    large=$(backend_instructions "$database" "$file" $((base + 100)) 600)
    echo $(( (large - small) / 500 ))
}

migrate() {
    local database=$1 last=$2 migration number
    "${psql_[@]}" -c "create database $database"
    for migration in "$root"/migrations/*.sql; do
        number=$(basename "$migration" | cut -c1-4)
        [ "$number" \> "$last" ] && break
        "${psql_[@]}" -d "$database" -f "$migration" >/dev/null
    done
}

# Deny and approve modes: the newest schema, 40,000 waiting runs of one call, and the naive floor's tables.
seed_waiting_runs() {
    local database=$1 messages
    migrate "$database" 9999
    messages=$(python3 -c '
import json
m = [{"role": "system", "content": "s" * 150}, {"role": "user", "content": "u" * 90}]
m += [{"role": "assistant", "content": "a" * 120}] * 7
m.append({"role": "assistant", "content": None, "tool_calls": [{"id": "call_r_0", "type": "function",
          "function": {"name": "write_file", "arguments": "{}"}}]})
print(json.dumps(m, separators=(",", ":")))')
    "${psql_[@]}" -d "$database" <<SQL
insert into api_clients (name, tenant, key_hash, key_prefix, scopes)
values ('bench', 'default', '$key_hash', 'ar_bench', array['decisions:write']);
insert into backend_users (tenant, uid, username, is_admin, can_approve_others, disabled)
select 'default', uid, 'user' || uid, false, false, false from generate_series(1, 100) uid;
insert into runs (id, tenant, owner_uid, status, privacy_level, require_second_approver, registration_hash, tools,
                  messages, turn_index, turn_digest)
select md5('floor' || n)::uuid, 'default', n % 100 + 1, 'waiting_for_approval', 'metadata', false, '\\x00', '[]',
       \$messages\$$messages\$messages\$, 0, '$digest'
from generate_series(1, 40000) n;
insert into turn_calls (run_id, turn_index, position, call_id, tool, arguments, effect)
select md5('floor' || n)::uuid, 0, 0, 'call_r_0', 'write_file', '{}', 'write' from generate_series(1, 40000) n;
create schema naive;
create table naive.runs (like public.runs including all);
create table naive.approval_events (like public.approval_events including all);
create table naive.tool_events (like public.tool_events including all);
alter table naive.runs alter column messages type text;
insert into naive.runs select * from public.runs;
alter table naive.runs alter column messages type jsonb using messages::jsonb;
alter table naive.approval_events add constraint approval_events_run_id_fkey
    foreign key (run_id) references naive.runs (id) on delete cascade;
alter table naive.tool_events add constraint tool_events_run_id_fkey
    foreign key (run_id) references naive.runs (id) on delete cascade;
vacuum analyze;
SQL
}

# The deny's two statements on their own, each with the floor file's variables: read.sql and deny-write.sql.
deny_statements() {
    awk '/^with resumed as/ { exit } { print }' bench/deny_floor.sql > "$work/read.sql"
    { grep '^\\set' bench/deny_floor.sql; awk '/^with resumed as/,0' bench/deny_floor.sql; } > "$work/deny-write.sql"
}

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }

if [ "${schemas[0]}" = approve ]; then
    database=approve
    seed_waiting_runs "$database"
    # The service's statements on their own, each with the floor files' variables: the deny's write, and the
    # approval's taking and closing writes (the close decides the runs the take took, so both start at one base).
    deny_statements
    { grep '^\\set' bench/approve_floor.sql; awk '/^with resuming as/,/^from decision;/' bench/approve_floor.sql; } \
        > "$work/take.sql"
    { grep '^\\set' bench/approve_floor.sql; awk '/^with resumed as/,0' bench/approve_floor.sql; } > "$work/close.sql"
    { cat "$work/read.sql"; awk '/^with resuming as/,0' bench/approve_floor.sql; } > "$work/approval.sql"
    per_transaction "$database" bench/deny_floor.sql 1 > /dev/null
    read=$(per_transaction "$database" "$work/read.sql" 701)
    deny_write=$(per_transaction "$database" "$work/deny-write.sql" 1401)
    deny=$(per_transaction "$database" bench/deny_floor.sql 2101)
    take=$(per_transaction "$database" "$work/take.sql" 2801)
    close=$(per_transaction "$database" "$work/close.sql" 2801)
    approval=$(per_transaction "$database" "$work/approval.sql" 3501)
    # The naive floors, on their own tables (their runs are apart from the service's): what the ratio is for SQL
    # that does no more than docs/design.md §5's order requires.
    naive_deny=$(per_transaction "$database" bench/deny_floor_naive.sql 4201)
    naive_approval=$(per_transaction "$database" bench/approve_floor_naive.sql 4901)
    printf '| transaction (committed) | Postgres instructions | per deny |\n|---|---:|---:|\n'
    printf '| the read (both paths) | %s | %s |\n' "$read" "$(ratio "$read" "$deny")"
    printf '| a deny: its write | %s | %s |\n' "$deny_write" "$(ratio "$deny_write" "$deny")"
    printf '| a deny: read and write (`bench/deny_floor.sql`) | %s | 1.00 |\n' "$deny"
    printf '| an approval: its taking write | %s | %s |\n' "$take" "$(ratio "$take" "$deny")"
    printf '| an approval: its closing write | %s | %s |\n' "$close" "$(ratio "$close" "$deny")"
    printf '| an approval: read, take and close | %s | %s |\n' "$approval" \
        "$(ratio "$approval" "$deny")"
    printf '| naive floor: a deny (`bench/deny_floor_naive.sql`) | %s | %s |\n' "$naive_deny" \
        "$(ratio "$naive_deny" "$deny")"
    printf '| naive floor: an approval (`bench/approve_floor_naive.sql`) | %s | %s |\n' "$naive_approval" \
        "$(ratio "$naive_approval" "$deny")"
    printf '\nAn approval costs Postgres %s times a deny with the service'"'"'s SQL, %s times with the naive floors'"'"'.\n' \
        "$(ratio "$approval" "$deny")" "$(ratio "$naive_approval" "$naive_deny")"
    exit 0
fi

if [ "${schemas[0]}" = deny ]; then
    database=deny
    seed_waiting_runs "$database"
    deny_statements
    per_transaction "$database" bench/deny_floor.sql 1 > /dev/null
    printf '| transaction (committed) | Postgres instructions per deny |\n|---|---:|\n'
    printf '| naive floor (`bench/deny_floor_naive.sql`) | %s |\n' \
        "$(per_transaction "$database" bench/deny_floor_naive.sql 701)"
    printf '| the service: its read | %s |\n' "$(per_transaction "$database" "$work/read.sql" 701)"
    printf '| the service: its write | %s |\n' "$(per_transaction "$database" "$work/deny-write.sql" 1401)"
    printf '| the service: both (`bench/deny_floor.sql`) | %s |\n' \
        "$(per_transaction "$database" bench/deny_floor.sql 2101)"
    # Denies written together (src/storage/denials.rs): the statement's instructions over the denies it holds.
    # Their runs are n >= 10000 (see the generator), base 0 for batches of 2 and 200 for batches of 8, so apart.
    for batch_base in 2:0 8:200; do
        batch=${batch_base%%:*}
        python3 bench/deny_batch_sql.py "$batch" > "$work/batch.sql"
        printf '| the service: its write, batches of %s (`bench/deny_batch_sql.py %s`), per deny | %s |\n' \
            "$batch" "$batch" "$(( $(per_transaction "$database" "$work/batch.sql" "${batch_base#*:}") / batch ))"
    done
    exit 0
fi

run_id=00000000-0000-0000-0000-000000000001
statement="$work/write.sql"
{
    echo '\set uid 1'
    echo 'begin;'
    awk '/^with resumed as/,0' "$root/bench/deny_floor.sql" | sed "s/md5('floor' || :n)::uuid/'$run_id'::uuid/g"
    echo 'rollback;'
} > "$statement"

printf '| schema | instructions per write statement |\n|---|---:|\n'
for schema in "${schemas[@]}"; do
    database="s_${schema//-/_}"
    last=${schema%%-*}
    migrate "$database" "$last"
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
    printf '| through %s | %s |\n' "$schema" "$(per_transaction "$database" "$statement" 1)"
done
