-- Fewer index entries written per decision (issues 12 and 17; BENCHMARKS.md, "Lighter writes per decision").
--
-- 1. A call's result is stored by updating its `turn_calls` row (a deny, an approval's executor results, a start
--    mark). No indexed column changes, so Postgres can write the new version as a heap-only tuple (HOT), without
--    touching the row's two indexes, but only when the row's page has room for it. Rows are inserted when a turn is
--    registered, so pages fill to the brim, and about a third of these updates were measured going to another page
--    with two new index entries each. Leaving a fifth of each new page free keeps them on their page. Pages written
--    before this migration keep their layout until they are rewritten (VACUUM FULL, or pg_repack); nothing here
--    rewrites the table.
alter table turn_calls set (fillfactor = 80);

-- 2. The outbox had two indexes on the same order: the primary key (id) and events_order (xid, id), which the
--    feed's wake-up reads for the newest readable event and retention for the oldest. One unique index on
--    (xid, id) serves all three (ids are unique, so the pair is), and every event then costs one index entry fewer.
--    Nothing refers to events by id alone: consumers see public_id, and retention now deletes by (xid, id).
alter table events drop constraint events_pkey;
drop index events_order;
alter table events add constraint events_pkey primary key (xid, id);
