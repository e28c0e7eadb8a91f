-- Remembered decisions (DESIGN.md §18): a rule is a decision made in advance by one person, in one tenant, for the
-- later turns of one run (`run` scope) or for the owner's runs of one tool until it expires (`owner` scope).
--
-- Looked up in the transaction of every registration and new turn, so the lookup must be one indexed read that
-- finds nothing quickly when there is nothing: `remembered_rules_run` (a run's rules, run scope) and
-- `remembered_rules_owner` (tenant, owner, tool; owner scope). Both are partial on `revoked_at is null`, so revoked
-- rules, which are kept for the audit, never weigh on a lookup; expiry is the clock's and is filtered by the read.
-- Never a scan of a tenant's rules.
--
-- `arguments`: the exact arguments a rule matches (a JSON object's text), sealed like every payload when
-- ENCRYPTION_KEYS is set (`arguments_sealed`, associated data `remembered_rules.arguments` and the rule's id;
-- src/storage/sealed.rs), in clear otherwise; at most one of the pair, neither for a rule of any call of its tool.
--
-- A run-scope rule goes with its run (purged together); an owner-scope rule has no run and lives until it expires or
-- is revoked (retention deletes it some time after either).

create table remembered_rules (
    id          uuid primary key,
    tenant      text not null,
    scope       text not null check (scope in ('run', 'owner')),
    run_id      uuid references runs (id) on delete cascade,
    owner_uid   bigint not null,
    tool        tool_name not null,
    arguments   text,
    arguments_sealed bytea,
    verdict     text not null check (verdict in ('approve', 'deny')),
    -- A deny rule's reason token (§3: `variant` or `skip`); none on an approve rule.
    reason      decision_reason,
    created_by  bigint not null,
    -- The API client the rule came through, and the decision token's key when a token made it (the audit's who).
    client_name text not null,
    token_kid   text,
    created_at  timestamptz not null default now(),
    expires_at  timestamptz,
    revoked_at  timestamptz,
    revoked_by  bigint,
    -- Each scope names exactly its subject; an owner-scope rule always ends (DESIGN.md §18: MAX_RULE_TTL_DAYS).
    constraint remembered_rules_subject check (
        (scope = 'run' and run_id is not null) or (scope = 'owner' and run_id is null and expires_at is not null)),
    constraint remembered_rules_arguments_once check (arguments is null or arguments_sealed is null),
    constraint remembered_rules_reason_on_deny check (reason is null or verdict = 'deny')
);

create index remembered_rules_run on remembered_rules (run_id) where revoked_at is null and scope = 'run';
create index remembered_rules_owner on remembered_rules (tenant, owner_uid, tool)
    where revoked_at is null and scope = 'owner';
-- Listing an owner's rules (GET /v1/rules?owner_uid=), revoked ones included, newest first.
create index remembered_rules_listed on remembered_rules (tenant, owner_uid, created_at);

-- Rule events have no run when their scope is `owner`: the outbox's run id becomes optional. An event of a run still
-- names it, and every run-scope event is written under its run's row lock, as before.
alter table events alter column run_id drop not null;

alter domain event_type drop constraint event_type_known;
alter domain event_type add constraint event_type_known
    check (value in ('run.waiting', 'run.released', 'run.resumed', 'run.expired', 'run.cancelled', 'run.completed',
                     'rule.created', 'rule.revoked'))
    not valid;
alter domain event_type validate constraint event_type_known;
