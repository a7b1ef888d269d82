//! `CLIENT TRACKING`, `CLIENT CACHING`, `CLIENT GETREDIR` and `CLIENT TRACKINGINFO`, with Redis
//! 7.0's checks in its order and its exact errors (measured against redis-server 7.0.15).
//!
//! Why Redis's exact order and words: client libraries that implement client-side caching (Lettuce,
//! redis-py, go-redis) switch tracking on and off and read `CLIENT TRACKINGINFO` as Redis answers;
//! an error in a different order or wording would break their handling of it. Nothing here touches
//! a node: these commands change what redcar tracks for the session, and the node-side tracking is
//! redcar's own (see `upstream::tracking`). Errors are returned as lines without the leading `-`;
//! [`error`] makes them replies.

use bytes::{Bytes, BytesMut};

use crate::protocol::{
    write_array_len, write_bulk, write_error, write_integer, write_map_len, Args, Protocol,
};

/// Redis's generic refusal for an unknown option or a missing argument.
const SYNTAX: &[u8] = b"ERR syntax error";

/// A session's tracking mode while it is on (as `CLIENT TRACKINGINFO` shows it).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(in crate::downstream) struct TrackingMode {
    /// The client that receives the invalidations; 0 for the session itself.
    pub(crate) redirect: u64,
    /// `BCAST`: invalidations for every key under the prefixes, whoever read them.
    pub(crate) bcast: bool,
    /// `OPTIN`: only keys read right after `CLIENT CACHING yes` are tracked.
    pub(crate) optin: bool,
    /// `OPTOUT`: keys read right after `CLIENT CACHING no` are not tracked.
    pub(crate) optout: bool,
    /// `NOLOOP`: no invalidations for keys the session itself wrote.
    pub(crate) noloop: bool,
    /// `CLIENT CACHING yes|no` for the next command.
    pub(crate) caching: bool,
    /// BCAST prefixes, sorted (`""` when BCAST was asked without one).
    pub(crate) prefixes: Vec<Bytes>,
}

/// A parsed `CLIENT TRACKING on|off [REDIRECT id] [PREFIX p ...] [BCAST] [OPTIN] [OPTOUT]
/// [NOLOOP]`.
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct Switch {
    /// `on` or `off`.
    pub(crate) on: bool,
    /// `REDIRECT id`, checked to be a connected client; 0 when absent.
    pub(crate) redirect: u64,
    /// `BCAST` given.
    pub(crate) bcast: bool,
    /// `OPTIN` given.
    pub(crate) optin: bool,
    /// `OPTOUT` given.
    pub(crate) optout: bool,
    /// `NOLOOP` given.
    pub(crate) noloop: bool,
    /// `PREFIX p` options, in the order given (duplicates kept for the overlap check).
    pub(crate) prefixes: Vec<Bytes>,
}

/// Parses `args` (`CLIENT TRACKING ...`) and checks it against the current `mode`; `exists`
/// says whether a client id is connected. The error line (without `-`) when refused.
pub(super) fn parse(
    args: Args<'_>,
    mode: Option<&TrackingMode>,
    exists: impl Fn(u64) -> bool,
) -> Result<Switch, Vec<u8>> {
    let mut switch = Switch::default();
    let mut redirect: Option<i64> = None;
    let mut j = 3;
    while j < args.len() {
        let more = j + 1 < args.len();
        let word = &args[j];
        if word.eq_ignore_ascii_case(b"redirect") && more {
            j += 1;
            if redirect.is_some_and(|r| r != 0) {
                return Err(b"ERR A client can only redirect to a single other client".to_vec());
            }
            let id = std::str::from_utf8(&args[j])
                .ok()
                .and_then(|s| s.parse::<i64>().ok())
                .ok_or_else(|| b"ERR value is not an integer or out of range".to_vec())?;
            if id <= 0 || !exists(id as u64) {
                return Err(b"ERR The client ID you want redirect to does not exist".to_vec());
            }
            redirect = Some(id);
        } else if word.eq_ignore_ascii_case(b"bcast") {
            switch.bcast = true;
        } else if word.eq_ignore_ascii_case(b"optin") {
            switch.optin = true;
        } else if word.eq_ignore_ascii_case(b"optout") {
            switch.optout = true;
        } else if word.eq_ignore_ascii_case(b"noloop") {
            switch.noloop = true;
        } else if word.eq_ignore_ascii_case(b"prefix") && more {
            j += 1;
            switch.prefixes.push(Bytes::copy_from_slice(&args[j]));
        } else {
            return Err(SYNTAX.to_vec());
        }
        j += 1;
    }
    switch.redirect = redirect.map_or(0, |r| r as u64);
    let Some(on_off) = args.get(2) else {
        return Err(SYNTAX.to_vec());
    };
    if on_off.eq_ignore_ascii_case(b"off") {
        return Ok(switch);
    }
    if !on_off.eq_ignore_ascii_case(b"on") {
        return Err(SYNTAX.to_vec());
    }
    switch.on = true;
    check_on(&switch, mode)?;
    Ok(switch)
}

/// Redis's checks for `on`, in its order.
///
/// A mode already on may be amended only in ways Redis allows (prefixes added, `NOLOOP` and
/// `REDIRECT` changed), never switched between BCAST and default or between OPTIN and OPTOUT.
fn check_on(switch: &Switch, mode: Option<&TrackingMode>) -> Result<(), Vec<u8>> {
    if !switch.bcast && !switch.prefixes.is_empty() {
        return Err(b"ERR PREFIX option requires BCAST mode to be enabled".to_vec());
    }
    if mode.is_some_and(|m| m.bcast != switch.bcast) {
        return Err(b"ERR You can't switch BCAST mode on/off before disabling tracking for this client, and then re-enabling it with a different mode.".to_vec());
    }
    if switch.bcast && (switch.optin || switch.optout) {
        return Err(b"ERR OPTIN and OPTOUT are not compatible with BCAST".to_vec());
    }
    if switch.optin && switch.optout {
        return Err(b"ERR You can't specify both OPTIN mode and OPTOUT mode".to_vec());
    }
    if mode.is_some_and(|m| (switch.optin && m.optout) || (switch.optout && m.optin)) {
        return Err(b"ERR You can't switch OPTIN/OPTOUT mode before disabling tracking for this client, and then re-enabling it with a different mode.".to_vec());
    }
    if switch.bcast {
        let existing = mode.map_or(&[][..], |m| &m.prefixes[..]);
        check_prefixes(&switch.prefixes, existing)?;
    }
    Ok(())
}

/// Prefixes of one client must not overlap, neither with those it has nor among themselves.
fn check_prefixes(new: &[Bytes], existing: &[Bytes]) -> Result<(), Vec<u8>> {
    let overlap = |a: &[u8], b: &[u8]| {
        let n = a.len().min(b.len());
        a[..n] == b[..n]
    };
    for (i, prefix) in new.iter().enumerate() {
        if let Some(old) = existing.iter().find(|old| overlap(old, prefix)) {
            return Err(overlap_error(prefix, old, "an existing"));
        }
        if let Some(other) = new[i + 1..].iter().find(|other| overlap(prefix, other)) {
            return Err(overlap_error(prefix, other, "another provided"));
        }
    }
    Ok(())
}

/// Redis's wording, naming both prefixes.
fn overlap_error(prefix: &[u8], other: &[u8], which: &str) -> Vec<u8> {
    format!(
        "ERR Prefix '{}' overlaps with {which} prefix '{}'. Prefixes for a single client must not overlap.",
        String::from_utf8_lossy(prefix),
        String::from_utf8_lossy(other)
    )
    .into_bytes()
}

/// `CLIENT CACHING yes|no` against the current mode: the error line when refused.
///
/// Marks `caching` on the mode: it applies to the session's next command only (the next one that
/// is not a `CLIENT` command clears it; inside MULTI, the transaction's commands).
pub(super) fn caching(arg: &[u8], mode: Option<&mut TrackingMode>) -> Result<(), &'static [u8]> {
    let Some(mode) = mode else {
        return Err(b"ERR CLIENT CACHING can be called only when the client is in tracking mode with OPTIN or OPTOUT mode enabled");
    };
    if arg.eq_ignore_ascii_case(b"yes") {
        if !mode.optin {
            return Err(
                b"ERR CLIENT CACHING YES is only valid when tracking is enabled in OPTIN mode.",
            );
        }
    } else if arg.eq_ignore_ascii_case(b"no") {
        if !mode.optout {
            return Err(
                b"ERR CLIENT CACHING NO is only valid when tracking is enabled in OPTOUT mode.",
            );
        }
    } else {
        return Err(SYNTAX);
    }
    mode.caching = true;
    Ok(())
}

/// `CLIENT TRACKINGINFO`: flags, redirect and prefixes, a map in RESP3 (flags a set).
pub(super) fn info(mode: Option<&TrackingMode>, broken: bool, protocol: Protocol) -> Bytes {
    let mut flags: Vec<&[u8]> = Vec::new();
    match mode {
        None => flags.push(b"off"),
        Some(m) => {
            flags.push(b"on");
            let named: [(bool, &[u8]); 6] = [
                (m.bcast, b"bcast"),
                (m.optin, b"optin"),
                (m.optin && m.caching, b"caching-yes"),
                (m.optout, b"optout"),
                (m.optout && m.caching, b"caching-no"),
                (m.noloop, b"noloop"),
            ];
            flags.extend(named.iter().filter(|(on, _)| *on).map(|(_, name)| *name));
            if broken {
                flags.push(b"broken_redirect");
            }
        }
    }
    let mut out = BytesMut::with_capacity(128);
    write_map_len(&mut out, 3, protocol);
    write_bulk(&mut out, b"flags");
    if protocol.is_resp3() {
        out.extend_from_slice(format!("~{}\r\n", flags.len()).as_bytes());
    } else {
        write_array_len(&mut out, flags.len());
    }
    for flag in flags {
        write_bulk(&mut out, flag);
    }
    write_bulk(&mut out, b"redirect");
    write_integer(&mut out, redirect(mode));
    write_bulk(&mut out, b"prefixes");
    let prefixes = mode.map_or(&[][..], |m| &m.prefixes[..]);
    write_array_len(&mut out, prefixes.len());
    for prefix in prefixes {
        write_bulk(&mut out, prefix);
    }
    out.freeze()
}

/// `CLIENT GETREDIR`: -1 with tracking off, 0 without REDIRECT, else the client redirected to.
pub(super) fn redirect(mode: Option<&TrackingMode>) -> i64 {
    mode.map_or(-1, |m| m.redirect as i64)
}

/// An error line as a reply (a prefix quoted in it may hold CR or LF: they become spaces).
pub(super) fn error(line: &[u8]) -> Bytes {
    let line: Vec<u8> = line
        .iter()
        .map(|&b| if b == b'\r' || b == b'\n' { b' ' } else { b })
        .collect();
    let mut out = BytesMut::with_capacity(line.len() + 3);
    write_error(&mut out, &line);
    out.freeze()
}

#[cfg(test)]
#[path = "command_tests.rs"]
mod tests;
