//! The start-up checks of settings against each other; each refusal names the variable at fault.

use super::{Command, Config};
use crate::domain::limits;

/// A setting that is valid on its own but not together with others.
#[derive(Debug, thiserror::Error)]
#[error("{variable}: {message}")]
pub struct ConfigError {
    pub variable: &'static str,
    pub message: String,
}

impl Command {
    /// Checks the settings against each other, naming the variable at fault.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.log().validate()?;
        if let Some(database) = self.database() {
            database.validate()?;
        }
        match self {
            Command::Serve(config) => config.validate(),
            Command::Keys(command) => command.encryption().sealer().map(drop),
            Command::Webhooks(command) => command
                .encryption()
                .map_or(Ok(()), |encryption| encryption.sealer().map(drop)),
            _ => Ok(()),
        }
    }
}

impl Config {
    /// Checks the settings against each other: the database must give up before the HTTP layer does, so a request
    /// that times out never leaves a statement running behind it.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let database = &self.database;
        if database.database_statement_timeout_ms >= self.request_timeout_ms {
            return Err(ConfigError {
                variable: "DATABASE_STATEMENT_TIMEOUT_MS",
                message: format!(
                    "{} must be below REQUEST_TIMEOUT_MS ({})",
                    database.database_statement_timeout_ms, self.request_timeout_ms
                ),
            });
        }
        if database.database_acquire_timeout_ms >= self.request_timeout_ms {
            return Err(ConfigError {
                variable: "DATABASE_ACQUIRE_TIMEOUT_MS",
                message: format!(
                    "{} must be below REQUEST_TIMEOUT_MS ({})",
                    database.database_acquire_timeout_ms, self.request_timeout_ms
                ),
            });
        }
        let events = &self.events;
        if events.webhook_backoff_base_ms > events.webhook_backoff_max_secs * 1000 {
            return Err(ConfigError {
                variable: "WEBHOOK_BACKOFF_BASE_MS",
                message: format!(
                    "{} must not be above WEBHOOK_BACKOFF_MAX_SECS ({} s)",
                    events.webhook_backoff_base_ms, events.webhook_backoff_max_secs
                ),
            });
        }
        if events.feed_max_waiters_per_client > events.feed_max_waiters {
            return Err(ConfigError {
                variable: "FEED_MAX_WAITERS_PER_CLIENT",
                message: format!(
                    "{} must not be above FEED_MAX_WAITERS ({})",
                    events.feed_max_waiters_per_client, events.feed_max_waiters
                ),
            });
        }
        self.encryption.sealer()?;
        if self.body_read_timeout_ms >= self.request_timeout_ms {
            return Err(ConfigError {
                variable: "BODY_READ_TIMEOUT_MS",
                message: format!(
                    "{} must be below REQUEST_TIMEOUT_MS ({}), or a slow body would be answered 503 instead of 408",
                    self.body_read_timeout_ms, self.request_timeout_ms
                ),
            });
        }
        self.links.validate()?;
        self.validate_body_budget()
    }

    /// A body of the largest size must fit in the share of MAX_BODY_BYTES_IN_FLIGHT that large bodies may take,
    /// or every such body would wait and be answered 503.
    fn validate_body_budget(&self) -> Result<(), ConfigError> {
        let Some(in_flight) = self.max_body_bytes_in_flight else {
            return Ok(());
        };
        let largest = self
            .max_body_bytes
            .saturating_add(self.max_worker_state_bytes);
        let share = |bytes: u64| usize::try_from(bytes).unwrap_or(usize::MAX);
        if limits::large_body_share(share(in_flight)) < share(largest) {
            return Err(ConfigError {
                variable: "MAX_BODY_BYTES_IN_FLIGHT",
                message: format!(
                    "{in_flight}: three quarters of it must hold a body of MAX_BODY_BYTES plus MAX_WORKER_STATE_BYTES \
                     ({largest}), so at least {}",
                    largest.saturating_mul(4).div_ceil(3)
                ),
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use crate::config::testing::parse;

    #[test]
    fn a_statement_timeout_not_below_the_request_timeout_is_refused() {
        let cli = parse(&[
            "--database-statement-timeout-ms",
            "9000",
            "--request-timeout-ms",
            "9000",
        ])
        .unwrap();
        let error = cli.into_command().validate().unwrap_err();
        assert_eq!(error.variable, "DATABASE_STATEMENT_TIMEOUT_MS");
    }

    #[test]
    fn a_body_timeout_not_below_the_request_timeout_is_refused() {
        let cli = parse(&[
            "--body-read-timeout-ms",
            "30000",
            "--request-timeout-ms",
            "30000",
        ])
        .unwrap();
        let error = cli.into_command().validate().unwrap_err();
        assert_eq!(error.variable, "BODY_READ_TIMEOUT_MS");
    }

    #[test]
    fn a_body_budget_without_room_for_a_body_of_the_largest_size_is_refused() {
        let with_budget = |bytes: &str| {
            parse(&[
                "--max-body-bytes",
                "2048",
                "--max-worker-state-bytes",
                "1024",
                "--max-body-bytes-in-flight",
                bytes,
            ])
            .unwrap()
            .into_command()
            .validate()
        };
        let error = with_budget("4095").unwrap_err();
        assert!(with_budget("4094").is_err());
        assert_eq!(error.variable, "MAX_BODY_BYTES_IN_FLIGHT");
        assert!(error.message.contains("at least 4096"), "{}", error.message);
        assert!(with_budget("4096").is_ok());
    }

    #[test]
    fn a_client_s_cap_on_feed_readers_above_the_instance_s_is_refused() {
        let cli = parse(&[
            "--feed-max-waiters-per-client",
            "100",
            "--feed-max-waiters",
            "99",
        ])
        .unwrap();
        let error = cli.into_command().validate().unwrap_err();
        assert_eq!(error.variable, "FEED_MAX_WAITERS_PER_CLIENT");
        let defaults = parse(&[]).unwrap().into_command();
        assert!(defaults.validate().is_ok());
    }
}
