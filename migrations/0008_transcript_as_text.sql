-- The transcript is kept as the JSON text the service wrote (issue 17), so that a decision's answer splices it in
-- as it is instead of parsing it into a tree and serializing that again: `jsonb` would hand back its own
-- re-formatted text (a space after every comma and colon), which is neither the bytes the service wrote nor cheap
-- to produce (Postgres prints the whole tree on every read).
--
-- Transcripts stored before this migration were written by `jsonb`: their text is valid JSON but not the compact
-- text earlier answers were rendered as. They are marked, and re-serialized on read (src/domain/transcript_text.rs),
-- so the same decision asked again still gets the same bytes after the upgrade. The mark stays with the row when
-- `keys rotate` seals its text, which it does byte for byte; a new row (or one written since) is unmarked.

alter table runs
    alter column messages type text using messages::text,
    -- Existing rows take the default true without a table rewrite beyond the type change's; new rows get false.
    add column messages_from_jsonb boolean not null default true;

alter table runs alter column messages_from_jsonb set default false;
