-- Calls the worker runs (docs/design.md §15): an approved call of a tool whose `executor` is `worker` is released to
-- the worker instead of being sent to an HTTP executor, and the run waits in the new status `released` until the worker
-- has posted every released call's result (POST /v1/runs/{id}/results).
--
-- 1. `turn_calls.released_at`: when the decision's turn released the call (set by the statement that moves the run to
--    `released`, in the transaction of that move). A released call is one with this set; its result is stored in the
--    call's own columns like any other (`outcome` null until the worker posts it), so "one result per call" stays a
--    property of the row. Nullable without a default: adding it rewrites nothing, and no index reads it (a run's
--    released calls are read with its turn's calls, by key).
-- 2. `released` joins the run statuses, and `run.released` the event types. As in 0010, each rule is its domain's: the
--    constraint is replaced by a wider one, added `not valid` and then validated (every stored value already fits).
--    Rolling: an instance of the previous version never writes the new values, and reads only runs it knows (it
--    answers a released run as a corrupt row, 500, until it is replaced).
--
-- Which tools are the worker's, and which may not be edited, is the run's declaration (`runs.tools`, a JSON member
-- each) or the tool configuration file's: nothing in the schema.

alter table turn_calls add column released_at timestamptz;

alter domain run_status drop constraint run_status_known;
alter domain run_status add constraint run_status_known
    check (value in ('waiting_for_approval', 'resuming', 'released', 'resumed', 'cancelled', 'completed')) not valid;
alter domain run_status validate constraint run_status_known;

alter domain event_type drop constraint event_type_known;
alter domain event_type add constraint event_type_known
    check (value in ('run.waiting', 'run.released', 'run.resumed', 'run.expired', 'run.cancelled', 'run.completed'))
    not valid;
alter domain event_type validate constraint event_type_known;
