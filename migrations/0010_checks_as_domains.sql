-- The same rules for what a column may hold, checked where they cost least (issues 12 and 17; BENCHMARKS.md,
-- "Checks as domains").
--
-- Postgres compiles a table's CHECK constraints afresh for every statement that writes the table (it reads each
-- stored expression, plans it and builds its evaluator: `ExecRelCheck`), and evaluates all of them on every UPDATE,
-- whatever columns it sets. A deny wrote to tables holding 20 of them. Counted with callgrind on a Postgres backend
-- (bench/postgres_instructions.sh), the deny's write statement (rolled back, so without its commit) was 1,474,831
-- instructions; without any CHECK at all 820,712. A domain's check is compiled once per backend and kept (the type cache), and is run only on a value
-- assigned to the column.
--
-- 1. One domain per single-column rule: a row can hold exactly what it could before.
-- 2. The rules over several columns stay table constraints, one per table (each constraint costs its own setup).
-- 3. The outbox's foreign key to `runs` goes: every event is written by a statement that holds its run's row
--    (inserting, updating or locking it), so an event of a missing run cannot be written; the key's check cost each
--    event a query on `runs`. Its `on delete cascade` is now the retention purge's own delete of the run's events.
-- With all three the statement is 932,686 instructions (-37 %).
--
-- Not rolling: the columns' types change, so an earlier instance still running fails the statements it prepared
-- before this migration ("cached plan must not change result type"). Stop every instance of an earlier version
-- before the first instance of this one starts and migrates (README, "Many instances").
--
-- Nothing here rewrites a table: each domain gets its column while it has no constraint (a change Postgres knows
-- needs no rewrite), then its constraint is added and validated against the rows already there.

create domain run_status as text;
create domain privacy_level as text;
create domain recorded_privacy_level as text;
create domain call_effect as text;
create domain call_outcome as text;
create domain decider_kind as text;
create domain decision_reason as text;
create domain event_type as text;
create domain sha256_hex as text;
create domain tool_name as text;
create domain non_negative_integer as integer;
create domain non_negative_bigint as bigint;

alter table runs
    drop constraint runs_status_check,
    drop constraint runs_privacy_level_check,
    drop constraint runs_owner_uid_check,
    drop constraint runs_turn_index_check,
    drop constraint runs_turn_digest_check,
    alter column status type run_status,
    alter column privacy_level type privacy_level,
    alter column owner_uid type non_negative_bigint,
    alter column turn_index type non_negative_integer,
    alter column turn_digest type sha256_hex;

alter table turn_calls
    drop constraint turn_calls_position_check,
    drop constraint turn_calls_effect_check,
    drop constraint turn_calls_outcome_check,
    drop constraint turn_calls_tool_check,
    drop constraint turn_calls_arguments_once,
    drop constraint turn_calls_content_once,
    drop constraint turn_calls_edited_arguments_once,
    drop constraint turn_calls_result_whole,
    alter column position type non_negative_integer,
    alter column effect type call_effect,
    alter column outcome type call_outcome,
    alter column tool type tool_name,
    -- The four rules of 0001, 0007 and 0008 in one: arguments stored once (clear or sealed), a result's content and
    -- an edit stored at most once, and a result whole (outcome, is_error and content together) or not at all.
    add constraint turn_calls_stored_once check (
        (arguments is null) <> (arguments_sealed is null)
        and (content is null or content_sealed is null)
        and (edited_arguments is null or edited_arguments_sealed is null)
        and (outcome is null) = (is_error is null)
        and (outcome is null) = (content is null and content_sealed is null));

alter table approval_events
    drop constraint approval_events_decided_by_check,
    drop constraint approval_events_reason_check,
    alter column decided_by type decider_kind,
    alter column reason type decision_reason;

alter table tool_events
    drop constraint tool_events_privacy_level_check,
    drop constraint tool_events_result_once,
    drop constraint tool_events_arguments_once,
    alter column privacy_level type recorded_privacy_level,
    add constraint tool_events_stored_once check (
        (arguments is null or arguments_sealed is null) and (result is null or result_sealed is null));

alter table events
    drop constraint events_type_check,
    drop constraint events_run_id_fkey,
    alter column type type event_type;

alter domain run_status add constraint run_status_known
    check (value in ('waiting_for_approval', 'resuming', 'resumed', 'cancelled', 'completed')) not valid;
alter domain privacy_level add constraint privacy_level_known
    check (value in ('none', 'metadata', 'redacted', 'full')) not valid;
alter domain recorded_privacy_level add constraint recorded_privacy_level_known
    check (value in ('metadata', 'redacted', 'full')) not valid;
alter domain call_effect add constraint call_effect_known
    check (value in ('read', 'write')) not valid;
alter domain call_outcome add constraint call_outcome_known
    check (value in ('ok', 'failed', 'denied', 'not_permitted', 'interrupted', 'expired')) not valid;
alter domain decider_kind add constraint decider_kind_known
    check (value in ('run_owner', 'other_user', 'unknown')) not valid;
alter domain decision_reason add constraint decision_reason_known
    check (value in ('variant', 'skip')) not valid;
alter domain event_type add constraint event_type_known
    check (value in ('run.waiting', 'run.resumed', 'run.expired', 'run.cancelled', 'run.completed')) not valid;
alter domain sha256_hex add constraint sha256_hex_shape
    check (value ~ '^[0-9a-f]{64}$') not valid;
alter domain tool_name add constraint tool_name_shape
    check (value ~ '^[A-Za-z0-9_-]{1,64}$') not valid;
alter domain non_negative_integer add constraint non_negative_integer_at_least_zero
    check (value >= 0) not valid;
alter domain non_negative_bigint add constraint non_negative_bigint_at_least_zero
    check (value >= 0) not valid;

alter domain run_status validate constraint run_status_known;
alter domain privacy_level validate constraint privacy_level_known;
alter domain recorded_privacy_level validate constraint recorded_privacy_level_known;
alter domain call_effect validate constraint call_effect_known;
alter domain call_outcome validate constraint call_outcome_known;
alter domain decider_kind validate constraint decider_kind_known;
alter domain decision_reason validate constraint decision_reason_known;
alter domain event_type validate constraint event_type_known;
alter domain sha256_hex validate constraint sha256_hex_shape;
alter domain tool_name validate constraint tool_name_shape;
alter domain non_negative_integer validate constraint non_negative_integer_at_least_zero;
alter domain non_negative_bigint validate constraint non_negative_bigint_at_least_zero;
