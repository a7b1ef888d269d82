//! The `redcar` binary: parse flags, load and validate the config, start the runtime, run.

use std::process::ExitCode;

use clap::Parser;
use redcar::app::{self, Listeners};
use redcar::config::{Cli, Config};

/// Exit status for a configuration error (EX_USAGE), distinct from a runtime failure.
const EXIT_BAD_CONFIG: u8 = 64;

fn main() -> ExitCode {
    let cli = Cli::parse();
    let config = match Config::load(&cli) {
        Ok(config) => config,
        Err(error) => {
            eprintln!("redcar: {error}");
            return ExitCode::from(EXIT_BAD_CONFIG);
        }
    };
    if cli.check_config {
        match serde_yaml::to_string(&config) {
            Ok(yaml) => print!("{yaml}"),
            Err(error) => eprintln!("redcar: cannot print config: {error}"),
        }
        return ExitCode::SUCCESS;
    }
    if let Err(error) = init_logging(&config) {
        eprintln!("redcar: {error}");
        return ExitCode::from(EXIT_BAD_CONFIG);
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(config.worker_threads())
        .enable_all()
        .build();
    let result = runtime
        .map_err(anyhow::Error::from)
        .and_then(|rt| rt.block_on(start(config)));
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            tracing::error!("{error:#}");
            eprintln!("redcar: {error:#}");
            ExitCode::FAILURE
        }
    }
}

async fn start(config: Config) -> anyhow::Result<()> {
    let listeners = Listeners::bind(&config).await?;
    app::run(config, listeners, shutdown_signal()).await
}

/// Resolves on SIGTERM or SIGINT.
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

fn init_logging(config: &Config) -> anyhow::Result<()> {
    let filter = tracing_subscriber::EnvFilter::try_new(&config.log_level)?;
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    if config.log_format == "json" {
        builder.json().init();
    } else {
        builder.init();
    }
    Ok(())
}
