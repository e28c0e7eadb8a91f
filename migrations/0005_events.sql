-- Events (DESIGN.md §10): a transactional outbox. Each row is written in the transaction of the change it tells of,
-- so it exists if and only if that change committed. It holds ids and metadata only, never a transcript,
-- arguments or results. Consumers read it through the feed (GET /v1/events) and webhooks, both after commit.
create table events (
    id          bigint generated always as identity primary key,
    -- The writing transaction's id. Ids from the sequence are taken in one order and committed in another, so
    -- readers order by (xid, id) and only read rows of transactions older than every one of this database still
    -- running (events_readable_below): such a set can no longer grow below the cursor (src/storage/events.rs).
    xid         xid8 not null default pg_current_xact_id(),
    -- The id consumers see (feed, webhook-id); random, so it says nothing of other tenants' volume.
    public_id   uuid not null default gen_random_uuid(),
    tenant      text not null,
    -- Purged with its run.
    run_id      uuid not null references runs (id) on delete cascade,
    type        text not null check (type in
                  ('run.waiting', 'run.resumed', 'run.expired', 'run.cancelled', 'run.completed')),
    data        jsonb not null,
    created_at  timestamptz not null default now()
);

-- The transaction id below which every transaction that may write to this database has ended, as of the calling
-- statement's snapshot: the snapshot's xmax, or the oldest transaction it sees running, leaving out those that
-- pg_stat_activity shows running in another database (they never write here; without this, any long write
-- transaction anywhere on the cluster would hold the feed back). A running xid not found there (it ended since the
-- snapshot, it is prepared, or the role may not see that backend) counts, which errs on the side of waiting.
create function events_readable_below() returns xid8 language sql stable as $$
    select least(
        pg_snapshot_xmax(s),
        (select min(x) from pg_snapshot_xip(s) x
         where not exists (select 1 from pg_stat_activity a
                           where a.backend_xid = x::xid and a.datname is distinct from current_database())))
    from pg_current_snapshot() s
$$;

-- The feed and every subscription's cursor read one tenant's events in (xid, id) order.
create index events_tenant_order on events (tenant, xid, id);
-- Retention deletes the oldest events, and the feed's wake-up reads the newest readable one.
create index events_order on events (xid, id);
create index events_run on events (run_id);

-- Webhook subscriptions of a tenant. Each one follows the tenant's events with its own cursor, like a feed reader,
-- so every event reaches every subscription in order and none is skipped (the same (xid, id) rule as the feed).
create table webhook_subscriptions (
    id              uuid primary key,
    tenant          text not null check (tenant ~ '^[A-Za-z0-9_.-]{1,64}$'),
    url             text not null,
    event_types     text[] not null,
    -- The signing secret (whsec_…). Stored as it is, because signing needs it: it is shown once at creation and
    -- never again by the API or the subcommand, and kept out of logs. Encryption at rest is ADR-114's business.
    secret          text not null,
    -- The last event passed (delivered, or not of the subscribed types).
    cursor_xid      xid8 not null,
    cursor_id       bigint not null default 0,
    -- 'failing' once deliveries have failed for longer than WEBHOOK_RETRY_WINDOW_SECS; cleared by a success.
    state           text not null default 'active' check (state in ('active', 'failing')),
    -- The event at the cursor's head: failed attempts so far, since when, and the last error (no payload).
    attempts        integer not null default 0,
    failing_since   timestamptz,
    last_error      text,
    next_attempt_at timestamptz not null default now(),
    -- One instance delivers a subscription at a time: it holds this lease, renewed at each delivery. An instance
    -- that dies leaves the lease to run out, and another instance delivers the same event again.
    lease_owner     uuid,
    lease_until     timestamptz,
    delivered_total bigint not null default 0,
    created_at      timestamptz not null default now()
);

create index webhook_subscriptions_tenant on webhook_subscriptions (tenant, created_at);
