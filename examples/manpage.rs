//! Writes redcar's man pages, generated from the clap CLI, into a directory:
//!
//!   cargo run --example manpage -- DIR DATE
//!
//! DATE (YYYY-MM-DD) goes in the pages' header; scripts/build-deb.sh passes the date of the
//! package's changelog entry, so the same sources give the same pages (no build-time clock).
//!
//! `redcar.1` for the proxy's flags, plus one page per subcommand (`redcar-doctor.1`,
//! `redcar-top.1`, `redcar-config.1`, `redcar-config-convert-envoy.1`), so `man redcar-doctor`
//! works the way `man git-log` does. An example rather than a `--man` flag so that the product
//! binary carries neither clap_mangen nor the roff text. scripts/build-deb.sh runs it for the
//! Debian package; the pages cannot drift from the flags because both come from the same `Cli`.

use std::io::Write;
use std::path::{Path, PathBuf};

use clap::CommandFactory;
use clap_mangen::roff::{bold, roman, Roff};
use clap_mangen::Man;
use redcar::config::Cli;

fn main() -> std::io::Result<()> {
    let mut args = std::env::args().skip(1);
    let (Some(dir), Some(date), None) = (args.next(), args.next(), args.next()) else {
        eprintln!("usage: manpage DIR DATE   (DATE as YYYY-MM-DD)");
        std::process::exit(64);
    };
    let dir = PathBuf::from(dir);
    std::fs::create_dir_all(&dir)?;
    // Built without the help subcommand (as clap_mangen::generate_to does), so no
    // `redcar-help.1` appears and redcar.1 does not list `help` among the subcommands.
    let mut cmd = Cli::command().disable_help_subcommand(true);
    cmd.build();
    // Subcommands have no version of their own: every page names the package's in its footer.
    let source = format!("redcar {}", env!("CARGO_PKG_VERSION"));
    let meta = Meta { source, date };
    write_pages(&cmd, &dir, &meta, true)
}

/// The header and footer every page shares.
struct Meta {
    source: String,
    date: String,
}

/// Writes `cmd`'s page and, recursively, its subcommands' (named after the display names that
/// `build` gave them: `redcar-config-convert-envoy`).
fn write_pages(cmd: &clap::Command, dir: &Path, meta: &Meta, root: bool) -> std::io::Result<()> {
    for sub in cmd.get_subcommands().filter(|sub| !sub.is_hide_set()) {
        write_pages(sub, dir, meta, false)?;
    }
    // All three set: roff drops an empty .TH argument, which shifts the ones after it.
    let man = Man::new(cmd.clone())
        .date(&meta.date)
        .source(&meta.source)
        .manual("redcar manual");
    let mut page = Vec::new();
    man.render(&mut page)?;
    if root {
        page.write_all(extra_sections().render().as_bytes())?;
    }
    std::fs::write(dir.join(man.get_filename()), page)
}

/// What clap does not know: where the packaged files are, the exit status that means "fix the
/// config" (the unit's RestartPreventExitStatus), and where the full reference lives.
fn extra_sections() -> Roff {
    let mut roff = Roff::new();
    roff.control("SH", ["FILES"]);
    roff.control("TP", []);
    roff.text([bold("/etc/redcar/redcar.yaml")]);
    roff.text([roman(
        "The configuration the packaged systemd unit (redcar.service) starts with. \
         Flags and REDCAR_* environment variables override it.",
    )]);
    roff.control("TP", []);
    roff.text([bold("/etc/redcar/env")]);
    roff.text([roman(
        "Optional environment file of the unit, for secrets read with {env: NAME}; keep it mode 600.",
    )]);
    roff.control("SH", ["EXIT STATUS"]);
    roff.text([roman(
        "0 after a clean shutdown or a valid --check-config; 64 for an invalid configuration \
         (restarting will not fix it); 2 for an unknown flag; 1 when it cannot run, e.g. an \
         address already in use. The subcommands have their own; see their pages.",
    )]);
    roff.control("SH", ["SEE ALSO"]);
    roff.text([
        bold("redcar-doctor"),
        roman("(1), "),
        bold("redcar-top"),
        roman("(1), "),
        bold("redcar-config"),
        roman("(1), "),
        bold("redis-cli"),
        roman("(1). The configuration reference: /usr/share/doc/redcar/configuration.md.gz"),
        roman(" in the Debian package, docs/configuration.md in the source."),
    ]);
    roff
}
