-- api_clients.key_prefix used to hold the first characters of the key itself. It now holds a public key id, the
-- first 4 bytes of key_hash in hex, so no part of a secret is stored. Rows written before this migration are
-- rewritten the same way, which removes the key fragments they held.
update api_clients set key_prefix = encode(substring(key_hash from 1 for 4), 'hex');

comment on column api_clients.key_prefix is
    'Public key id: the first 4 bytes of key_hash in hex, shown by clients list. Never part of the key.';
