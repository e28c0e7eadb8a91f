//! The command tree: the binary, its subcommands, and which settings each one carries.

use clap::error::ErrorKind;
use clap::parser::ValueSource;
use clap::{ArgMatches, CommandFactory, FromArgMatches, Parser, Subcommand};

use super::{
    ClientsCommand, Config, DatabaseCommand, DatabaseConfig, KeysCommand, LogConfig, WatchArgs,
    WebhooksCommand,
};

#[derive(Debug, Parser)]
#[command(
    name = "approval-resume",
    version,
    about = "Resumes AI-agent runs suspended for human approval.",
    after_help = "Without a subcommand, serves (as `serve`) with the settings above. Every setting is also an \
                  environment variable, named in brackets; each subcommand's --help lists the settings it uses."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,
    /// `serve`'s settings, taken here too because serving is what the binary does without a subcommand.
    #[command(flatten)]
    pub serve: Config,
}

impl Cli {
    /// The command line of this process, parsed; on a mistake, clap's message and exit code 2.
    pub fn parse_checked() -> Self {
        Self::try_parse_checked_from(std::env::args_os()).unwrap_or_else(|error| error.exit())
    }

    /// Parses `args`, refusing a setting given before a subcommand. The top level takes `serve`'s settings (serving
    /// is what the binary does without a subcommand), so clap would accept `--database-url URL clients list` and
    /// hand the URL to a `serve` that never runs, while `clients list` used `DATABASE_URL`: a key written to
    /// another database than the one named. Each subcommand's `--help` lists the settings it takes, after it.
    pub fn try_parse_checked_from<I, T>(args: I) -> Result<Self, clap::Error>
    where
        I: IntoIterator<Item = T>,
        T: Into<std::ffi::OsString> + Clone,
    {
        let mut command = Self::command();
        let matches = command.try_get_matches_from_mut(args)?;
        if let Some(path) = subcommand_path(&matches) {
            let misplaced: Vec<String> = command
                .get_arguments()
                .filter(|arg| {
                    matches.value_source(arg.get_id().as_str()) == Some(ValueSource::CommandLine)
                })
                .filter_map(|arg| arg.get_long().map(|long| format!("--{long}")))
                .collect();
            if !misplaced.is_empty() {
                let message = format!(
                    "{} given before the subcommand `{path}`, where it would be ignored: give it after, as in \
                     `approval-resume {path} {} …` (`approval-resume {path} --help` lists what it takes)",
                    misplaced.join(", "),
                    misplaced[0],
                );
                return Err(command.error(ErrorKind::ArgumentConflict, message));
            }
        }
        Self::from_arg_matches(&matches).map_err(|error| error.format(&mut command))
    }

    /// The subcommand to run; none given means `serve` with the top-level settings.
    pub fn into_command(self) -> Command {
        self.command.unwrap_or(Command::Serve(self.serve))
    }
}

/// The subcommand named, with its own subcommands (`clients token-key add`); `None` without one.
fn subcommand_path(matches: &ArgMatches) -> Option<String> {
    let mut names = Vec::new();
    let mut current = matches;
    while let Some((name, below)) = current.subcommand() {
        names.push(name);
        current = below;
    }
    (!names.is_empty()).then(|| names.join(" "))
}

/// Each subcommand carries exactly the settings it uses, so that its `--help` shows those and nothing else.
// One `Command` is parsed once at start-up and moved into the subcommand it names: the size of its largest variant
// (`serve`'s settings) costs nothing worth boxing it for.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the HTTP service (the default).
    Serve(Config),
    /// Apply the database migrations and exit.
    Migrate(DatabaseCommand),
    /// Manage API clients and their keys.
    #[command(subcommand)]
    Clients(ClientsCommand),
    /// Delete tool-event payloads and finished runs older than the retention period, and say what was removed.
    Purge {
        /// Days to keep.
        #[arg(long, env = "RETENTION_DAYS", value_name = "DAYS",
              value_parser = clap::value_parser!(u32).range(1..=36_500))]
        older_than_days: Option<u32>,
        /// Hours to keep events, delivered or not.
        #[arg(long, env = "EVENT_RETENTION_HOURS", value_name = "HOURS", default_value_t = 168,
              value_parser = clap::value_parser!(u64).range(1..=87_600))]
        event_retention_hours: u64,
        #[command(flatten)]
        common: DatabaseCommand,
    },
    /// Follow the tenant's events over HTTP (`GET /v1/events`) and print each as a JSON line; needs no database,
    /// only the service's URL and a key with `events:read`.
    Watch(WatchArgs),
    /// Manage webhook subscriptions.
    #[command(subcommand)]
    Webhooks(WebhooksCommand),
    /// Encryption at rest: count stored values per key, or re-encrypt them under the first key.
    #[command(subcommand)]
    Keys(KeysCommand),
}

impl Command {
    /// The logging settings of whichever subcommand this is.
    pub fn log(&self) -> &LogConfig {
        match self {
            Command::Serve(config) => &config.log,
            Command::Migrate(common) | Command::Purge { common, .. } => &common.log,
            Command::Watch(watch) => &watch.log,
            Command::Clients(command) => &command.common().log,
            Command::Webhooks(command) => &command.common().log,
            Command::Keys(command) => &command.common().log,
        }
    }

    /// The database settings of whichever subcommand this is; `watch` has none (it reads the feed over HTTP).
    pub fn database(&self) -> Option<&DatabaseConfig> {
        match self {
            Command::Serve(config) => Some(&config.database),
            Command::Migrate(common) | Command::Purge { common, .. } => Some(&common.database),
            Command::Clients(command) => Some(&command.common().database),
            Command::Webhooks(command) => Some(&command.common().database),
            Command::Keys(command) => Some(&command.common().database),
            Command::Watch(_) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Cli;
    use crate::config::testing::every_command;

    #[test]
    fn a_setting_before_a_subcommand_is_refused_naming_where_it_goes() {
        let refused = Cli::try_parse_checked_from([
            "approval-resume",
            "--database-url",
            "postgres://elsewhere/db",
            "clients",
            "list",
        ])
        .expect_err("refused");
        assert_eq!(refused.exit_code(), 2);
        let message = refused.to_string();
        assert!(
            message.contains("--database-url given before the subcommand `clients list`"),
            "{message}"
        );
        assert!(
            message.contains("approval-resume clients list --database-url"),
            "{message}"
        );
        // After the subcommand, or at the top level to serve, it is taken.
        for args in [
            &[
                "approval-resume",
                "clients",
                "list",
                "--database-url",
                "postgres://elsewhere/db",
            ][..],
            &[
                "approval-resume",
                "--database-url",
                "postgres://elsewhere/db",
            ][..],
            &[
                "approval-resume",
                "serve",
                "--database-url",
                "postgres://elsewhere/db",
            ][..],
        ] {
            assert!(Cli::try_parse_checked_from(args).is_ok(), "{args:?}");
        }
    }

    /// The environment variables a command's help names.
    fn variables(command: &clap::Command) -> Vec<String> {
        let mut names: Vec<String> = command
            .get_arguments()
            .filter_map(|arg| arg.get_env())
            .map(|name| name.to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn each_subcommand_takes_only_the_settings_it_uses() {
        let database = [
            "DATABASE_ACQUIRE_TIMEOUT_MS",
            "DATABASE_MIGRATION_URL",
            "DATABASE_PGBOUNCER",
            "DATABASE_POOL_SIZE",
            "DATABASE_PRIMARY_CHECK_MS",
            "DATABASE_STATEMENT_TIMEOUT_MS",
            "DATABASE_URL",
            "LOG_FORMAT",
            "LOG_LEVEL",
        ];
        let serve_only = [
            "LISTEN_ADDR",
            "PRIVACY_LEVEL",
            "TOOLS_CONFIG",
            "REQUEST_TIMEOUT_MS",
            "HEADER_READ_TIMEOUT_MS",
            "BODY_READ_TIMEOUT_MS",
            "MAX_CONNECTIONS",
        ];
        // Serve and the `keys` subcommands, nothing else.
        let encryption = "ENCRYPTION_KEYS";
        let mut checked = 0;
        // clap's own `help` subcommands take no settings.
        let commands = every_command()
            .into_iter()
            .filter(|(path, _)| !path.iter().any(|name| name == "help"));
        for (path, command) in commands {
            let names = variables(&command);
            let path = path.join(" ");
            match path.as_str() {
                "" | "serve" => {
                    for name in database.iter().chain(&serve_only).chain([&encryption]) {
                        assert!(names.iter().any(|n| n == name), "{path}: {name} missing");
                    }
                }
                "keys status" | "keys rotate" => {
                    for name in database.iter().chain([&encryption]) {
                        assert!(names.iter().any(|n| n == name), "{path}: {name} missing");
                    }
                    for name in &serve_only {
                        assert!(!names.iter().any(|n| n == name), "{path} takes {name}");
                    }
                }
                // They store a secret, sealed with the keys `serve` uses.
                "webhooks add" | "webhooks rotate-secret" => {
                    for name in database.iter().chain([&encryption]) {
                        assert!(names.iter().any(|n| n == name), "{path}: {name} missing");
                    }
                    for name in &serve_only {
                        assert!(!names.iter().any(|n| n == name), "{path} takes {name}");
                    }
                }
                "clients" | "clients token-key" | "webhooks" | "keys" => {
                    assert!(names.is_empty(), "{path}: {names:?}")
                }
                // It follows the feed over HTTP: no database, no service settings.
                "watch" => {
                    for name in database.iter().take(4).chain(&serve_only) {
                        assert!(!names.iter().any(|n| n == name), "{path} takes {name}");
                    }
                }
                _ => {
                    assert!(
                        !names.iter().any(|n| n == encryption),
                        "{path} takes {encryption}"
                    );
                    for name in &serve_only {
                        assert!(!names.iter().any(|n| n == name), "{path} takes {name}");
                    }
                    for name in &database {
                        assert!(names.iter().any(|n| n == name), "{path}: {name} missing");
                    }
                }
            }
            checked += 1;
        }
        assert!(checked >= 8, "only {checked} commands seen");
    }
}
