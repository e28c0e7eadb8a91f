-- The worker's state (DESIGN.md §15): the JSON a worker registered with its run or its latest turn (an agent SDK's
-- serialized run state), kept as the text it sent, byte for byte, so that it comes back exactly as it went in.
--
-- Sealed like the transcript when ENCRYPTION_KEYS is set (`worker_state_sealed`, associated data
-- `runs.worker_state` and the run id; src/storage/sealed.rs), in clear otherwise: at most one of the pair is set,
-- and neither when the run has no state. As for `system` (0011), the rule is not checked here: a check on `runs`
-- costs every decision's update (0010), and the service writes exactly one of the pair or none.
--
-- On `runs` rather than a table of its own: the state lives and dies with the run (a purge deletes the row), and
-- `keys status` and `keys rotate` take a run's sealed columns together. Nothing reads the columns but the one
-- answer that gives the state back: the run's other reads name their columns, so a large state is never loaded
-- beside them, and Postgres keeps a large value out of line (TOAST), so the row's other updates do not copy it.
-- Both columns are nullable without a default: adding them rewrites nothing.

alter table runs
    add column worker_state text,
    add column worker_state_sealed bytea;
