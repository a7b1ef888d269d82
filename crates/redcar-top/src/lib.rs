//! `redcar top`: a live terminal view of a running redcar, polled from its admin `/metrics`.
//!
//! - `scrape`: a minimal HTTP/1.1 GET and a parser of the Prometheus text format.
//! - `stats`: counter deltas → rates, histogram bucket deltas → p50/p99, one `Frame`.
//! - `render`: a frame → text that fits the terminal width.
//! - `hotkeys`: the hot-key and big-key panel, from `/hotkeys` (JSON).
//! - `users`: the per-user table (configured users' `redcar_user_*` series).
//!
//! The first frame is shown at once, with rates averaged since start; later frames cover the last
//! interval. `--once` takes two scrapes `interval` apart and prints one frame. A failed scrape
//! after the first keeps the last frame on screen with a notice, so the view survives a restart.
//!
//! A crate of its own, called by the `redcar` binary (`redcar top`): it reads the proxy only over
//! HTTP, so it needs none of the proxy's code, only the spellings of durations (`redcar-units`).
#![warn(unreachable_pub, missing_docs)]

mod cells;
mod hotkeys;
mod render;
mod scrape;
mod stats;
mod users;
mod window;

use std::future::Future;
use std::io::{IsTerminal, Write};
use std::process::ExitCode;
use std::time::Duration;

use tokio::time::{Instant, MissedTickBehavior};

use redcar_units::parse_duration;
pub(crate) use render::render;
use scrape::{fetch_metrics, host_port, parse_exposition, ScrapeError};
pub(crate) use stats::{Frame, Snapshot};

/// Bound on one scrape: connect, request and the whole response.
const SCRAPE_TIMEOUT: Duration = Duration::from_secs(3);
/// Width used when the terminal's is unknown (`COLUMNS` unset).
const DEFAULT_WIDTH: usize = 80;
const CLEAR_SCREEN: &str = "\x1b[H\x1b[2J";
const HIDE_CURSOR: &str = "\x1b[?25l";
const SHOW_CURSOR: &str = "\x1b[?25h";

/// `redcar top`: watch a running redcar's commands, latencies and nodes.
#[derive(Clone, Debug, clap::Args)]
pub struct TopArgs {
    /// Admin address of the running redcar (its --admin), e.g. 127.0.0.1:9190.
    #[arg(long, env = "REDCAR_ADMIN", value_name = "ADDR")]
    pub(crate) admin: String,
    /// The admin API's bearer token, when redcar runs with `admin.token`. Prefer the
    /// environment variable: a flag's value is visible in the process list.
    #[arg(
        long,
        env = "REDCAR_ADMIN_TOKEN",
        value_name = "TOKEN",
        hide_env_values = true
    )]
    pub(crate) admin_token: Option<String>,
    /// Time between scrapes, e.g. 1s, 500ms, 5s.
    #[arg(long, value_name = "DURATION", default_value = "1s", value_parser = parse_duration)]
    pub(crate) interval: Duration,
    /// Print one frame (from two scrapes `interval` apart) as plain text and exit.
    #[arg(long)]
    pub(crate) once: bool,
}

/// Why `redcar top` stopped with a failure.
#[derive(Debug, thiserror::Error)]
pub(crate) enum TopError {
    #[error(
        "redcar top: cannot reach http://{addr}/metrics: {source} — \
         is redcar running with --admin {addr}?"
    )]
    Unreachable { addr: String, source: ScrapeError },
    #[error(
        "redcar top: http://{addr}/metrics answered 401: this redcar's admin API needs its \
         token (`admin.token`); pass --admin-token TOKEN or set REDCAR_ADMIN_TOKEN"
    )]
    Unauthorized { addr: String },
    #[error("redcar top: --interval must be more than 0")]
    ZeroInterval,
    #[error("redcar top: cannot write to the terminal: {0}")]
    Output(std::io::Error),
}

/// Runs `redcar top` on stdout until Ctrl-C (or after one frame with `--once`). Exit code 1, with
/// the reason on stderr, if the admin endpoint cannot be reached.
pub async fn run(args: TopArgs) -> ExitCode {
    let ansi = !args.once && std::io::stdout().is_terminal();
    let mut stdout = std::io::stdout();
    match run_with(&args, &mut stdout, ansi).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("{err}");
            ExitCode::FAILURE
        }
    }
}

/// [`run`] writing frames to `out`: with `ansi`, the screen is cleared between frames (meant for
/// a terminal); otherwise frames are plain text separated by a blank line. The live view stops
/// on Ctrl-C.
pub(crate) async fn run_with(
    args: &TopArgs,
    out: &mut impl Write,
    ansi: bool,
) -> Result<(), TopError> {
    if args.interval.is_zero() {
        return Err(TopError::ZeroInterval);
    }
    let result = if args.once {
        once(args, out).await
    } else {
        live(args, out, ansi, async {
            // If no handler can be installed, run until killed.
            if tokio::signal::ctrl_c().await.is_err() {
                std::future::pending::<()>().await;
            }
        })
        .await
    };
    match result {
        Err(TopError::Output(e)) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => other,
    }
}

/// Two scrapes `interval` apart, one plain frame.
async fn once(args: &TopArgs, out: &mut impl Write) -> Result<(), TopError> {
    let (addr, token) = (host_port(&args.admin), args.admin_token.as_deref());
    let first = scrape(addr, token).await?;
    let started = Instant::now();
    tokio::time::sleep(args.interval).await;
    let second = scrape(addr, token).await?;
    let mut frame = Frame::build(addr, &second, Some((&first, started.elapsed())));
    frame.hotkeys = hotkeys::fetch(addr, token, SCRAPE_TIMEOUT).await;
    write_frame(out, &frame, false, false)
}

/// Frames every `interval` until `stop` completes.
async fn live(
    args: &TopArgs,
    out: &mut impl Write,
    ansi: bool,
    stop: impl Future<Output = ()>,
) -> Result<(), TopError> {
    let (addr, token) = (host_port(&args.admin), args.admin_token.as_deref());
    let mut prev = (scrape(addr, token).await?, Instant::now());
    let mut frame = Frame::build(addr, &prev.0, None);
    frame.hotkeys = hotkeys::fetch(addr, token, SCRAPE_TIMEOUT).await;
    if ansi {
        out.write_all(HIDE_CURSOR.as_bytes())
            .map_err(TopError::Output)?;
    }
    let result = async {
        write_frame(out, &frame, ansi, false)?;
        let mut ticks = tokio::time::interval(args.interval);
        ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
        ticks.tick().await;
        tokio::pin!(stop);
        loop {
            let scraped = tokio::select! {
                _ = &mut stop => return Ok(()),
                _ = ticks.tick() => tokio::select! {
                    _ = &mut stop => return Ok(()),
                    scraped = scrape(addr, token) => scraped,
                },
            };
            let fresh = scraped.is_ok();
            frame = next_frame(addr, &mut prev, scraped, &frame);
            if fresh {
                frame.hotkeys = hotkeys::fetch(addr, token, SCRAPE_TIMEOUT).await;
            }
            write_frame(out, &frame, ansi, true)?;
        }
    }
    .await;
    if ansi {
        let _ = out
            .write_all(SHOW_CURSOR.as_bytes())
            .and_then(|()| out.flush());
    }
    result
}

/// The frame after a scrape: rates against the previous scrape, or the last frame with a notice
/// if this scrape failed.
fn next_frame(
    addr: &str,
    prev: &mut (Snapshot, Instant),
    scraped: Result<Snapshot, TopError>,
    last: &Frame,
) -> Frame {
    match scraped {
        Ok(snapshot) => {
            let now = Instant::now();
            let frame = Frame::build(addr, &snapshot, Some((&prev.0, now - prev.1)));
            *prev = (snapshot, now);
            frame
        }
        Err(err) => {
            let mut frame = last.clone();
            let reason = match err {
                TopError::Unreachable { source, .. } => source.to_string(),
                other => other.to_string(),
            };
            frame.notice = Some(format!("last scrape failed: {reason}; retrying"));
            frame
        }
    }
}

async fn scrape(addr: &str, token: Option<&str>) -> Result<Snapshot, TopError> {
    match fetch_metrics(addr, token, SCRAPE_TIMEOUT).await {
        Ok(body) => Ok(Snapshot::new(parse_exposition(&body))),
        Err(ScrapeError::Unauthorized) => Err(TopError::Unauthorized {
            addr: addr.to_string(),
        }),
        Err(source) => Err(TopError::Unreachable {
            addr: addr.to_string(),
            source,
        }),
    }
}

fn write_frame(
    out: &mut impl Write,
    frame: &Frame,
    ansi: bool,
    separate: bool,
) -> Result<(), TopError> {
    let text = render(frame, terminal_width());
    let result = if ansi {
        write!(out, "{CLEAR_SCREEN}{text}")
    } else if separate {
        write!(out, "\n{text}")
    } else {
        write!(out, "{text}")
    };
    result.and_then(|()| out.flush()).map_err(TopError::Output)
}

/// `COLUMNS` if the shell exported it, else [`DEFAULT_WIDTH`].
fn terminal_width() -> usize {
    std::env::var("COLUMNS")
        .ok()
        .and_then(|c| c.trim().parse::<usize>().ok())
        .filter(|&c| c > 0)
        .unwrap_or(DEFAULT_WIDTH)
}

#[cfg(test)]
mod tests;
