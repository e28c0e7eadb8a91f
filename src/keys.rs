//! API keys: how they are made, and the only form in which they are stored (a SHA-256 of the key).
//!
//! A key is 256 random bits, so a plain SHA-256 suffices: there is no dictionary to try, and a deliberately slow
//! hash would only slow every request. Lookups go by the hash, so comparing keys leaks no timing about them.

use rand::RngCore;
use sha2::{Digest, Sha256};

/// Every key starts with this, so a leaked key is recognisable in a secret scanner.
pub const KEY_PREFIX: &str = "ar_";

/// How many characters of a key `clients list` shows.
const SHOWN_CHARS: usize = 10;

/// A new key: the whole key, shown once, and the few characters that may be shown later.
pub fn generate() -> (String, String) {
    let mut secret = [0u8; 32];
    rand::rngs::OsRng.fill_bytes(&mut secret);
    let key = format!("{KEY_PREFIX}{}", hex::encode(secret));
    let shown = key[..SHOWN_CHARS].to_owned();
    (key, shown)
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
        let (key, shown) = generate();
        assert!(key.starts_with(KEY_PREFIX));
        assert_eq!(key.len(), KEY_PREFIX.len() + 64);
        assert!(key.starts_with(&shown));
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
