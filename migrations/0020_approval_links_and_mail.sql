-- Approval links and the mail that brings them (DESIGN.md §20).
--
-- A link lets one person decide one waiting turn from a page the service serves. Its secret is shown once (in the
-- answer that made it, or in its mail) and stored only as its SHA-256, so a copy of this table decides nothing. The
-- page's URL carries the run id beside the secret, so that every read of a link is pinned to its run, as every
-- statement on a run-scoped table is (DESIGN.md §12): the keys start with `run_id`.
--
-- A link is bound to the turn it was made for (`turn_index`, `turn_digest`): once the turn is decided or expired, or
-- another turn waits, it decides nothing, since a turn is decided once whatever asks. `used_at` records the decision
-- it made, so the page then says so; `revoked_at` a DELETE.

create table approval_links (
    run_id      uuid not null references runs (id) on delete cascade,
    id          uuid not null,
    tenant      text not null,
    secret_hash bytea not null check (length(secret_hash) = 32),
    -- The person the link decides as.
    uid         bigint not null check (uid >= 1),
    turn_index  non_negative_integer not null,
    turn_digest sha256_hex not null,
    -- The page's form carries it; a POST without it decides nothing. Random like the secret, never the secret.
    nonce       text not null check (nonce ~ '^[0-9a-f]{32}$'),
    -- The API client that made it, or `mail` for the service's own.
    made_by     text not null,
    created_at  timestamptz not null default now(),
    expires_at  timestamptz not null,
    revoked_at  timestamptz,
    used_at     timestamptz,
    primary key (run_id, id),
    unique (run_id, secret_hash)
);

-- A backend user's mail address, for the mail of §20. Shown back to the API that set it; never logged.
alter table backend_users add column email text check (email is null or length(email) between 3 and 254);

-- The mail to send when a turn waits: one row per person and turn, written in the transaction that made the turn
-- wait (registration or POST /turns), so a mail is never lost to a crash between the commit and the send; the
-- sender (src/delivery/mail) takes due rows after the commit, makes each person's link and sends it. A row is sent
-- at least once: a crash after the SMTP server took the mail and before `sent_at` was written sends it again.
create table mail_outbox (
    run_id          uuid not null references runs (id) on delete cascade,
    turn_index      non_negative_integer not null,
    uid             bigint not null check (uid >= 1),
    tenant          text not null,
    created_at      timestamptz not null default now(),
    attempts        integer not null default 0,
    next_attempt_at timestamptz not null default now(),
    -- How the row ended: `sent`; `capped` (over a per-hour cap); `moot` (the turn no longer waits, or the person may
    -- no longer decide it, or has no address); `failed` (refused for good, or out of attempts). Null: still due.
    outcome         text check (outcome in ('sent', 'capped', 'moot', 'failed')),
    ended_at        timestamptz,
    primary key (run_id, turn_index, uid),
    constraint mail_outbox_end check ((outcome is null) = (ended_at is null))
);

-- The sender's one read: the due rows, oldest first.
create index mail_outbox_due on mail_outbox (next_attempt_at) where outcome is null;
-- The per-hour caps count the mails sent lately, per tenant and per person.
create index mail_outbox_sent on mail_outbox (tenant, ended_at) where outcome = 'sent';

-- Tool names as MCP gives them (DESIGN.md §3, §19): dots, and up to 128 characters. The model providers' narrower
-- rule is checked where a model input is rendered for one (`format_not_representable`). Every existing name passes.
alter domain tool_name drop constraint tool_name_shape;
alter domain tool_name add constraint tool_name_shape check (value ~ '^[A-Za-z0-9_.-]{1,128}$') not valid;
alter domain tool_name validate constraint tool_name_shape;
