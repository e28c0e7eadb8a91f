-- Issue 13 (DESIGN.md §3, §5): a verdict per call, edited arguments, and turns that expire.

-- A decision may approve some calls and deny others: `approved` is null for such a mixed decision. `calls` is the
-- audit of every verdict: [{call_id, approved, reason, edited, arguments_sha256}], never the edited arguments.
alter table approval_events alter column approved drop not null;
alter table approval_events add column calls jsonb;
update approval_events e set calls = coalesce(
    (select jsonb_agg(jsonb_build_object('call_id', c.call_id, 'approved', e.approved, 'reason', e.reason,
                                         'edited', false, 'arguments_sha256', null) order by c.position)
     from turn_calls c where c.run_id = e.run_id and c.turn_index = e.turn_index),
    '[]'::jsonb);
alter table approval_events alter column calls set not null;
-- Writers that predate verdicts (the benchmark's pgbench floor script) still insert whole-turn rows without it.
alter table approval_events alter column calls set default '[]'::jsonb;

-- The arguments a decider approved a call with, when they differ from the model's: what the executor received.
-- Payload like `arguments`: filtered in tool events, purged with the run, never logged.
alter table turn_calls add column edited_arguments text;
alter table turn_calls drop constraint turn_calls_outcome_check;
alter table turn_calls add constraint turn_calls_outcome_check check (outcome in
    ('ok', 'failed', 'denied', 'not_permitted', 'interrupted', 'expired'));

-- When the current turn expires if nobody decided it; null: never.
alter table runs add column expires_at timestamptz;
create index runs_waiting_expiry on runs (expires_at) where status = 'waiting_for_approval' and expires_at is not null;

-- The record of a turn that expired: not a decision, so not an approval event, and never a denial.
create table turn_expiries (
    run_id      uuid not null references runs (id) on delete cascade,
    turn_index  integer not null,
    expires_at  timestamptz not null,
    expired_at  timestamptz not null default now(),
    primary key (run_id, turn_index)
);
