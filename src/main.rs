//! The `approval-resume` binary: parse the configuration, start logging, run the chosen subcommand.

use std::process::ExitCode;
use std::time::Duration;

use uuid::Uuid;

use approval_resume::application::{Application, Wiring};
use approval_resume::approval_links::LinkSettings;
use approval_resume::config::{Cli, Command, Config};
use approval_resume::delivery::{EventsHub, mail, webhooks};
use approval_resume::executor::Executors;
use approval_resume::resume;
use approval_resume::state::Limits;
use approval_resume::{allocator, commands, telemetry};

/// mimalloc instead of glibc's malloc: a decision allocates and frees thousands of small blocks (the transcript's
/// JSON tree, the answer), and glibc spent about 30 % of a deny's instructions on them (BENCHMARKS.md, "Profile of
/// a deny"), and kept the memory of large answers afterwards.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Sets the allocator's options (`allocator`) as the process loads, before Rust's runtime allocates: mimalloc reserves
/// its first arena on the first allocation, with the options it has then (set in `main`, they came too late: the
/// arena was already committed). Entries of `.init_array` run before `main`; ELF's, so Linux only, where the
/// service is built to run (elsewhere mimalloc keeps its own defaults).
#[cfg(target_os = "linux")]
#[used]
#[unsafe(link_section = ".init_array")]
static SET_ALLOCATOR_OPTIONS: extern "C" fn() = set_allocator_options;

#[cfg(target_os = "linux")]
extern "C" fn set_allocator_options() {
    allocator::apply();
}

#[tokio::main]
async fn main() -> ExitCode {
    let command = Cli::parse_checked().into_command();
    if let Err(error) = command.validate() {
        eprintln!("error: invalid configuration: {error}");
        return ExitCode::from(2);
    }
    let log = command.log();
    telemetry::init(log.log_format, &log.log_level);
    let outcome = match command {
        Command::Serve(config) => serve(config).await,
        Command::Watch(args) => commands::watch::run(args)
            .await
            .map_err(|error| error.to_string()),
        other => commands::run(other)
            .await
            .map_err(|error| error.to_string()),
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("error: {message}");
            ExitCode::FAILURE
        }
    }
}

async fn serve(config: Config) -> Result<(), String> {
    tracing::info!(
        arena_eager_commit = allocator::current(allocator::ARENA_EAGER_COMMIT),
        purge_delay_ms = allocator::current(allocator::PURGE_DELAY),
        "allocator options in effect (MIMALLOC_* in the environment override the service's)"
    );
    let executors = match &config.tools_config {
        Some(path) => Executors::from_file(
            path,
            |name| std::env::var(name).ok(),
            config.executors_allow_insecure_secrets,
        )
        .map_err(|error| error.to_string())?,
        None => Executors::none(),
    };
    let sealer = config
        .encryption
        .sealer()
        .map_err(|error| error.to_string())?;
    if sealer.is_enabled() {
        let key_ids: Vec<&str> = sealer.key_ids().collect();
        tracing::info!(
            ?key_ids,
            "encryption at rest: payloads are sealed under the first key id"
        );
    } else {
        tracing::warn!(
            "ENCRYPTION_KEYS is not set: transcripts, arguments and results are stored in clear (docs/design.md §11)"
        );
    }
    let pool = commands::open_database(&config.database)
        .await
        .map_err(|error| error.to_string())?
        .with_sealer(sealer);
    let events = EventsHub::start_with_caps(
        pool.clone(),
        Duration::from_millis(config.events.events_poll_interval_ms),
        config.feed_max_wait(),
        config.events.feed_caps(),
    );
    let links = LinkSettings {
        public_url: config.links.public_url.clone(),
        ttl: config.links.link_ttl(),
    };
    let mail_pool = pool.clone();
    let application = Application::build(Wiring {
        pool: pool.clone(),
        executors,
        privacy_floor: config.privacy_level,
        instance_id: Uuid::new_v4(),
        lease_margin: Duration::from_millis(config.resume_lease_margin_ms),
        claim_ttl: Duration::from_secs(config.worker_claim_ttl_secs),
        deny_batch_beyond: config
            .deny_batches
            .then_some(resume::denial_writer::BATCH_BEYOND),
        limits: Limits {
            max_body_bytes: usize::try_from(config.max_body_bytes).unwrap_or(usize::MAX),
            request_timeout: config.request_timeout(),
            body_read_timeout: Duration::from_millis(config.body_read_timeout_ms),
            work: config.work_limits(),
            body_bytes_in_flight: config
                .max_body_bytes_in_flight
                .map(|bytes| usize::try_from(bytes).unwrap_or(usize::MAX)),
            large_bodies_at_once: config
                .large_bodies_at_once
                .map(|count| usize::try_from(count).unwrap_or(usize::MAX)),
        },
        events: events.clone(),
        webhooks: config.events.webhook_policy(),
        links: links.clone(),
    });
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let recovery = resume::spawn_recovery(
        application.resumer(),
        Duration::from_secs(config.recovery_interval_secs),
        stop_rx,
    );
    let sweeper = resume::spawn_sweeper(
        application.resumer(),
        Duration::from_millis(config.expiry_sweep_interval_ms),
        stop_tx.subscribe(),
    );
    let lapses = resume::spawn_lapse_sweeper(
        application.resumer(),
        Duration::from_millis(config.expiry_sweep_interval_ms),
        stop_tx.subscribe(),
    );
    let purge = commands::spawn_periodic_purge(
        pool.clone(),
        config.retention_days,
        config.events.event_retention(),
        Duration::from_secs(config.purge_interval_secs),
        stop_tx.subscribe(),
    );
    let deliveries = if config.events.webhook_concurrency > 0 {
        Some(webhooks::spawn(
            pool,
            events,
            config.events.webhook_settings(),
            stop_tx.subscribe(),
        )?)
    } else {
        None
    };
    let mails = match config.links.smtp_url().map_err(|error| error.to_string())? {
        Some(url) => {
            let transport = mail::transport(&url, config.links.mail.smtp_ca_file.as_deref())
                .map_err(|error| error.to_string())?;
            let from = config
                .links
                .mail
                .mail_from
                .clone()
                .ok_or("SMTP_URL is set without MAIL_FROM")?;
            tracing::info!("mail to the people who may decide is sent through SMTP_URL");
            Some(mail::spawn(
                mail_pool,
                mail::MailSettings {
                    transport,
                    from,
                    links: links.clone(),
                    per_tenant_per_hour: config.links.mail.mail_per_tenant_per_hour,
                    per_person_per_hour: config.links.mail.mail_per_person_per_hour,
                },
                stop_tx.subscribe(),
            ))
        }
        None => None,
    };
    let listener = tokio::net::TcpListener::bind(config.listen_addr)
        .await
        .map_err(|error| format!("LISTEN_ADDR {}: {error}", config.listen_addr))?;
    let address = listener.local_addr().map_err(|error| error.to_string())?;
    tracing::info!(%address, privacy_level = config.privacy_level.as_str(), "listening");
    let grace = Duration::from_secs(config.shutdown_grace_secs);
    let served = application
        .serve(
            listener,
            config.connection_limits(),
            shutdown_signal(),
            grace,
        )
        .await;
    let _ = stop_tx.send(true);
    let _ = recovery.await;
    let _ = sweeper.await;
    let _ = lapses.await;
    let _ = purge.await;
    if let Some(deliveries) = deliveries {
        let _ = deliveries.await;
    }
    if let Some(mails) = mails {
        let _ = mails.await;
    }
    tracing::info!("stopped");
    served.map_err(|error| error.to_string())
}

/// Resolves on SIGTERM or Ctrl-C.
async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {},
        () = terminate => {},
    }
    tracing::info!("shutting down");
}
