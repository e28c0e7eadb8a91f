//! Encryption at rest (docs/design.md §11, ADR-114): the key ring of `ENCRYPTION_KEYS` and the sealing of one value.
//!
//! A sealed value is self-describing, so that rows under several keys coexist while `keys rotate` runs and a row
//! under a key that is no longer configured is recognised as such (never read as garbage):
//!
//! ```text
//! 0x01 | key id length (1 byte) | key id (ASCII) | nonce (12 bytes) | AES-256-GCM ciphertext and tag
//! ```
//!
//! The associated data names the row and the column a value belongs to (`storage::sealed` builds it), so a
//! ciphertext copied into another row or column fails authentication instead of answering another run's text.
//! Nonces are random: 96 bits drawn afresh per value keep the chance of a repeat negligible far beyond the number
//! of values one key will ever seal here.

use std::fmt;

use aes_gcm::aead::{Aead, KeyInit, Payload};
use aes_gcm::{Aes256Gcm, Nonce};
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use rand::RngCore;
use zeroize::Zeroizing;

/// The first byte of every sealed value: its format version.
const VERSION: u8 = 1;
const NONCE_BYTES: usize = 12;
/// A key id: short, printable, and never part of the key.
const MAX_KEY_ID: usize = 32;

/// The configured keys: the first seals, every one opens. Empty: values are stored in clear.
#[derive(Clone, Default)]
pub struct Sealer {
    keys: Vec<(String, Aes256Gcm)>,
}

/// Only the key ids: a key is a secret and never printed.
impl fmt::Debug for Sealer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Sealer")
            .field("key_ids", &self.key_ids().collect::<Vec<_>>())
            .finish()
    }
}

/// Why `ENCRYPTION_KEYS` is refused. The texts name the entry by position and id, never its key material.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeysError {
    #[error("entry {0} is not of the form id:base64(32 bytes)")]
    Shape(usize),
    #[error("entry {0} has a key id that is not 1 to 32 of A-Z a-z 0-9 _ . -")]
    KeyId(usize),
    #[error("the key of entry {0} ({1}) is not base64 of exactly 32 bytes")]
    Key(usize, String),
    #[error("key id {0} is given twice")]
    Duplicate(String),
}

/// Why a stored value does not open. None of them carries the value's bytes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OpenError {
    #[error("sealed under key id {0}, which is not configured")]
    UnknownKey(String),
    #[error(
        "sealed under key id {0}, but it does not authenticate (tampered, or moved from another row)"
    )]
    Rejected(String),
    #[error("not a sealed value of a known format")]
    Malformed,
}

impl OpenError {
    /// The key id the value names, when it could be read.
    pub fn key_id(&self) -> Option<&str> {
        match self {
            OpenError::UnknownKey(id) | OpenError::Rejected(id) => Some(id),
            OpenError::Malformed => None,
        }
    }
}

impl Sealer {
    /// No keys: every value is stored and read in clear.
    pub fn none() -> Self {
        Sealer::default()
    }

    /// Parses `ENCRYPTION_KEYS`: `id:base64(32 bytes)` entries, comma-separated. Blank: no keys.
    pub fn parse(text: &str) -> Result<Self, KeysError> {
        let mut keys: Vec<(String, Aes256Gcm)> = Vec::new();
        for (index, entry) in text.split(',').map(str::trim).enumerate() {
            if entry.is_empty() && text.trim().is_empty() {
                break;
            }
            let position = index + 1;
            let (id, encoded) = entry.split_once(':').ok_or(KeysError::Shape(position))?;
            if !is_key_id(id) {
                return Err(KeysError::KeyId(position));
            }
            let key = Zeroizing::new(
                STANDARD
                    .decode(encoded.trim())
                    .map_err(|_| KeysError::Key(position, id.to_owned()))?,
            );
            if key.len() != 32 {
                return Err(KeysError::Key(position, id.to_owned()));
            }
            if keys.iter().any(|(known, _)| known == id) {
                return Err(KeysError::Duplicate(id.to_owned()));
            }
            let cipher = Aes256Gcm::new_from_slice(&key)
                .map_err(|_| KeysError::Key(position, id.to_owned()))?;
            keys.push((id.to_owned(), cipher));
        }
        Ok(Sealer { keys })
    }

    /// Whether values are sealed before they are stored.
    pub fn is_enabled(&self) -> bool {
        !self.keys.is_empty()
    }

    /// The id of the key that seals; `None` without keys.
    pub fn sealing_key_id(&self) -> Option<&str> {
        self.keys.first().map(|(id, _)| id.as_str())
    }

    /// Every configured key id, the sealing one first.
    pub fn key_ids(&self) -> impl Iterator<Item = &str> {
        self.keys.iter().map(|(id, _)| id.as_str())
    }

    /// Seals `plaintext` under the first key, bound to `aad`; `None` without keys (the value is stored in clear).
    pub fn seal(&self, aad: &[u8], plaintext: &[u8]) -> Option<Vec<u8>> {
        let (id, cipher) = self.keys.first()?;
        let mut nonce = [0u8; NONCE_BYTES];
        rand::thread_rng().fill_bytes(&mut nonce);
        let ciphertext = cipher
            .encrypt(
                &Nonce::from(nonce),
                Payload {
                    msg: plaintext,
                    aad,
                },
            )
            // AES-GCM refuses only messages longer than 64 GiB, far beyond any body this service accepts.
            .expect("AES-GCM seals any value this service stores");
        let mut sealed = Vec::with_capacity(2 + id.len() + NONCE_BYTES + ciphertext.len());
        sealed.push(VERSION);
        sealed.push(id.len() as u8);
        sealed.extend_from_slice(id.as_bytes());
        sealed.extend_from_slice(&nonce);
        sealed.extend_from_slice(&ciphertext);
        Some(sealed)
    }

    /// Opens a value sealed by [`Sealer::seal`] with the same `aad`, under whichever configured key it names.
    pub fn open(&self, aad: &[u8], stored: &[u8]) -> Result<Vec<u8>, OpenError> {
        let (id, rest) = split_header(stored).ok_or(OpenError::Malformed)?;
        let (_, cipher) = self
            .keys
            .iter()
            .find(|(known, _)| known == id)
            .ok_or_else(|| OpenError::UnknownKey(id.to_owned()))?;
        if rest.len() < NONCE_BYTES {
            return Err(OpenError::Malformed);
        }
        let (nonce, ciphertext) = rest.split_at(NONCE_BYTES);
        let nonce: [u8; NONCE_BYTES] = nonce.try_into().map_err(|_| OpenError::Malformed)?;
        cipher
            .decrypt(
                &Nonce::from(nonce),
                Payload {
                    msg: ciphertext,
                    aad,
                },
            )
            .map_err(|_| OpenError::Rejected(id.to_owned()))
    }
}

/// The key id a sealed value names, if it is one.
pub fn key_id_of(stored: &[u8]) -> Option<&str> {
    split_header(stored).map(|(id, _)| id)
}

fn split_header(stored: &[u8]) -> Option<(&str, &[u8])> {
    let (&version, rest) = stored.split_first()?;
    let (&id_len, rest) = rest.split_first()?;
    if version != VERSION || rest.len() < id_len as usize {
        return None;
    }
    let (id, rest) = rest.split_at(id_len as usize);
    let id = std::str::from_utf8(id).ok().filter(|id| is_key_id(id))?;
    Some((id, rest))
}

fn is_key_id(id: &str) -> bool {
    (1..=MAX_KEY_ID).contains(&id.len())
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'))
}

#[cfg(test)]
mod tests {
    use super::*;

    const K1: &str = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=";
    const K2: &str = "HxweHRwbGhkYFxYVFBMSERAPDg0MCwoJCAcGBQQDAgE=";

    fn ring(text: &str) -> Sealer {
        Sealer::parse(text).expect("valid keys")
    }

    #[test]
    fn a_sealed_value_opens_with_the_same_associated_data() {
        let sealer = ring(&format!("k1:{K1}"));
        let sealed = sealer.seal(b"row a", b"secret text").unwrap();
        assert_eq!(sealer.open(b"row a", &sealed).unwrap(), b"secret text");
        assert_eq!(key_id_of(&sealed), Some("k1"));
    }

    #[test]
    fn a_value_moved_to_another_row_or_flipped_does_not_open() {
        let sealer = ring(&format!("k1:{K1}"));
        let mut sealed = sealer.seal(b"row a", b"secret text").unwrap();
        assert_eq!(
            sealer.open(b"row b", &sealed),
            Err(OpenError::Rejected("k1".into()))
        );
        let last = sealed.len() - 1;
        sealed[last] ^= 1;
        assert_eq!(
            sealer.open(b"row a", &sealed),
            Err(OpenError::Rejected("k1".into()))
        );
    }

    #[test]
    fn every_value_gets_a_fresh_nonce() {
        let sealer = ring(&format!("k1:{K1}"));
        assert_ne!(sealer.seal(b"a", b"same"), sealer.seal(b"a", b"same"));
    }

    #[test]
    fn the_first_key_seals_and_every_key_opens() {
        let old = ring(&format!("k1:{K1}"));
        let both = ring(&format!("k2:{K2}, k1:{K1}"));
        let sealed_old = old.seal(b"a", b"text").unwrap();
        assert_eq!(both.open(b"a", &sealed_old).unwrap(), b"text");
        assert_eq!(key_id_of(&both.seal(b"a", b"text").unwrap()), Some("k2"));
        let new_only = ring(&format!("k2:{K2}"));
        assert_eq!(
            new_only.open(b"a", &sealed_old),
            Err(OpenError::UnknownKey("k1".into()))
        );
    }

    #[test]
    fn without_keys_nothing_is_sealed() {
        assert!(!Sealer::parse("").unwrap().is_enabled());
        assert_eq!(Sealer::none().seal(b"a", b"text"), None);
    }

    #[test]
    fn malformed_keys_are_refused_without_echoing_the_key() {
        for (text, expected) in [
            ("nocolon", KeysError::Shape(1)),
            (":abc", KeysError::KeyId(1)),
            ("k1:not*base64", KeysError::Key(1, "k1".into())),
            ("k1:AAEC", KeysError::Key(1, "k1".into())),
        ] {
            let error = Sealer::parse(text).unwrap_err();
            assert_eq!(error, expected);
            assert!(!error.to_string().contains("base64!") && !error.to_string().contains("AAEC"));
        }
        assert_eq!(
            Sealer::parse(&format!("k1:{K1},k1:{K2}")).unwrap_err(),
            KeysError::Duplicate("k1".into())
        );
    }

    #[test]
    fn debug_shows_key_ids_only() {
        let shown = format!("{:?}", ring(&format!("k1:{K1}")));
        assert!(shown.contains("k1") && !shown.contains(K1));
    }
}
