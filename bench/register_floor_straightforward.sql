-- The straightforward floor's registration (issue 53; BENCHMARKS.md, "What one deny writes"): one waiting run with
-- its transcript as a `jsonb` array, inserted into straight.runs (benches/decisions/straightforward.rs), the row that
-- bench/deny_floor_straightforward.sql later locks, reads and rewrites. Run by `bash bench/wal_per_deny.sh` through
-- pgbench (-M prepared, one connection), each transaction registering a fresh run: ids md5('register' || n), n walking
-- from :base (variables persist across a client's transactions).
-- Variables given by the harness with -D: base, i (0), tenant, messages (the transcript, a JSON array).
\set n :base + :i
\set i :i + 1
\set uid :n % 100 + 1
insert into straight.runs (id, tenant, owner_uid, status, turn_index, messages)
values (md5('register' || :n)::uuid, :tenant, :uid, 'waiting_for_approval', 0, :messages::jsonb);
