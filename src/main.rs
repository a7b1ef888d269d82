//! The `redcar` binary: parse flags, load and validate the config, start the runtime, run
//! (or run the `doctor`, `top` or `config convert-envoy` tool instead).
//!
//! Exit statuses: 0 after a clean shutdown (SIGTERM or SIGINT, clients drained) or a successful
//! tool run; 64 (`EX_USAGE`) for a config that does not load or validate, and for bad `doctor`
//! arguments; clap's own status for other bad flags; 1 when the proxy fails while starting or
//! running. The tools choose their own statuses (docs/doctor.md, docs/top.md,
//! docs/migrating-from-envoy.md, docs/operations.md for `upgrade`).
//!
//! The allocator (mimalloc, tuned to give memory back) is set in `allocator.rs`, the only module
//! of the binary; everything else lives in the library crate, so tests/ drive the same `app::run`
//! this file calls, or, for the tools, in their own crates (crates/redcar-doctor, redcar-top,
//! redcar-envoy).

use std::process::ExitCode;

use clap::Parser;
use redcar::app::{self, Listeners};
use redcar::config::{Cli, Command, Config, ConfigCommand};
use redcar::workers::Model;
use redcar_doctor as doctor;

mod allocator;

/// Exit status for a configuration error (EX_USAGE), distinct from a runtime failure.
/// Service managers and scripts can tell "fix the config" from "it crashed" by this status alone;
/// systemd's `RestartPreventExitStatus=64` keeps a bad config from restart loops.
const EXIT_BAD_CONFIG: u8 = 64;

/// The order is deliberate: tools run before any config is loaded (they need none), logging starts
/// only after the config is valid (its level and format come from it), and the runtime is built
/// last, shaped by the threading model. `--check-config` prints the effective config, secrets
/// redacted, and exits without binding anything.
fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(error) => return usage_error(&error),
    };
    if let Some(options) = cli.doctor_options() {
        return run_doctor(&options);
    }
    if let Some(Command::Config(ConfigCommand::ConvertEnvoy(args))) = &cli.command {
        return ExitCode::from(app::convert_envoy(args));
    }
    if let Some(Command::Upgrade(args)) = &cli.command {
        return ExitCode::from(app::upgrade_command(&args.pid_file, args.timeout));
    }
    if let Some(Command::Top(args)) = cli.command {
        return run_tool("top", redcar_top::run(args));
    }
    let config = match Config::load(&cli) {
        Ok(config) => config,
        Err(error) => {
            eprintln!("redcar: {error}");
            return ExitCode::from(EXIT_BAD_CONFIG);
        }
    };
    if cli.check_config {
        match yaml_serde::to_string(&config) {
            Ok(yaml) => print!("{yaml}"),
            Err(error) => eprintln!("redcar: cannot print config: {error}"),
        }
        return ExitCode::SUCCESS;
    }
    if let Err(error) = init_logging(&config) {
        eprintln!("redcar: {error}");
        return ExitCode::from(EXIT_BAD_CONFIG);
    }
    // Per core, the data plane runs on the worker threads `app::run` starts; this runtime keeps
    // only the control plane (refresh, admin, reload) and needs one thread.
    let runtime = match config.threading_model() {
        Model::Shared => tokio::runtime::Builder::new_multi_thread()
            .worker_threads(config.worker_threads())
            .enable_all()
            .build(),
        Model::PerCore => tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build(),
    };
    // SIGHUP reloads with the same flags (and `REDCAR_*` variables as read at start-up), so a
    // flag keeps overriding the file exactly as it did at start-up.
    let source: app::ConfigSource = std::sync::Arc::new(move || Config::load(&cli));
    let result = runtime
        .map_err(anyhow::Error::from)
        .and_then(|rt| rt.block_on(start(config, source)));
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            tracing::error!("{error:#}");
            eprintln!("redcar: {error:#}");
            ExitCode::FAILURE
        }
    }
}

/// Prints a flag error (or `--help`/`--version`) and picks the exit status.
/// `--help` and `--version` go to stdout with status 0.
fn usage_error(error: &clap::Error) -> ExitCode {
    let _ = error.print();
    if !error.use_stderr() {
        return ExitCode::SUCCESS;
    }
    // clap exits 2 on a usage error, but `redcar doctor` uses 2 for "critical finding"; it
    // answers bad arguments with 64 instead. The proxy keeps clap's status, as before.
    if std::env::args_os().skip(1).any(|arg| arg == "doctor") {
        return ExitCode::from(doctor::EXIT_USAGE);
    }
    ExitCode::from(u8::try_from(error.exit_code()).unwrap_or(1))
}

/// `redcar doctor`: a short-lived client, so one thread is plenty.
/// Doctor's statuses (0 to 3) say how bad its findings are, so they pass through unchanged.
fn run_doctor(options: &doctor::DoctorOptions) -> ExitCode {
    run_tool("doctor", async {
        ExitCode::from(doctor::run(options).await)
    })
}

/// Runs a tool subcommand on a single-threaded runtime.
/// Status 1 if the runtime cannot be built; otherwise the tool's own.
fn run_tool(name: &str, tool: impl std::future::Future<Output = ExitCode>) -> ExitCode {
    match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime.block_on(tool),
        Err(error) => {
            eprintln!("redcar {name}: cannot start the runtime: {error}");
            ExitCode::FAILURE
        }
    }
}

/// Runs on the main runtime; returns when `app::run` does, i.e. after the drain or hand-over.
async fn start(config: Config, source: app::ConfigSource) -> anyhow::Result<()> {
    // Started by an upgrade in place, the old process passes its listeners.
    let listeners = Listeners::inherit_or_bind(&config).await?;
    app::run(config, listeners, shutdown_signal(), source).await
}

/// Resolves on SIGTERM or SIGINT.
/// Without a SIGTERM handler only Ctrl-C stops the proxy; the error is logged so that an operator
/// whose `kill` does nothing knows why.
async fn shutdown_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = match signal(SignalKind::terminate()) {
        Ok(term) => term,
        Err(error) => {
            tracing::error!(%error, "cannot watch SIGTERM; stop with SIGINT");
            let _ = tokio::signal::ctrl_c().await;
            return;
        }
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = tokio::signal::ctrl_c() => {}
    }
}

/// Fails on a `log_level` filter that `EnvFilter` cannot parse; `log_format: json` writes one JSON
/// object per line (docs/observability.md). Called once: a reload keeps the subscriber.
fn init_logging(config: &Config) -> anyhow::Result<()> {
    let filter = tracing_subscriber::EnvFilter::try_new(&config.log_level)?;
    // Colours only on a terminal: a log file or journald gets plain `key=value` text that
    // grep and log shippers read as it is.
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(ansi)
        .with_writer(std::io::stderr);
    if config.log_format == "json" {
        builder.json().init();
    } else {
        builder.init();
    }
    Ok(())
}
