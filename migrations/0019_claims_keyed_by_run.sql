-- A claim is known by its run and its id (issue 50): every key of a run-scoped table begins with `run_id`, so that
-- the tables can be distributed by run id (docs/design.md §12, docs/operations.md "Past one primary"), and a
-- distribution by run id (Citus) refuses a unique constraint without the distribution column. Migration 0016 made
-- `claim_id` unique on its own; every statement that names a claim already knows its run (the run's row lock is
-- taken first), so the pair is the key, and a claim id drawn at random (v4) still names one claim of a run.
--
-- The new constraint is added before the old one is dropped, so that no moment leaves a claim id unguarded; the
-- table holds one row per claimed turn, so the index builds quickly.

alter table worker_claims add constraint worker_claims_run_claim_key unique (run_id, claim_id);
alter table worker_claims drop constraint worker_claims_claim_id_key;
