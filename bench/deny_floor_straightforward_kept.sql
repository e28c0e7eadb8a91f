-- The straightforward floor with its transcript kept in place (issue 43's ceiling; BENCHMARKS.md, "The
-- straightforward floor, LangGraph and the base build"): bench/deny_floor_straightforward.sql statement for statement,
-- except that the run's row gets its status and nothing else, so the 35 KB `jsonb` transcript is neither rewritten
-- nor re-TOASTed (the row's update is HOT: no indexed column changes). It is the same transaction with no HTTP, no
-- key, no service and no result stored beside its tool event (a denial's text is fixed words), so its rate ÷ the
-- straightforward floor's is what not rewriting the transcript gains by itself; a design that also makes fewer round
-- trips (the service makes three where this makes eight) can go past it.
-- Variables given by the harness with -D: the straightforward floor's (results is given and unused).
\set n :base + :i * :nc + :client_id
\set i :i + 1
\set uid :n % 100 + 1
begin;
select id, tenant, owner_uid, status, turn_index, messages
from straight.runs where id = md5('floor' || :n)::uuid and tenant = :tenant for update;
select is_admin, can_approve_others, disabled, approvable_tools
from straight.users where tenant = :tenant and uid = :uid;
insert into straight.approval_events (run_id, turn_index, approved, decider_uid, decided_by, reason)
values (md5('floor' || :n)::uuid, :turn, false, :uid, 'run_owner', null);
insert into straight.tool_events (run_id, turn_index, position, call_id, tool, outcome, is_error, arguments_bytes,
                                  result_bytes)
values (md5('floor' || :n)::uuid, :turn, 0, :callid0, :tool0, 'denied', true, :argbytes0, :resbytes0),
       (md5('floor' || :n)::uuid, :turn, 1, :callid1, :tool1, 'denied', true, :argbytes1, :resbytes1);
insert into straight.outbox (tenant, run_id, type, data)
values (:tenant, md5('floor' || :n)::uuid, 'run.resumed', :payload::jsonb);
update straight.runs set status = 'resumed', updated_at = now()
where id = md5('floor' || :n)::uuid;
commit;
