-- Encryption at rest (DESIGN.md §11) and the approver tool gate (§4).
--
-- Each encrypted payload gets a `*_sealed bytea` column beside its clear one, and a row holds a value in one of the
-- two: clear rows written before this migration (or without ENCRYPTION_KEYS) keep working untouched, and
-- `approval-resume keys rotate` moves them over in batches. A sealed value carries its own small header
--     0x01 | key id length (1 byte) | key id | 12-byte nonce | AES-256-GCM ciphertext and tag
-- (src/sealing.rs), so rows under several keys coexist during a rotation and `keys status` counts them by key id
-- in SQL (sealed_key_id below). The plain text sealed is exactly the clear column's text: for the transcript, its
-- JSON text, so opening it yields JSON bytes that can be spliced into an answer as they are.
-- Ids, tool names, outcomes, decided_by, times and byte lengths stay in clear: the audit and the queries need them.

alter table runs
    alter column messages drop not null,
    add column messages_sealed bytea,
    add constraint runs_messages_once check ((messages is null) <> (messages_sealed is null));

alter table turn_calls
    alter column arguments drop not null,
    add column arguments_sealed bytea,
    add column content_sealed bytea,
    -- The edited arguments of migration 0006 are payload like the proposed ones.
    add column edited_arguments_sealed bytea,
    add constraint turn_calls_edited_arguments_once check (edited_arguments is null or edited_arguments_sealed is null),
    add constraint turn_calls_arguments_once check ((arguments is null) <> (arguments_sealed is null)),
    add constraint turn_calls_content_once check (content is null or content_sealed is null),
    -- A result is whole or absent, whether its content is clear or sealed.
    drop constraint turn_calls_check,
    add constraint turn_calls_result_whole check (
        (outcome is null) = (is_error is null)
        and (outcome is null) = (content is null and content_sealed is null));

-- Tool-event payloads are already optional (privacy levels, retention); sealed or clear, never both.
alter table tool_events
    add column arguments_sealed bytea,
    add column result_sealed bytea,
    add constraint tool_events_arguments_once check (arguments is null or arguments_sealed is null),
    add constraint tool_events_result_once check (result is null or result_sealed is null);

-- The key id in a sealed value's header; null for a value that is not one.
create function sealed_key_id(sealed bytea) returns text language sql immutable strict as $$
    select case when length(sealed) >= 2 and get_byte(sealed, 0) = 1 and length(sealed) >= 2 + get_byte(sealed, 1)
                then convert_from(substring(sealed from 3 for get_byte(sealed, 1)), 'SQL_ASCII') end
$$;

-- The tools whose write calls a backend user may approve (ADR-133); null: no limit.
alter table backend_users add column approvable_tools text[];
