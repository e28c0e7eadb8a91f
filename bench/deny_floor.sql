-- The floor: the SQL statements that ONE deny decision issues in the service, in the same order, with nothing else
-- (no HTTP, no JSON, no Rust). Run by `bash bench/run.sh` through pgbench (-M prepared, as sqlx prepares and caches
-- every statement). Two round trips and no transaction block, copied from:
--   src/storage/run_snapshot.rs  the run read without its lock, the API key's client, the decider, the turn's
--                                decision and expiry, and the calls through the turn (one array of records), in one
--                                statement
--   src/storage/decision_statements/      record_denial: the run moved on only while it still waits on the turn read, then the
--                                results, tool events, the decision and the run.resumed event in the outbox, in one
--                                statement (no pg_notify: it serialized commits)
-- Each transaction decides a fresh waiting run: the harness seeds runs with ids md5('floor' || n) and each
-- client walks its own arithmetic sequence of n (variables persist across a client's transactions).
-- Variables given by the harness with -D: base, nc (clients), i (0), keyhash, scope, tenant, turn, digest, client,
-- content (the denial text), callid, tool, argbytes, resbytes, channel, payload.
\set n :base + :i * :nc + :client_id
\set i :i + 1
\set uid :n % 100 + 1
with reader as (select name, tenant, scopes, :scope = any (scopes) as may_read
                from api_clients where key_hash = :keyhash and revoked_at is null)
select reader.name as key_client_name, reader.tenant as key_client_tenant, reader.scopes as key_client_scopes,
       r.id is not null as run_found,
       r.id, r.tenant, r.owner_uid, r.status, r.privacy_level, r.require_second_approver,
       r.registration_hash, r.tools, r.turn_index, r.turn_digest, r.turn_request_hash, r.lease_owner,
       r.lease_until, r.expires_at, r.created_at, r.updated_at, r.messages, r.messages_from_jsonb,
       r.messages_sealed,
       u.uid is not null as decider_found, u.is_admin, u.can_approve_others, u.disabled, u.approvable_tools,
       e.turn_index as decision_turn_index, e.approved, e.decider_uid, e.decided_by, e.reason,
       e.turn_digest as decision_turn_digest, e.client_name, e.decided_at, e.token_kid, e.calls,
       coalesce(r.expires_at <= clock_timestamp(), false) as past_expiry,
       x.turn_index is not null as expired,
       c.*
from reader
left join runs r on r.id = md5('floor' || :n)::uuid and r.tenant = reader.tenant and reader.may_read
left join backend_users u on u.tenant = r.tenant and u.uid = :uid
left join approval_events e on e.run_id = r.id and e.turn_index = r.turn_index
left join turn_expiries x on x.run_id = r.id and x.turn_index = r.turn_index
left join lateral (
    select array_agg(row(k.turn_index, k.position::integer, k.call_id, k.tool::text, k.arguments, k.arguments_sealed,
                         k.effect::text, k.started_at, k.outcome::text, k.is_error, k.content, k.content_sealed,
                         k.finished_at, k.edited_arguments, k.edited_arguments_sealed)) as call_records
    from turn_calls k
    where k.run_id = r.id and k.turn_index <= r.turn_index and (k.turn_index = r.turn_index or k.outcome is not null)
) c on true;
with resumed as (
    update runs set status = 'resumed', lease_owner = null, lease_until = null, updated_at = now()
    where id = md5('floor' || :n)::uuid and coalesce(status = 'waiting_for_approval', false) and turn_index = :turn
      and (expires_at is null or expires_at > clock_timestamp())
    returning id, tenant
), stored as (
    update turn_calls c set outcome = r.outcome, is_error = r.is_error, content = r.content, finished_at = now()
    from unnest(array[0]::int[], array['denied']::text[], array[true]::bool[], array[:content]::text[])
         as r(position, outcome, is_error, content)
    where c.run_id = md5('floor' || :n)::uuid and c.turn_index = :turn and c.position = r.position
      and c.outcome is null and exists (select from resumed)
    returning c.position, c.finished_at
), events as (
    insert into tool_events (run_id, turn_index, position, call_id, tool, outcome, is_error, decided_by,
                             privacy_level, arguments_bytes, result_bytes, arguments, result,
                             started_at, finished_at)
    select md5('floor' || :n)::uuid, :turn, e.position, e.call_id, e.tool, e.outcome, e.is_error, e.decided_by,
           e.privacy_level, e.arguments_bytes, e.result_bytes, e.arguments, e.result, null, now()
    from unnest(array[0]::int[], array[:callid]::text[], array[:tool]::text[], array['denied']::text[],
                array[true]::bool[], array['run_owner']::text[], array['metadata']::text[],
                array[:argbytes]::int[], array[:resbytes]::int[], array[null]::text[], array[null]::text[])
         as e(position, call_id, tool, outcome, is_error, decided_by, privacy_level,
              arguments_bytes, result_bytes, arguments, result)
    cross join resumed
), outboxed as (
    insert into events (tenant, run_id, type, data)
    select tenant, id, 'run.resumed', :payload::jsonb from resumed
    returning id
), decision as (
    insert into approval_events (run_id, turn_index, approved, decider_uid, decided_by, reason, turn_digest,
                                 client_name)
    select md5('floor' || :n)::uuid, :turn, false, :uid, 'run_owner', null, :digest, :client from resumed
    returning turn_index, approved, decider_uid, decided_by, reason, turn_digest, client_name, decided_at
)
select decision.* from decision cross join outboxed;
