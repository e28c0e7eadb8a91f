-- The floor: the SQL statements that ONE deny decision issues in the service, in the same order, in the same
-- transaction shape, with nothing else (no HTTP, no JSON, no Rust). Run by `bash bench/run.sh` through pgbench
-- (-M prepared, as sqlx prepares and caches every statement). Six round trips, copied from:
--   src/http/extract.rs      the key lookup (storage/clients.rs find_active_by_key_hash), outside the transaction
--   src/resume/mod.rs        decide_to_completion, the deny path, one transaction:
--   src/storage/deciding.rs  lock_run (the run under its lock, the decider, the turn's decision, the transcript),
--                            calls_through (the turn's calls and the earlier turns' results),
--                            record_denial (decision, results, tool events, status and the run.resumed event in
--                            the outbox, in one statement; no notify since issue 12)
-- Each transaction decides a fresh waiting run: the harness seeds runs with ids md5('floor' || n) and each
-- client walks its own arithmetic sequence of n (variables persist across a client's transactions).
-- Variables given by the harness with -D: base, nc (clients), i (0), keyhash, tenant, turn, digest, client,
-- content (the denial text), callid, tool, argbytes, resbytes, channel, payload.
\set n :base + :i * :nc + :client_id
\set i :i + 1
\set uid :n % 100 + 1
select name, tenant, key_prefix, scopes, created_at, revoked_at
from api_clients where key_hash = :keyhash and revoked_at is null;
begin;
select r.*,
       u.uid is not null as decider_found, u.is_admin, u.can_approve_others, u.disabled,
       e.turn_index as decision_turn_index, e.approved, e.decider_uid, e.decided_by, e.reason,
       e.turn_digest as decision_turn_digest, e.client_name, e.decided_at
from (select id, tenant, owner_uid, status, privacy_level, require_second_approver, registration_hash,
             tools, turn_index, turn_digest, turn_request_hash, lease_owner, lease_until, created_at,
             updated_at, messages, messages_from_jsonb, messages_sealed
      from runs where id = md5('floor' || :n)::uuid and tenant = :tenant for update) r
left join backend_users u on u.tenant = r.tenant and u.uid = :uid
left join approval_events e on e.run_id = r.id and e.turn_index = r.turn_index;
select turn_index, position, call_id, tool, arguments, effect, started_at, outcome, is_error, content, finished_at
from turn_calls
where run_id = md5('floor' || :n)::uuid and turn_index <= :turn and (turn_index = :turn or outcome is not null)
order by turn_index, position;
with decision as (
    insert into approval_events (run_id, turn_index, approved, decider_uid, decided_by, reason, turn_digest,
                                 client_name)
    values (md5('floor' || :n)::uuid, :turn, false, :uid, 'run_owner', null, :digest, :client)
    returning turn_index, approved, decider_uid, decided_by, reason, turn_digest, client_name, decided_at
), stored as (
    update turn_calls c set outcome = r.outcome, is_error = r.is_error, content = r.content, finished_at = now()
    from unnest(array[0]::int[], array['denied']::text[], array[true]::bool[], array[:content]::text[])
         as r(position, outcome, is_error, content)
    where c.run_id = md5('floor' || :n)::uuid and c.turn_index = :turn and c.position = r.position
      and c.outcome is null
    returning c.position, c.finished_at
), events as (
    insert into tool_events (run_id, turn_index, position, call_id, tool, outcome, is_error, decided_by,
                             privacy_level, arguments_bytes, result_bytes, arguments, result,
                             started_at, finished_at)
    select md5('floor' || :n)::uuid, :turn, e.position, e.call_id, e.tool, e.outcome, e.is_error, e.decided_by,
           e.privacy_level, e.arguments_bytes, e.result_bytes, e.arguments, e.result, c.started_at,
           coalesce(s.finished_at, c.finished_at)
    from unnest(array[0]::int[], array[:callid]::text[], array[:tool]::text[], array['denied']::text[],
                array[true]::bool[], array['run_owner']::text[], array['metadata']::text[],
                array[:argbytes]::int[], array[:resbytes]::int[], array[null]::text[], array[null]::text[])
         as e(position, call_id, tool, outcome, is_error, decided_by, privacy_level,
              arguments_bytes, result_bytes, arguments, result)
    join turn_calls c on c.run_id = md5('floor' || :n)::uuid and c.turn_index = :turn and c.position = e.position
    left join stored s on s.position = e.position
), resumed as (
    update runs set status = 'resumed', lease_owner = null, lease_until = null, updated_at = now()
    where id = md5('floor' || :n)::uuid
    returning id, tenant
), outboxed as (
    insert into events (tenant, run_id, type, data)
    select tenant, id, 'run.resumed', :payload::jsonb from resumed
    returning id
)
select decision.* from decision cross join resumed cross join outboxed;
commit;
