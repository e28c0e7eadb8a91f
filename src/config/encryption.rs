//! Encryption at rest (docs/design.md §11): the key ring's setting and the `keys` subcommands that count and
//! re-encrypt.

use clap::{Args, Subcommand};

use super::{ConfigError, DatabaseCommand};
use crate::domain::secret::Secret;
use crate::sealing::Sealer;

/// `keys …` (docs/design.md §11). Both read ENCRYPTION_KEYS as `serve` does.
#[derive(Debug, Subcommand)]
pub enum KeysCommand {
    /// Print, per encrypted column, how many values are stored in clear and under each key id.
    Status {
        #[command(flatten)]
        encryption: EncryptionConfig,
        #[command(flatten)]
        common: DatabaseCommand,
    },
    /// Re-encrypt every value that is in clear or under another key under the first key of ENCRYPTION_KEYS, in
    /// batches of short transactions, while the service serves. Safe to stop and run again: it resumes where it
    /// stopped.
    Rotate {
        /// Rows per batch (each batch is one transaction).
        #[arg(long, default_value_t = 200, value_parser = clap::value_parser!(i64).range(1..=10_000))]
        batch_size: i64,
        #[command(flatten)]
        encryption: EncryptionConfig,
        #[command(flatten)]
        common: DatabaseCommand,
    },
}

impl KeysCommand {
    pub fn common(&self) -> &DatabaseCommand {
        match self {
            KeysCommand::Status { common, .. } | KeysCommand::Rotate { common, .. } => common,
        }
    }

    pub fn encryption(&self) -> &EncryptionConfig {
        match self {
            KeysCommand::Status { encryption, .. } | KeysCommand::Rotate { encryption, .. } => {
                encryption
            }
        }
    }
}

/// The keys of encryption at rest (docs/design.md §11).
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Encryption at rest")]
pub struct EncryptionConfig {
    /// Keys that encrypt transcripts, arguments, results and tool-event payloads at rest: `id:base64(32 bytes)`,
    /// comma-separated; the first encrypts, every one decrypts. Unset: stored in clear (and said at start-up).
    #[arg(
        long,
        env = "ENCRYPTION_KEYS",
        value_name = "ENCRYPTION_KEYS",
        hide_env_values = true
    )]
    pub encryption_keys: Option<Secret>,
}

impl EncryptionConfig {
    /// The key ring; refused naming the variable and the entry, never the key.
    pub fn sealer(&self) -> Result<Sealer, ConfigError> {
        let keys = self.encryption_keys.as_ref().map_or("", Secret::expose);
        Sealer::parse(keys).map_err(|error| ConfigError {
            variable: "ENCRYPTION_KEYS",
            message: error.to_string(),
        })
    }
}
#[cfg(test)]
mod tests {
    use crate::config::testing::parse;

    #[test]
    fn a_malformed_encryption_key_stops_serve_and_keys_naming_the_variable_not_the_key() {
        // 31 bytes: one short.
        let short = "k1:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHg==";
        for args in [
            &["serve", "--encryption-keys", short][..],
            &["keys", "status", "--encryption-keys", short],
            &["keys", "rotate", "--encryption-keys", "k1"],
        ] {
            let error = parse(args).unwrap().into_command().validate().unwrap_err();
            assert_eq!(error.variable, "ENCRYPTION_KEYS", "{args:?}");
            assert!(!error.to_string().contains("AAEC"), "{error}");
        }
        let valid = "k1:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=";
        let cli = parse(&["serve", "--encryption-keys", valid]).unwrap();
        assert!(!format!("{cli:?}").contains("AAEC"));
        assert!(cli.into_command().validate().is_ok());
    }
}
