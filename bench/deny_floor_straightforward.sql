-- The straightforward floor (issue 43; BENCHMARKS.md, "The straightforward floor and LangGraph"): one deny decision as
-- a straightforward implementation makes it, keeping the transcript as a `jsonb` array in the run's row and
-- rewriting it. Run by `BENCH_PHASES=straightforward bash bench/run.sh` through pgbench (-M prepared) with as many
-- connections as the service phase has clients, alternated with it, on the tables of the schema `straight`
-- (benches/decisions/straightforward.rs creates and seeds them): primary keys, an index on `run_id` where events
-- are read by run, no foreign keys and nothing else, logged tables at the server's own durability.
--   BEGIN; the run with its transcript FOR UPDATE; the deciding user's rights; the approval event; one tool event
--   per call (two, in one statement); the outbox row; the run's status and its transcript with the two results
--   appended; COMMIT.
-- Each transaction decides a fresh waiting run, as each of the service's clients does: the harness seeds runs with
-- ids md5('floor' || n) and each client walks its own arithmetic sequence of n (variables persist across a client's
-- transactions), so no two clients ever meet on a run.
-- Variables given by the harness with -D: base, nc (clients), i (0), tenant, turn, callid0, tool0, callid1, tool1,
-- argbytes0, argbytes1, resbytes0, resbytes1, results (the two denials as tool messages, a JSON array), payload.
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
update straight.runs set status = 'resumed', messages = messages || :results::jsonb, updated_at = now()
where id = md5('floor' || :n)::uuid;
commit;
