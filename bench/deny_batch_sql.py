#!/usr/bin/env python3
"""Prints a pgbench file that denies K waiting runs in one statement, as src/storage/denials.rs writes a batch
(record_many; the same statement, with pgbench variables for the bound arrays). Used by
`bash bench/postgres_instructions.sh deny` to count Postgres's work per deny in a batch of K.

    python3 bench/deny_batch_sql.py K > file.sql

Each transaction takes runs md5('floor' || n) for n = 10000 + (base + i) * K + j, j < K; the variables are the
floor files' (bench/deny_floor.sql)."""
import sys
k = int(sys.argv[1])
ids = ", ".join(f"md5('floor' || (:m::int + {j}))::uuid" for j in range(k))
def arr(v, t): return f"array[{', '.join([v]*k)}]::{t}[]"
print(r"""\set i :i + 1
\set m 10000 + (:base + :i) * K
\set uid :base % 100 + 1
with locked as (
    select id, status, turn_index, expires_at from runs where id = any(array[IDS]::uuid[]) order by id
    for update skip locked
), resumed as (
    update runs r set status = 'resumed', lease_owner = null, lease_until = null, updated_at = now()
    from locked l join unnest(array[IDS]::uuid[], ARRTURN) as d(run_id, turn_index) on d.run_id = l.id
    where r.id = l.id and l.status = 'waiting_for_approval' and l.turn_index = d.turn_index
      and (l.expires_at is null or l.expires_at > clock_timestamp())
    returning r.id, r.tenant, r.turn_index
), stored as (
    update turn_calls c set outcome = s.outcome, is_error = s.is_error, content = s.content,
                            content_sealed = s.content_sealed, finished_at = now()
    from unnest(array[IDS]::uuid[], ARRPOS, ARROUT, ARRTRUE, ARRCONTENT, ARRNULLB)
         as s(run_id, position, outcome, is_error, content, content_sealed)
    join resumed on resumed.id = s.run_id
    where c.run_id = any(array[IDS]::uuid[]) and c.run_id = s.run_id and c.turn_index = resumed.turn_index
      and c.position = s.position and c.outcome is null
    returning c.run_id
), events as (
    insert into tool_events (run_id, turn_index, position, call_id, tool, outcome, is_error, decided_by,
                             privacy_level, arguments_bytes, result_bytes, arguments, result,
                             arguments_sealed, result_sealed, started_at, finished_at)
    select e.run_id, resumed.turn_index, e.position, e.call_id, e.tool, e.outcome, e.is_error, e.decided_by,
           e.privacy_level, e.arguments_bytes, e.result_bytes, e.arguments, e.result, e.arguments_sealed,
           e.result_sealed, null, now()
    from unnest(array[IDS]::uuid[], ARRPOS, ARRCALL, ARRTOOL, ARROUT, ARRTRUE, ARROWNER, ARRMETA, ARRARGB, ARRRESB,
                ARRNULLT, ARRNULLT, ARRNULLB, ARRNULLB)
         as e(run_id, position, call_id, tool, outcome, is_error, decided_by, privacy_level,
              arguments_bytes, result_bytes, arguments, result, arguments_sealed, result_sealed)
    join resumed on resumed.id = e.run_id
), outboxed as (
    insert into events (tenant, run_id, type, data)
    select resumed.tenant, resumed.id, 'run.resumed', d.data
    from unnest(array[IDS]::uuid[], ARRPAYLOAD) as d(run_id, data) join resumed on resumed.id = d.run_id
    returning run_id
), decision as (
    insert into approval_events (run_id, turn_index, approved, decider_uid, decided_by, reason, turn_digest,
                                 client_name, token_kid, calls)
    select d.run_id, d.turn_index, d.approved, d.decider_uid, d.decided_by, d.reason, d.turn_digest, d.client_name,
           d.token_kid, d.calls
    from unnest(array[IDS]::uuid[], ARRTURN, ARRFALSE, ARRUID, ARROWNER, ARRNULLT, ARRDIGEST, ARRCLIENT, ARRNULLT,
                ARRCALLS) as d(run_id, turn_index, approved, decider_uid, decided_by, reason, turn_digest,
                               client_name, token_kid, calls)
    join resumed on resumed.id = d.run_id
    returning run_id, turn_index, approved, decider_uid, decided_by, reason, turn_digest, client_name, decided_at,
              token_kid, calls
)
select l.id as locked_run_id, recorded.*
from locked l
left join (select decision.* from decision join outboxed using (run_id)) recorded on recorded.run_id = l.id;"""
 .replace("IDS", ids).replace(" * K", f" * {k}")
 .replace("ARRTURN", arr(":turn", "int")).replace("ARRPOS", arr("0", "int"))
 .replace("ARROUT", arr("'denied'", "text")).replace("ARRTRUE", arr("true", "bool")).replace("ARRFALSE", arr("false", "bool"))
 .replace("ARRCONTENT", arr(":content", "text")).replace("ARRNULLB", arr("null", "bytea")).replace("ARRNULLT", arr("null", "text"))
 .replace("ARRCALLS", arr("'[]'", "jsonb")).replace("ARRCALL", arr(":callid", "text")).replace("ARRTOOL", arr(":tool", "text")).replace("ARROWNER", arr("'run_owner'", "text"))
 .replace("ARRMETA", arr("'metadata'", "text")).replace("ARRARGB", arr(":argbytes", "int")).replace("ARRRESB", arr(":resbytes", "int"))
 .replace("ARRPAYLOAD", arr(":payload", "jsonb")).replace("ARRUID", arr(":uid", "bigint")).replace("ARRDIGEST", arr(":digest", "text"))
 .replace("ARRCLIENT", arr(":client", "text")))
