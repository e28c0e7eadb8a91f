-- One approval's writes (a turn of one call, a no-op executor), the statements the service issues after its read, in
-- the same order, with nothing else (no HTTP, no JSON, no Rust, no executor): the approve path's counterpart of
-- bench/deny_floor.sql, whose read (src/storage/run_snapshot.rs, the same for both paths) comes before them in the
-- whole approval that `bash bench/postgres_instructions.sh approve` counts. Two round trips, no transaction block,
-- copied from:
--   src/storage/decision_statements/      take_turn: the run to `resuming` under this instance's lease, the approval event and
--                                the call marked started, only while the run still waits on the turn read (the
--                                statement of an approval that denies and edits nothing, as every whole-turn one)
--                                close_held_turn: the call's result, its tool event, the run resumed and the
--                                run.resumed event in the outbox, only while the lease is still this instance's
-- Between the two writes the service sends the call to its executor; here nothing happens.
-- Variables as in bench/deny_floor.sql, plus leaseowner (a uuid), result (the executor's answer) and verdicts (the
-- approval event's `calls`, as the service binds them for one call approved).
\set n :base + :i * :nc + :client_id
\set i :i + 1
\set uid :n % 100 + 1
with resuming as (
    update runs set status = 'resuming', lease_owner = :leaseowner::uuid,
        lease_until = now() + make_interval(secs => 30.0), updated_at = now()
    where id = md5('floor' || :n)::uuid and coalesce(status = 'waiting_for_approval', false) and turn_index = :turn
      and (expires_at is null or expires_at > clock_timestamp())
    returning id
), decision as (
    insert into approval_events (run_id, turn_index, approved, decider_uid, decided_by, reason, turn_digest,
                                 client_name, token_kid, calls)
    select md5('floor' || :n)::uuid, :turn, true, :uid, 'run_owner', null, :digest, :client, null, :verdicts::jsonb
    from resuming
    returning turn_index, approved, decider_uid, decided_by, reason, turn_digest, client_name, decided_at, token_kid,
              calls
), started as (
    update turn_calls c set started_at = now()
    where c.run_id = md5('floor' || :n)::uuid and c.turn_index = :turn and c.position = 0
      and c.started_at is null and c.outcome is null
      and exists (select from resuming)
    returning c.position
)
select decision.*,
       exists (select 1 from turn_calls c
               where c.run_id = md5('floor' || :n)::uuid and c.turn_index = :turn and c.position = 0
                 and c.started_at is null and c.outcome is null) as first_started
from decision;
with resumed as (
    update runs set status = 'resumed', lease_owner = null, lease_until = null, updated_at = now()
    where id = md5('floor' || :n)::uuid and coalesce(status = 'resuming', false) and turn_index = :turn
      and lease_owner = :leaseowner::uuid
    returning id, tenant
), stored as (
    update turn_calls c set outcome = r.outcome, is_error = r.is_error, content = r.content,
                            content_sealed = r.content_sealed, finished_at = now()
    from unnest(array[0]::int[], array['ok']::text[], array[false]::bool[], array[:result]::text[],
                array[null]::bytea[])
         as r(position, outcome, is_error, content, content_sealed)
    where c.run_id = md5('floor' || :n)::uuid and c.turn_index = :turn and c.position = r.position
      and c.outcome is null
    returning c.position, c.finished_at
), events as (
    insert into tool_events (run_id, turn_index, position, call_id, tool, outcome, is_error, decided_by,
                             privacy_level, arguments_bytes, result_bytes, arguments, result,
                             arguments_sealed, result_sealed, started_at, finished_at)
    select md5('floor' || :n)::uuid, :turn, e.position, e.call_id, e.tool, e.outcome, e.is_error, e.decided_by,
           e.privacy_level, e.arguments_bytes, e.result_bytes, e.arguments, e.result, e.arguments_sealed,
           e.result_sealed, c.started_at, coalesce(s.finished_at, c.finished_at)
    from unnest(array[0]::int[], array[:callid]::text[], array[:tool]::text[], array['ok']::text[],
                array[false]::bool[], array['run_owner']::text[], array['metadata']::text[],
                array[:argbytes]::int[], array[:resbytes]::int[], array[null]::text[], array[null]::text[],
                array[null]::bytea[], array[null]::bytea[])
         as e(position, call_id, tool, outcome, is_error, decided_by, privacy_level,
              arguments_bytes, result_bytes, arguments, result, arguments_sealed, result_sealed)
    join turn_calls c on c.run_id = md5('floor' || :n)::uuid and c.turn_index = :turn and c.position = e.position
    left join stored s on s.position = e.position
    cross join resumed
), outboxed as (
    insert into events (tenant, run_id, type, data)
    select tenant, id, 'run.resumed', :payload::jsonb from resumed
    returning id
)
select resumed.id from resumed cross join outboxed;
