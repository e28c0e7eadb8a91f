-- The whole schema of approval-resume. Every "exactly once" of DESIGN.md rests on a constraint here,
-- not on the service's memory: row locks serialize writers, and unique keys catch whatever slips past.

-- Clients of the API. Keys are random 256-bit secrets, so a single SHA-256 is enough to store them:
-- no dictionary exists to attack, and a slow hash would only slow every request.
create table api_clients (
    id          bigint generated always as identity primary key,
    name        text not null unique check (name ~ '^[A-Za-z0-9_.-]{1,64}$'),
    -- A tenant is the host application installation a client acts for; it sees only that tenant's users and runs.
    tenant      text not null check (tenant ~ '^[A-Za-z0-9_.-]{1,64}$'),
    key_hash    bytea not null unique check (length(key_hash) = 32),
    -- The first characters of the key, shown by `clients list` so a person can tell keys apart.
    key_prefix  text not null,
    scopes      text[] not null,
    created_at  timestamptz not null default now(),
    revoked_at  timestamptz
);

-- Backend users of the host application, kept in step by PUT /v1/users/{uid}.
create table backend_users (
    tenant              text not null,
    uid                 bigint not null check (uid >= 1),
    username            text not null,
    is_admin            boolean not null,
    can_approve_others  boolean not null,
    disabled            boolean not null,
    created_at          timestamptz not null default now(),
    updated_at          timestamptz not null default now(),
    primary key (tenant, uid)
);

create table runs (
    id                      uuid primary key,
    tenant                  text not null,
    -- 0 is a service run with no human owner, so no foreign key to backend_users.
    owner_uid               bigint not null check (owner_uid >= 0),
    status                  text not null check (status in
                              ('waiting_for_approval', 'resuming', 'resumed', 'cancelled', 'completed')),
    -- The run's own level as registered; the service's configured level may be stricter at write time.
    privacy_level           text not null check (privacy_level in ('none', 'metadata', 'redacted', 'full')),
    require_second_approver boolean not null,
    -- SHA-256 of the canonical registration body: the same body again is answered 200, another one 409.
    registration_hash       bytea not null,
    -- Declared tools: [{"name", "effect"}]. Effects decide where a denial reason is rendered.
    tools                   jsonb not null,
    -- The working transcript through the current turn (OpenAI chat messages). Not an audit record: not filtered.
    messages                jsonb not null,
    turn_index              integer not null check (turn_index >= 0),
    turn_digest             text not null check (turn_digest ~ '^[0-9a-f]{64}$'),
    -- SHA-256 of the last POST /turns body, so a retried append is answered with the same run.
    turn_request_hash       bytea,
    -- While status = 'resuming': which service instance runs the tools, and until when it holds the turn.
    lease_owner             uuid,
    lease_until             timestamptz,
    created_at              timestamptz not null default now(),
    updated_at              timestamptz not null default now()
);

create index runs_tenant_waiting on runs (tenant, created_at desc) where status = 'waiting_for_approval';
create index runs_resuming_lease on runs (lease_until) where status = 'resuming';

-- The pending calls of every turn, each with its result once known. One row per call makes
-- "one result per call" a property of the table: a result is an update of the call's own row.
create table turn_calls (
    run_id      uuid not null references runs (id) on delete cascade,
    turn_index  integer not null,
    position    integer not null check (position >= 0),
    call_id     text not null,
    tool        text not null check (tool ~ '^[A-Za-z0-9_-]{1,64}$'),
    arguments   text not null,
    effect      text not null check (effect in ('read', 'write')),
    -- Set before an executor is called: a call started but without an outcome was interrupted.
    started_at  timestamptz,
    outcome     text check (outcome in ('ok', 'failed', 'denied', 'not_permitted', 'interrupted')),
    is_error    boolean,
    content     text,
    finished_at timestamptz,
    primary key (run_id, turn_index, position),
    unique (run_id, call_id),
    -- A result is whole or absent.
    check ((outcome is null) = (is_error is null) and (outcome is null) = (content is null))
);

-- The audit record of decisions, always stored whole. The primary key is the rule "one decision per run turn".
create table approval_events (
    run_id       uuid not null references runs (id) on delete cascade,
    turn_index   integer not null,
    approved     boolean not null,
    decider_uid  bigint,
    decided_by   text not null check (decided_by in ('run_owner', 'other_user', 'unknown')),
    reason       text check (reason in ('variant', 'skip')),
    turn_digest  text not null,
    client_name  text not null,
    decided_at   timestamptz not null default now(),
    primary key (run_id, turn_index)
);

-- One tool event per call at most (none at privacy level "none"), filtered by the level that applied.
create table tool_events (
    run_id          uuid not null references runs (id) on delete cascade,
    turn_index      integer not null,
    position        integer not null,
    call_id         text not null,
    tool            text not null,
    outcome         text not null,
    is_error        boolean not null,
    decided_by      text not null,
    privacy_level   text not null check (privacy_level in ('metadata', 'redacted', 'full')),
    arguments_bytes integer not null,
    result_bytes    integer not null,
    arguments       text,
    result          text,
    started_at      timestamptz,
    finished_at     timestamptz,
    recorded_at     timestamptz not null default now(),
    primary key (run_id, turn_index, position)
);
