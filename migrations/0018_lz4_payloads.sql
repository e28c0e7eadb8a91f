-- Long texts compressed with lz4 instead of pglz (issues 39 and 43; docs/benchmarks/big-bodies.md, "Not the WAL: pglz,
-- then the cores").
--
-- Postgres compresses every text it moves out of line (TOAST, past about 2 KB) with the column's method, pglz unless
-- told otherwise. pglz is slow: with 48 clients registering 8 MiB transcripts for 30 s, Postgres spent 13.8-14.0 s
-- of CPU with pglz and 5.1-5.3 s with lz4, on the connections of those registrations, while small decisions waited
-- for the same two cores; and every deny of a long conversation decompresses its 35 KB transcript to answer with it.
-- lz4 compresses and decompresses several times faster, for somewhat larger stored text.
--
-- Only the columns that hold a person's or a model's long text in clear: the transcript (`messages`), a native
-- run's system prompt, the worker's state, a call's arguments (as posted and as edited) and result, and a tool
-- event's arguments and result. The sealed twins (`*_sealed`, ENCRYPTION_KEYS) hold ciphertext, which no method
-- compresses, so their method does not matter.
--
-- A column's method applies to values written from now on; values already stored keep pglz and read as before
-- (Postgres records the method with each value). Servers built without lz4 (`default_toast_compression` does not
-- offer it) keep pglz: the service works the same on them, only slower with long texts.
do $$
begin
    if exists (select 1 from pg_settings where name = 'default_toast_compression' and 'lz4' = any (enumvals)) then
        alter table runs
            alter column messages set compression lz4,
            alter column system set compression lz4,
            alter column worker_state set compression lz4;
        alter table turn_calls
            alter column arguments set compression lz4,
            alter column edited_arguments set compression lz4,
            alter column content set compression lz4;
        alter table tool_events
            alter column arguments set compression lz4,
            alter column result set compression lz4;
    end if;
end
$$;
