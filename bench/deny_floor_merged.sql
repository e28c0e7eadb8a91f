-- A proposal, not what the service does today: the same deny decision as deny_floor.sql in 5 round trips
-- instead of 14 (plus sqlx's pool pings). Same rows read, same rows written, same locks, one transaction:
--   1. the key lookup (unchanged; it runs in the extractor, before the decision);
--   2. BEGIN;
--   3. one read under the run's row lock: the run and its transcript, the decider's row, an existing decision of
--      the turn, and every call through the current turn (the current turn's for the results, the earlier
--      turns' for the model input) -- everything authorize() and results::denied() need;
--   4. one write: approval event, results, tool events and status in a data-modifying CTE, plus the notify.
--      The tool events take started_at/finished_at from the updated rows (a CTE sees the old turn_calls rows);
--   5. COMMIT.
-- The harness runs it beside the current floor, so the gain is measured, not guessed.
\set n :base + :i * :nc + :client_id
\set i :i + 1
\set uid :n % 100 + 1
select name, tenant, key_prefix, scopes, created_at, revoked_at
from api_clients where key_hash = :keyhash and revoked_at is null;
begin;
select r.id, r.tenant, r.owner_uid, r.status, r.privacy_level, r.require_second_approver, r.registration_hash,
       r.tools, r.turn_index, r.turn_digest, r.turn_request_hash, r.lease_owner, r.lease_until, r.created_at,
       r.updated_at, r.messages,
       u.uid, u.is_admin, u.can_approve_others, u.disabled,
       e.approved, e.decider_uid, e.decided_by, e.reason, e.turn_digest as decided_digest, e.client_name,
       e.decided_at,
       (select coalesce(json_agg(json_build_object('turn_index', c.turn_index, 'position', c.position,
                'call_id', c.call_id, 'tool', c.tool, 'arguments', c.arguments, 'effect', c.effect,
                'started_at', c.started_at, 'outcome', c.outcome, 'is_error', c.is_error, 'content', c.content,
                'finished_at', c.finished_at) order by c.turn_index, c.position), '[]')
        from turn_calls c where c.run_id = r.id and c.turn_index <= r.turn_index) as calls
from runs r
left join backend_users u on u.tenant = r.tenant and u.uid = :uid
left join approval_events e on e.run_id = r.id and e.turn_index = r.turn_index
where r.id = md5('floor' || :n)::uuid and r.tenant = :tenant
for update of r;
with decision as (
    insert into approval_events (run_id, turn_index, approved, decider_uid, decided_by, reason, turn_digest,
                                 client_name)
    values (md5('floor' || :n)::uuid, :turn, false, :uid, 'run_owner', null, :digest, :client)
    returning turn_index, approved, decider_uid, decided_by, reason, turn_digest, client_name, decided_at
), results as (
    update turn_calls c set outcome = r.outcome, is_error = r.is_error, content = r.content, finished_at = now()
    from unnest(array[0]::int[], array['denied']::text[], array[true]::bool[], array[:content]::text[])
         as r(position, outcome, is_error, content)
    where c.run_id = md5('floor' || :n)::uuid and c.turn_index = :turn and c.position = r.position
      and c.outcome is null
    returning c.position, c.started_at, c.finished_at
), events as (
    insert into tool_events (run_id, turn_index, position, call_id, tool, outcome, is_error, decided_by,
                             privacy_level, arguments_bytes, result_bytes, arguments, result,
                             started_at, finished_at)
    select md5('floor' || :n)::uuid, :turn, e.position, e.call_id, e.tool, e.outcome, e.is_error, e.decided_by,
           e.privacy_level, e.arguments_bytes, e.result_bytes, e.arguments, e.result, c.started_at, c.finished_at
    from unnest(array[0]::int[], array[:callid]::text[], array[:tool]::text[], array['denied']::text[],
                array[true]::bool[], array['run_owner']::text[], array['metadata']::text[],
                array[:argbytes]::int[], array[:resbytes]::int[], array[null]::text[], array[null]::text[])
         as e(position, call_id, tool, outcome, is_error, decided_by, privacy_level,
              arguments_bytes, result_bytes, arguments, result)
    join results c on c.position = e.position
), resumed as (
    update runs set status = 'resumed', lease_owner = null, lease_until = null, updated_at = now()
    where id = md5('floor' || :n)::uuid
    returning updated_at
)
select d.*, pg_notify(:channel, :payload) from decision d cross join resumed;
commit;
