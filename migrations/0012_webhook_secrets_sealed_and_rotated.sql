-- Webhook signing secrets (DESIGN.md §17, §11): sealed like payloads when ENCRYPTION_KEYS is set, and rotated with
-- an overlap during which both the new and the previous secret sign every request (Standard Webhooks allows several
-- space-separated signatures in webhook-signature, and its libraries accept a request if any one verifies).
--
-- A secret is in its clear column or in its *_sealed twin, never both (the same shape as 0007's columns, so
-- `keys status` and `keys rotate` count and re-seal it like any other). The associated data of a sealed secret
-- names the column and the subscription id (src/storage/sealed.rs). Secrets stored before this migration stay clear
-- and keep signing; `keys rotate` seals them, and a secret rotation stores the new one sealed.

alter table webhook_subscriptions
    alter column secret drop not null,
    add column secret_sealed bytea,
    -- The secret before the last rotation, signing beside the new one until previous_secret_until; cleared when a
    -- subscription is next claimed or rotated after that.
    add column previous_secret text,
    add column previous_secret_sealed bytea,
    add column previous_secret_until timestamptz,
    add constraint webhook_subscriptions_secret_once check ((secret is null) <> (secret_sealed is null)),
    add constraint webhook_subscriptions_previous_secret_once
        check (previous_secret is null or previous_secret_sealed is null),
    add constraint webhook_subscriptions_previous_secret_until
        check ((previous_secret is null and previous_secret_sealed is null) = (previous_secret_until is null));
