//! Reading what a sentinel says: the primary's address, its config epoch, the usable replicas,
//! and `+switch-master` messages. Pure functions over parsed frames.

use crate::protocol::Frame;

/// One sentinel's view of the monitored primary.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct View {
    /// `HOST:PORT` of the primary.
    pub(crate) primary: String,
    /// Replicas Sentinel considers healthy and in sync, sorted (so views compare equal).
    pub(crate) replicas: Vec<String>,
    /// The primary's config epoch (`SENTINEL MASTER`'s `config-epoch`): bumped by every
    /// failover, so a sentinel that missed one is recognisable.
    pub(crate) epoch: u64,
}

/// Replica flags that mean "do not send reads here".
/// A replica with any of them is left out of the view, so no read is sent to it.
const UNUSABLE_FLAGS: [&str; 3] = ["s_down", "o_down", "disconnected"];

/// Builds a [`View`] from the replies to `SENTINEL GET-MASTER-ADDR-BY-NAME`, `SENTINEL MASTER`
/// and `SENTINEL REPLICAS` (in that order).
/// Fails on an error reply (e.g. `NOAUTH`), an unmonitored `master`, or a reply that does not have
/// the expected shape; the follower then asks the next sentinel.
pub(crate) fn view(
    master: &str,
    addr: &Frame,
    details: &Frame,
    replicas: &Frame,
) -> Result<View, String> {
    Ok(View {
        primary: master_addr(master, addr)?,
        epoch: config_epoch(details)?,
        replicas: usable_replicas(replicas)?,
    })
}

/// `GET-MASTER-ADDR-BY-NAME` → `HOST:PORT`; a null reply means the sentinel does not monitor
/// `master`.
fn master_addr(master: &str, reply: &Frame) -> Result<String, String> {
    error_text(reply)?;
    if matches!(reply, Frame::Null | Frame::NullArray) {
        return Err(format!("does not monitor a primary named `{master}`"));
    }
    let parts = reply
        .as_array()
        .ok_or("GET-MASTER-ADDR-BY-NAME reply is not an array")?;
    match parts {
        [host, port] => Ok(format!("{}:{}", text(host)?, text(port)?)),
        _ => Err("GET-MASTER-ADDR-BY-NAME reply is not [host, port]".to_string()),
    }
}

/// `SENTINEL MASTER` (a flat field/value array) → `config-epoch`.
fn config_epoch(reply: &Frame) -> Result<u64, String> {
    error_text(reply)?;
    let fields = reply
        .as_array()
        .ok_or("SENTINEL MASTER reply is not an array")?;
    let epoch = field(fields, "config-epoch")?.ok_or("SENTINEL MASTER has no config-epoch")?;
    epoch
        .parse()
        .map_err(|_| format!("SENTINEL MASTER config-epoch `{epoch}` is not a number"))
}

/// `SENTINEL REPLICAS` → the addresses of replicas that are neither down nor disconnected and
/// whose link to the primary is up (`master-link-status: ok`), sorted.
fn usable_replicas(reply: &Frame) -> Result<Vec<String>, String> {
    error_text(reply)?;
    let entries = reply
        .as_array()
        .ok_or("SENTINEL REPLICAS reply is not an array")?;
    let mut usable = Vec::new();
    for entry in entries {
        let fields = entry
            .as_array()
            .ok_or("SENTINEL REPLICAS entry is not an array")?;
        let flags = field(fields, "flags")?.unwrap_or_default();
        let unusable = flags.split(',').any(|f| UNUSABLE_FLAGS.contains(&f));
        let linked = field(fields, "master-link-status")?.as_deref() == Some("ok");
        if unusable || !linked {
            continue;
        }
        let (Some(ip), Some(port)) = (field(fields, "ip")?, field(fields, "port")?) else {
            return Err("SENTINEL REPLICAS entry without ip or port".to_string());
        };
        usable.push(format!("{ip}:{port}"));
    }
    usable.sort();
    usable.dedup();
    Ok(usable)
}

/// A `+switch-master` message's payload (`<name> <old ip> <old port> <new ip> <new port>`) →
/// the new primary's address, when it is about `master`.
pub(crate) fn switched(master: &str, message: &Frame) -> Option<String> {
    let parts = message.as_array()?;
    let [kind, _channel, payload] = parts else {
        return None;
    };
    if kind.as_bytes()?.as_ref() != b"message" {
        return None;
    }
    let payload = std::str::from_utf8(payload.as_bytes()?).ok()?;
    let words: Vec<&str> = payload.split_whitespace().collect();
    match words.as_slice() {
        [name, _, _, ip, port] if *name == master => Some(format!("{ip}:{port}")),
        _ => None,
    }
}

/// The value after `name` in a flat field/value array.
fn field(fields: &[Frame], name: &str) -> Result<Option<String>, String> {
    for pair in fields.chunks(2) {
        if let [key, value] = pair {
            if key.as_bytes().map(|k| k.as_ref()) == Some(name.as_bytes()) {
                return text(value).map(Some);
            }
        }
    }
    Ok(None)
}

/// Sentinel replies with bulk strings for addresses, numbers and flags; anything else, or bytes
/// that are not UTF-8, fails the whole view rather than guessing.
fn text(frame: &Frame) -> Result<String, String> {
    let bytes = frame.as_bytes().ok_or("expected a string in the reply")?;
    std::str::from_utf8(bytes)
        .map(str::to_string)
        .map_err(|_| "reply is not UTF-8".to_string())
}

/// An error reply becomes the error (e.g. `NOAUTH Authentication required.`).
/// Checked first on every reply, so an auth or ACL problem is reported as such.
fn error_text(reply: &Frame) -> Result<(), String> {
    match reply {
        Frame::Error(e) => Err(String::from_utf8_lossy(e).into_owned()),
        _ => Ok(()),
    }
}

#[cfg(test)]
#[path = "reply_tests.rs"]
mod tests;
