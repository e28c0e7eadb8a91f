-- The naive approval floor (what an approval costs at the least): the writes a straightforward implementation makes for
-- one approval of one call, in the order docs/design.md §5 requires, and nothing else: no key lookup, no outbox, no
-- separate table of calls, no executor. It is bench/deny_floor_naive.sql's approve-path twin, run the same way (pgbench
-- -M prepared at the service's client count, on the `naive` tables the harness copies from the service's, right after
-- the naive deny floor), so that the ratio of the two floors is that of the two paths when nothing but Postgres does
-- the writes.
--   The decision is recorded before any call runs, and the calls run outside any transaction (§5): BEGIN; the run
--   FOR UPDATE; the approval event; the run to `resuming`; COMMIT. (Here the executor would run.) Then the outcome
--   is stored: BEGIN; the tool event; the run `resumed`, its stored transcript with the call's result appended, only
--   while it is still `resuming`; COMMIT. One script is one approval: pgbench's tps is approvals per second.
-- Variables as in bench/deny_floor_naive.sql, plus okbytes and okmessage (the no-op executor's result, as the
-- content's length and as the tool message appended to the transcript).
\set n :base + :i * :nc + :client_id
\set i :i + 1
\set uid :n % 100 + 1
begin;
select * from naive.runs where id = md5('floor' || :n)::uuid and tenant = :tenant for update;
insert into naive.approval_events (run_id, turn_index, approved, decider_uid, decided_by, reason, turn_digest,
                                   client_name)
values (md5('floor' || :n)::uuid, :turn, true, :uid, 'run_owner', null, :digest, :client);
update naive.runs set status = 'resuming', updated_at = now()
where id = md5('floor' || :n)::uuid;
commit;
begin;
insert into naive.tool_events (run_id, turn_index, position, call_id, tool, outcome, is_error, decided_by,
                               privacy_level, arguments_bytes, result_bytes, arguments, result, started_at,
                               finished_at)
values (md5('floor' || :n)::uuid, :turn, 0, :callid, :tool, 'ok', false, 'run_owner', 'metadata', :argbytes,
        :okbytes, null, null, now(), now());
update naive.runs set status = 'resumed', messages = messages || jsonb_build_array(:okmessage::jsonb),
                      updated_at = now()
where id = md5('floor' || :n)::uuid and status = 'resuming';
commit;
