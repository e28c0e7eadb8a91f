-- The naive floor (the deny throughput the service must reach): the writes a straightforward implementation makes for
-- one deny decision, and nothing else: no key lookup, no outbox, no separate table of calls. Run by `bash bench/run.sh`
-- through pgbench (-M prepared) at the service's client count, on tables of the same shape as the service's
-- (`naive.runs`, `naive.approval_events`, `naive.tool_events`: created `like` ours, with their indexes, checks and
-- foreign keys), which the harness fills, before each run, with a copy of the service's runs and audit rows (the same
-- number of runs, the same transcripts) and with fresh waiting runs cloned from one the service registered.
--   BEGIN; the run FOR UPDATE (its transcript with it); the approval event; one tool event per call (the typical
--   run has one); the run's status and its stored transcript (the denial appended as a tool message); COMMIT.
-- Variables given by the harness with -D: base, nc (clients), i (0), tenant, turn, digest, client, content,
-- callid, tool, argbytes, resbytes, toolmessage (the denial as a chat message, JSON).
\set n :base + :i * :nc + :client_id
\set i :i + 1
\set uid :n % 100 + 1
begin;
select * from naive.runs where id = md5('floor' || :n)::uuid and tenant = :tenant for update;
insert into naive.approval_events (run_id, turn_index, approved, decider_uid, decided_by, reason, turn_digest,
                                   client_name)
values (md5('floor' || :n)::uuid, :turn, false, :uid, 'run_owner', null, :digest, :client);
insert into naive.tool_events (run_id, turn_index, position, call_id, tool, outcome, is_error, decided_by,
                               privacy_level, arguments_bytes, result_bytes, arguments, result, started_at,
                               finished_at)
values (md5('floor' || :n)::uuid, :turn, 0, :callid, :tool, 'denied', true, 'run_owner', 'metadata', :argbytes,
        :resbytes, null, null, null, now());
update naive.runs set status = 'resumed', messages = messages || jsonb_build_array(:toolmessage::jsonb),
                      updated_at = now()
where id = md5('floor' || :n)::uuid;
commit;
