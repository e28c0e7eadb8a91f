//! API keys: how they are made, and the only form in which they are stored (a SHA-256 of the key).
//!
//! A key is 256 random bits, so a plain SHA-256 suffices: there is no dictionary to try, and a deliberately slow
//! hash would only slow every request. Lookups go by the hash, so comparing keys leaks no timing about them.

use rand::RngCore;
use sha2::{Digest, Sha256};

/// Every key starts with this, so a leaked key is recognisable in a secret scanner.
pub const KEY_PREFIX: &str = "ar_";

/// How many bytes of a key's hash make the key id that `clients list` shows.
const KEY_ID_BYTES: usize = 4;

/// A new key: the whole key, shown once, and its key id, which may be shown at any time.
///
/// The key id is taken from the hash, not the key, so no part of the secret is ever stored or printed again.
pub fn generate() -> (String, String) {
    let mut secret = [0u8; 32];
    rand::rngs::OsRng.fill_bytes(&mut secret);
    let key = format!("{KEY_PREFIX}{}", hex::encode(secret));
    let id = key_id(&key);
    (key, id)
}

/// Whether a credential has the form every key has (the prefix and 64 hex digits): one that has not is no key,
/// and needs no lookup to be refused.
pub fn is_well_formed(credential: &str) -> bool {
    credential
        .strip_prefix(KEY_PREFIX)
        .is_some_and(|hex| hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// The public id of a key: the first bytes of its hash, in hex.
pub fn key_id(key: &str) -> String {
    hex::encode(&hash(key)[..KEY_ID_BYTES])
}

/// The stored form of a key.
pub fn hash(key: &str) -> [u8; 32] {
    Sha256::digest(key.as_bytes()).into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_key_has_the_prefix_and_256_bits_of_hex() {
        let (key, id) = generate();
        assert!(key.starts_with(KEY_PREFIX));
        assert_eq!(key.len(), KEY_PREFIX.len() + 64);
        assert_eq!(id, key_id(&key));
    }

    #[test]
    fn the_key_id_shares_no_characters_run_with_the_key() {
        let (key, id) = generate();
        assert_eq!(id.len(), 8);
        assert!(!key.contains(&id[..6]), "{id} is part of the key");
    }

    #[test]
    fn only_a_text_of_a_key_s_form_is_well_formed() {
        assert!(is_well_formed(&generate().0));
        for text in [
            "",
            "ar_",
            "ar_x",
            &format!("ar_{}", "g".repeat(64)),
            &format!("xx_{}", "a".repeat(64)),
        ] {
            assert!(!is_well_formed(text), "{text:?}");
        }
        assert!(!is_well_formed(&format!("{}0", generate().0)));
    }

    #[test]
    fn two_keys_are_never_the_same() {
        assert_ne!(generate().0, generate().0);
    }

    #[test]
    fn the_hash_is_stable_and_not_the_key() {
        assert_eq!(hash("ar_x"), hash("ar_x"));
        assert_ne!(hash("ar_x"), hash("ar_y"));
    }
}
