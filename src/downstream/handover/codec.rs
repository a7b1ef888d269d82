//! The record's wire form, versioned so that any two releases with upgrades in place hand over
//! in both directions (roll forward, roll back).
//!
//! ```text
//! "RCHO" | version: u16 | field* | end ;  field = tag: u8 | length: u32 | value ;
//! end = 255 | 0u32                                                        (big-endian)
//! ```
//!
//! The two processes agree on a version before any record is sent (`app::upgrade`): the highest
//! both can read. A reader skips tags it does not know, so a later release may add fields to a
//! version without breaking an earlier reader; what changes the meaning of a field takes a new
//! version, and a process that shares no version with its peer passes only the listeners and
//! drains its clients. Tags are never reused.

use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};

use super::{FacadeRecord, HandedOver, Login, TrackingRecord};

/// The oldest and newest record versions this build reads and writes.
pub(crate) const OLDEST: u16 = 1;
/// Version 2: the newest this build writes, when the peer reads it too.
pub(crate) const CURRENT: u16 = 2;

/// From this version on, a subscribed client moves with its subscriptions: the reader
/// subscribes them again and answers `Subscribed` (`release.rs`). Version 1 has the same
/// layout, but its readers do neither, so a version-1 peer gets subscribers closed instead.
pub(crate) const SUBSCRIBERS: u16 = 2;

/// The first four bytes of every record: a stream that does not start with them is not a record at
/// all.
const MAGIC: &[u8; 4] = b"RCHO";

/// Why a record could not be read.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub(crate) enum DecodeError {
    /// The record does not start with `RCHO`.
    #[error("not a handover record (bad magic)")]
    Magic,
    /// A version outside [`OLDEST`]`..=`[`CURRENT`].
    #[error("record version {0} is not one this build reads ({OLDEST}..={CURRENT})")]
    Version(u16),
    /// The bytes ended before the end marker, or inside a field.
    #[error("record cut short")]
    Truncated,
    /// A field's value has the wrong size or is not valid text; names the tag.
    #[error("field {0} is malformed")]
    Field(u8),
    /// A field every record carries (`id`, `listener`, `protocol`) is absent.
    #[error("field {0} is missing")]
    Missing(&'static str),
}

/// Every field's tag. Values are big-endian integers or raw bytes; a tag may repeat only where a
/// list is meant (channels, patterns, prefixes).
mod tag {
    /// The client id (u64), kept by the new process.
    pub(super) const ID: u8 = 1;
    /// The peer's address, as the registry shows it.
    pub(super) const PEER: u8 = 2;
    /// The listener the client came in on.
    pub(super) const LISTENER: u8 = 3;
    /// The logged-in user's name; absent for a client that never logged in.
    pub(super) const USER: u8 = 4;
    /// The digest of the password the client logged in with, so the new process can check it still
    /// works.
    pub(super) const CREDENTIAL: u8 = 5;
    /// The RESP version (2 or 3) the client speaks.
    pub(super) const PROTOCOL: u8 = 6;
    /// `CLIENT SETNAME`, if set.
    pub(super) const NAME: u8 = 7;
    /// `CLIENT SETINFO LIB-NAME`, if set.
    pub(super) const LIB_NAME: u8 = 8;
    /// `CLIENT SETINFO LIB-VER`, if set.
    pub(super) const LIB_VER: u8 = 9;
    /// The database the client selected (u32).
    pub(super) const DB: u8 = 10;
    /// Failed logins so far (u16), so `auth.max_failures` keeps counting across the upgrade.
    pub(super) const FAILED_LOGINS: u8 = 11;
    /// The cluster facade's announced host, for a client of a facade listener.
    pub(super) const FACADE_HOST: u8 = 12;
    /// The facade's announced IP.
    pub(super) const FACADE_IP: u8 = 13;
    /// The facade's announced host name, if any.
    pub(super) const FACADE_HOSTNAME: u8 = 14;
    /// The facade's announced port (u16).
    pub(super) const FACADE_PORT: u8 = 15;
    /// Whether the facade announces a TLS port (one byte, 0 or 1).
    pub(super) const FACADE_TLS: u8 = 16;
    /// The facade's node id, so the client keeps seeing the same one-node cluster.
    pub(super) const FACADE_ID: u8 = 17;
    /// Client tracking's mode bits (one byte: `BCAST`, `OPTIN`, `OPTOUT`, `NOLOOP`); present only
    /// when tracking is on.
    pub(super) const TRACKING: u8 = 20;
    /// Tracking's `REDIRECT` client id (u64).
    pub(super) const TRACKING_REDIRECT: u8 = 21;
    /// One tracking `PREFIX` (repeated).
    pub(super) const TRACKING_PREFIX: u8 = 22;
    /// One subscribed channel (repeated).
    pub(super) const CHANNEL: u8 = 30;
    /// One subscribed pattern (repeated).
    pub(super) const PATTERN: u8 = 31;
    /// One subscribed shard channel (repeated).
    pub(super) const SHARD_CHANNEL: u8 = 32;
    /// How long the client has been connected, in milliseconds (u64), so `client.max_age` keeps
    /// counting.
    pub(super) const AGE_MS: u8 = 40;
    /// How long the client has been idle, in milliseconds (u64), so `client.idle_timeout` keeps
    /// counting.
    pub(super) const IDLE_MS: u8 = 41;
    /// What the client sent that the old process did not run, to be parsed first by the new one.
    pub(super) const INPUT: u8 = 50;
    /// Last in every record, so that a record cut at a field boundary is not read as a
    /// shorter one.
    pub(super) const END: u8 = 255;
}

/// Tracking flags in [`tag::TRACKING`]'s byte.
const BCAST: u8 = 1;
/// `OPTIN`.
const OPTIN: u8 = 2;
/// `OPTOUT`.
const OPTOUT: u8 = 4;
/// `NOLOOP`.
const NOLOOP: u8 = 8;

// === impl HandedOver ===

impl HandedOver {
    /// The record in wire form, as `version` (one both processes read) lays it out.
    pub(crate) fn encode(&self, version: u16) -> Vec<u8> {
        let mut w = RecordWriter(BytesMut::with_capacity(128 + self.input.len()));
        w.0.put_slice(MAGIC);
        w.0.put_u16(version);
        w.field(tag::ID, &self.id.to_be_bytes());
        w.field(tag::PEER, self.peer.as_bytes());
        w.field(tag::LISTENER, self.listener.as_bytes());
        if let Some(login) = &self.login {
            w.field(tag::USER, login.user.as_bytes());
            if let Some(credential) = &login.credential {
                w.field(tag::CREDENTIAL, credential);
            }
        }
        w.field(tag::PROTOCOL, &[self.protocol]);
        w.optional(tag::NAME, self.name.as_deref());
        w.optional(tag::LIB_NAME, self.lib_name.as_deref());
        w.optional(tag::LIB_VER, self.lib_ver.as_deref());
        w.field(tag::DB, &self.db.to_be_bytes());
        w.field(tag::FAILED_LOGINS, &self.failed_logins.to_be_bytes());
        if let Some(f) = &self.facade {
            w.field(tag::FACADE_HOST, f.host.as_bytes());
            w.field(tag::FACADE_IP, f.ip.as_bytes());
            w.optional(
                tag::FACADE_HOSTNAME,
                f.hostname.as_deref().map(str::as_bytes),
            );
            w.field(tag::FACADE_PORT, &f.port.to_be_bytes());
            w.field(tag::FACADE_TLS, &[u8::from(f.tls)]);
            w.field(tag::FACADE_ID, f.id.as_bytes());
        }
        if let Some(t) = &self.tracking {
            let flags = flag(t.bcast, BCAST)
                | flag(t.optin, OPTIN)
                | flag(t.optout, OPTOUT)
                | flag(t.noloop, NOLOOP);
            w.field(tag::TRACKING, &[flags]);
            w.field(tag::TRACKING_REDIRECT, &t.redirect.to_be_bytes());
            w.each(tag::TRACKING_PREFIX, &t.prefixes);
        }
        w.each(tag::CHANNEL, &self.subscriptions.channels);
        w.each(tag::PATTERN, &self.subscriptions.patterns);
        w.each(tag::SHARD_CHANNEL, &self.subscriptions.shard_channels);
        w.field(tag::AGE_MS, &millis(self.age).to_be_bytes());
        w.field(tag::IDLE_MS, &millis(self.idle).to_be_bytes());
        w.field(tag::INPUT, &self.input);
        w.field(tag::END, &[]);
        w.0.to_vec()
    }

    /// Reads a record of any version from [`OLDEST`] to [`CURRENT`].
    pub(crate) fn decode(bytes: &[u8]) -> Result<HandedOver, DecodeError> {
        let rest = bytes.strip_prefix(MAGIC).ok_or(DecodeError::Magic)?;
        let (version, mut rest) = split::<2>(rest)?;
        let version = u16::from_be_bytes(version);
        if !(OLDEST..=CURRENT).contains(&version) {
            return Err(DecodeError::Version(version));
        }
        let mut record = HandedOver::default();
        let mut seen = Seen::default();
        while !rest.is_empty() {
            let ([tag], after) = split::<1>(rest)?;
            let (len, after) = split::<4>(after)?;
            let len =
                usize::try_from(u32::from_be_bytes(len)).map_err(|_| DecodeError::Truncated)?;
            if after.len() < len {
                return Err(DecodeError::Truncated);
            }
            let (value, after) = after.split_at(len);
            if tag == tag::END {
                seen.end = after.is_empty();
                break;
            }
            record.read_field(tag, value, &mut seen)?;
            rest = after;
        }
        seen.check()?;
        Ok(record)
    }

    /// One field into the record; unknown tags are skipped (a later release's additions).
    fn read_field(&mut self, tag: u8, value: &[u8], seen: &mut Seen) -> Result<(), DecodeError> {
        let text = || String::from_utf8(value.to_vec()).map_err(|_| DecodeError::Field(tag));
        let bytes = || Bytes::copy_from_slice(value);
        match tag {
            tag::ID => {
                self.id = u64::from_be_bytes(exact(tag, value)?);
                seen.id = true;
            }
            tag::PEER => self.peer = text()?,
            tag::LISTENER => {
                self.listener = text()?;
                seen.listener = true;
            }
            tag::USER => self.login.get_or_insert_with(Login::default).user = text()?,
            tag::CREDENTIAL => {
                self.login.get_or_insert_with(Login::default).credential = Some(exact(tag, value)?);
            }
            tag::PROTOCOL => {
                let [p] = exact(tag, value)?;
                if !(p == 2 || p == 3) {
                    return Err(DecodeError::Field(tag));
                }
                self.protocol = p;
                seen.protocol = true;
            }
            tag::NAME => self.name = Some(bytes()),
            tag::LIB_NAME => self.lib_name = Some(bytes()),
            tag::LIB_VER => self.lib_ver = Some(bytes()),
            tag::DB => self.db = u32::from_be_bytes(exact(tag, value)?),
            tag::FAILED_LOGINS => self.failed_logins = u16::from_be_bytes(exact(tag, value)?),
            tag::FACADE_HOST..=tag::FACADE_ID => self.read_facade(tag, value)?,
            tag::TRACKING..=tag::TRACKING_PREFIX => self.read_tracking(tag, value)?,
            tag::CHANNEL => self.subscriptions.channels.push(bytes()),
            tag::PATTERN => self.subscriptions.patterns.push(bytes()),
            tag::SHARD_CHANNEL => self.subscriptions.shard_channels.push(bytes()),
            tag::AGE_MS => self.age = Duration::from_millis(u64::from_be_bytes(exact(tag, value)?)),
            tag::IDLE_MS => {
                self.idle = Duration::from_millis(u64::from_be_bytes(exact(tag, value)?))
            }
            tag::INPUT => self.input = bytes(),
            _ => {}
        }
        Ok(())
    }

    /// The facade fields; the first one seen creates the facade record. An unknown tag in the
    /// facade range is its id.
    fn read_facade(&mut self, tag: u8, value: &[u8]) -> Result<(), DecodeError> {
        let text = || String::from_utf8(value.to_vec()).map_err(|_| DecodeError::Field(tag));
        let facade = self.facade.get_or_insert_with(FacadeRecord::default);
        match tag {
            tag::FACADE_HOST => facade.host = text()?,
            tag::FACADE_IP => facade.ip = text()?,
            tag::FACADE_HOSTNAME => facade.hostname = Some(text()?),
            tag::FACADE_PORT => facade.port = u16::from_be_bytes(exact(tag, value)?),
            tag::FACADE_TLS => facade.tls = exact::<1>(tag, value)? != [0],
            _ => facade.id = text()?,
        }
        Ok(())
    }

    /// The tracking fields; the first one seen turns tracking on for the client.
    fn read_tracking(&mut self, tag: u8, value: &[u8]) -> Result<(), DecodeError> {
        let tracking = self.tracking.get_or_insert_with(TrackingRecord::default);
        match tag {
            tag::TRACKING => {
                let [flags] = exact(tag, value)?;
                tracking.bcast = flags & BCAST != 0;
                tracking.optin = flags & OPTIN != 0;
                tracking.optout = flags & OPTOUT != 0;
                tracking.noloop = flags & NOLOOP != 0;
            }
            tag::TRACKING_REDIRECT => tracking.redirect = u64::from_be_bytes(exact(tag, value)?),
            _ => tracking.prefixes.push(Bytes::copy_from_slice(value)),
        }
        Ok(())
    }
}

/// The fields every record must have.
#[derive(Default)]
struct Seen {
    /// [`tag::ID`] was read.
    id: bool,
    /// [`tag::LISTENER`] was read.
    listener: bool,
    /// [`tag::PROTOCOL`] was read.
    protocol: bool,
    /// The end marker was read: the record is whole.
    end: bool,
}

impl Seen {
    /// A record without its end marker is `Truncated` whatever else it has; then the required
    /// fields are checked in a fixed order.
    fn check(&self) -> Result<(), DecodeError> {
        if !self.end {
            return Err(DecodeError::Truncated);
        }
        match (self.id, self.listener, self.protocol) {
            (false, _, _) => Err(DecodeError::Missing("id")),
            (_, false, _) => Err(DecodeError::Missing("listener")),
            (_, _, false) => Err(DecodeError::Missing("protocol")),
            _ => Ok(()),
        }
    }
}

/// Builds a record: fields are appended as `tag | length | value`.
struct RecordWriter(BytesMut);

impl RecordWriter {
    /// One field; a value over 4 GiB would have its length clamped, which cannot happen for a
    /// client's state.
    fn field(&mut self, tag: u8, value: &[u8]) {
        self.0.put_u8(tag);
        // A client's unparsed input is bounded by `client.max_request_bytes`, far below 4 GiB.
        self.0
            .put_u32(u32::try_from(value.len()).unwrap_or(u32::MAX));
        self.0.put_slice(value);
    }

    /// A field written only when there is a value: absence is the encoding of `None`.
    fn optional(&mut self, tag: u8, value: Option<&[u8]>) {
        if let Some(value) = value {
            self.field(tag, value);
        }
    }

    /// One field per value, in order: how lists are encoded.
    fn each(&mut self, tag: u8, values: &[Bytes]) {
        for value in values {
            self.field(tag, value);
        }
    }
}

/// `bit` when `on`, else 0: one tracking mode bit.
fn flag(on: bool, bit: u8) -> u8 {
    if on {
        bit
    } else {
        0
    }
}

/// Milliseconds, clamped to `u64`.
fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// The first `N` bytes as an array, and the rest.
fn split<const N: usize>(bytes: &[u8]) -> Result<([u8; N], &[u8]), DecodeError> {
    if bytes.len() < N {
        return Err(DecodeError::Truncated);
    }
    let (head, rest) = bytes.split_at(N);
    let head = <[u8; N]>::try_from(head).map_err(|_| DecodeError::Truncated)?;
    Ok((head, rest))
}

/// A fixed-size field's value.
fn exact<const N: usize>(tag: u8, value: &[u8]) -> Result<[u8; N], DecodeError> {
    <[u8; N]>::try_from(value).map_err(|_| DecodeError::Field(tag))
}
