-- The floor as it was before the deny path was merged (commit 1dc6e3e): the 14 round trips of one deny decision
-- in the service until then. `bash bench/run.sh` runs it beside bench/deny_floor.sql (phase `previous`), so the
-- gain of the merge is measured at the database, without the service. The statements were copied from:
--   src/http/extract.rs    the key lookup (storage/clients.rs find_active_by_key_hash), outside the transaction
--   src/resume/mod.rs      decide_to_completion, the deny path, one transaction:
--                          runs::lock, users::find, decisions::find, decisions::insert, runs::calls,
--                          decisions::store_results, decisions::insert_tool_events, runs::set_status,
--                          runs::notify_resumed, runs::messages, runs::calls_before
-- Seeding and variables: as bench/deny_floor.sql.
\set n :base + :i * :nc + :client_id
\set i :i + 1
\set uid :n % 100 + 1
select name, tenant, key_prefix, scopes, created_at, revoked_at
from api_clients where key_hash = :keyhash and revoked_at is null;
begin;
select id, tenant, owner_uid, status, privacy_level, require_second_approver, registration_hash,
     tools, turn_index, turn_digest, turn_request_hash, lease_owner, lease_until, created_at, updated_at
from runs where id = md5('floor' || :n)::uuid and tenant = :tenant for update;
select uid, username, is_admin, can_approve_others, disabled, created_at, updated_at
from backend_users where tenant = :tenant and uid = :uid;
select turn_index, approved, decider_uid, decided_by, reason, turn_digest, client_name, decided_at
from approval_events where run_id = md5('floor' || :n)::uuid and turn_index = :turn;
insert into approval_events (run_id, turn_index, approved, decider_uid, decided_by, reason, turn_digest, client_name)
values (md5('floor' || :n)::uuid, :turn, false, :uid, 'run_owner', null, :digest, :client)
returning turn_index, approved, decider_uid, decided_by, reason, turn_digest, client_name, decided_at;
select position, call_id, tool, arguments, effect, started_at, outcome, is_error, content, finished_at
from turn_calls where run_id = md5('floor' || :n)::uuid and turn_index = :turn order by position;
update turn_calls c set outcome = r.outcome, is_error = r.is_error, content = r.content, finished_at = now()
from unnest(array[0]::int[], array['denied']::text[], array[true]::bool[], array[:content]::text[])
     as r(position, outcome, is_error, content)
where c.run_id = md5('floor' || :n)::uuid and c.turn_index = :turn and c.position = r.position and c.outcome is null;
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
join turn_calls c on c.run_id = md5('floor' || :n)::uuid and c.turn_index = :turn and c.position = e.position;
update runs set status = 'resumed', lease_owner = null, lease_until = null, updated_at = now()
where id = md5('floor' || :n)::uuid
returning id, tenant, owner_uid, status, privacy_level, require_second_approver, registration_hash,
     tools, turn_index, turn_digest, turn_request_hash, lease_owner, lease_until, created_at, updated_at;
select pg_notify(:channel, :payload);
select messages from runs where id = md5('floor' || :n)::uuid;
select position, call_id, tool, arguments, effect, started_at, outcome, is_error, content, finished_at
from turn_calls where run_id = md5('floor' || :n)::uuid and turn_index < :turn and outcome is not null
order by turn_index, position;
commit;
