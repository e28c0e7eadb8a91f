//! How the process logs: the format and the filter, shared by every subcommand.

use clap::{Args, ValueEnum};

use super::ConfigError;

/// How logs are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// JSON lines when standard error (where logs go) is not a terminal, readable text when it is.
    Auto,
    Json,
    Pretty,
}

/// How the process logs.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Logging")]
pub struct LogConfig {
    /// Log format: auto, json or pretty.
    #[arg(
        long,
        env = "LOG_FORMAT",
        value_name = "LOG_FORMAT",
        default_value = "auto",
        value_enum
    )]
    pub log_format: LogFormat,

    /// Log filter in `tracing` syntax, e.g. `info` or `approval_resume=debug,info`.
    #[arg(
        long,
        env = "LOG_LEVEL",
        value_name = "LOG_LEVEL",
        default_value = "info,sqlx=warn"
    )]
    pub log_level: String,
}

impl LogConfig {
    pub(super) fn validate(&self) -> Result<(), ConfigError> {
        tracing_subscriber::EnvFilter::try_new(&self.log_level).map_err(|error| ConfigError {
            variable: "LOG_LEVEL",
            message: error.to_string(),
        })?;
        Ok(())
    }
}
