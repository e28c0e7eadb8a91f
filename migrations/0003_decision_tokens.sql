-- Decision tokens (DESIGN.md §13): the Ed25519 public keys a client's backend signs its users' tokens with.
-- Several live keys per client at once, so a key is rotated by adding the next before retiring the last.
create table client_token_keys (
    client_id   bigint not null references api_clients (id) on delete cascade,
    -- The JWT header's `kid`, unique within its client.
    kid         text not null check (kid ~ '^[A-Za-z0-9_.-]{1,64}$'),
    -- The raw 32-byte Ed25519 public key (RFC 8032), not its PEM wrapping.
    public_key  bytea not null check (length(public_key) = 32),
    created_at  timestamptz not null default now(),
    -- A retired key verifies nothing; kept so the audit's `token_kid` still names a key that existed.
    retired_at  timestamptz,
    primary key (client_id, kid)
);

-- A decision posted with a token names the key that signed it; null for a decision posted with an API key.
-- `client_name` already names the client, whose key or token it was.
alter table approval_events add column token_kid text;
