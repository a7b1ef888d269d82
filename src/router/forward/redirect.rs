//! Recognising the node error replies the router acts on: MOVED, ASK and the transient ones.

/// What a reply asks the router to do.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Verdict<'a> {
    /// A normal reply (including ordinary errors): give it to the client.
    Done,
    /// `-MOVED <slot> <addr>`: the slot lives elsewhere for good; refresh the map.
    Moved(&'a str),
    /// `-ASK <slot> <addr>`: for this command only, ask `addr` (with `ASKING`).
    Ask(&'a str),
    /// `-TRYAGAIN`, `-CLUSTERDOWN`, `-LOADING`, `-MASTERDOWN`, `-NOREPLICAS`: the command did
    /// not run; it may run if retried a little later.
    Transient,
    /// `-READONLY`: the write reached a replica, so the map is stale (a Sentinel failover
    /// demoted the node it names as primary). The write did not run: refresh, then retry.
    ReadOnly,
}

/// Classifies a raw reply frame by its first bytes only (no parsing for ordinary replies).
/// Inlined: every reply asks, and only an error reply needs a closer look.
#[inline]
pub(crate) fn classify(reply: &[u8]) -> Verdict<'_> {
    if reply.first() != Some(&b'-') {
        return Verdict::Done;
    }
    classify_error(reply)
}

/// An error reply: a redirect, a transient refusal worth a retry, or a final error.
fn classify_error(reply: &[u8]) -> Verdict<'_> {
    let line = reply[1..].strip_suffix(b"\r\n").unwrap_or(&reply[1..]);
    if let Some(rest) = line.strip_prefix(b"MOVED ") {
        return target(rest).map_or(Verdict::Done, Verdict::Moved);
    }
    if let Some(rest) = line.strip_prefix(b"ASK ") {
        return target(rest).map_or(Verdict::Done, Verdict::Ask);
    }
    // NOREPLICAS (`min-replicas-to-write`): a primary that lost its replicas, which is also
    // what an old primary says at once when a failover took its replica away.
    const TRANSIENT: [&[u8]; 5] = [
        b"TRYAGAIN",
        b"CLUSTERDOWN",
        b"LOADING",
        b"MASTERDOWN",
        b"NOREPLICAS",
    ];
    if TRANSIENT.iter().any(|prefix| line.starts_with(prefix)) {
        return Verdict::Transient;
    }
    if line.starts_with(b"READONLY ") {
        return Verdict::ReadOnly;
    }
    Verdict::Done
}

/// `<slot> <host:port>` → the address. An empty host (`:7001`) keeps the port only; the caller
/// cannot know the host, so such a redirect is treated as not followable.
fn target(rest: &[u8]) -> Option<&str> {
    let text = std::str::from_utf8(rest).ok()?;
    let (_slot, addr) = text.split_once(' ')?;
    (!addr.starts_with(':') && addr.contains(':')).then_some(addr)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recognises_redirects_and_transient_errors() {
        assert_eq!(
            classify(b"-MOVED 3999 127.0.0.1:6381\r\n"),
            Verdict::Moved("127.0.0.1:6381")
        );
        assert_eq!(
            classify(b"-ASK 3999 127.0.0.1:6381\r\n"),
            Verdict::Ask("127.0.0.1:6381")
        );
        assert_eq!(
            classify(b"-TRYAGAIN Multiple keys request during rehashing of slot\r\n"),
            Verdict::Transient
        );
        assert_eq!(
            classify(b"-CLUSTERDOWN The cluster is down\r\n"),
            Verdict::Transient
        );
        assert_eq!(
            classify(b"-LOADING Redis is loading the dataset in memory\r\n"),
            Verdict::Transient
        );
        assert_eq!(
            classify(b"-NOREPLICAS Not enough good replicas to write.\r\n"),
            Verdict::Transient
        );
    }

    #[test]
    fn a_write_refused_by_a_replica_means_the_map_is_stale() {
        assert_eq!(
            classify(b"-READONLY You can't write against a read only replica.\r\n"),
            Verdict::ReadOnly
        );
        assert_eq!(classify(b"+READONLY\r\n"), Verdict::Done);
    }

    #[test]
    fn ordinary_replies_and_errors_are_done() {
        assert_eq!(classify(b"+OK\r\n"), Verdict::Done);
        assert_eq!(classify(b"$5\r\nMOVED\r\n"), Verdict::Done);
        assert_eq!(
            classify(b"-ERR wrong number of arguments\r\n"),
            Verdict::Done
        );
        assert_eq!(
            classify(b"-WRONGTYPE Operation against a key\r\n"),
            Verdict::Done
        );
        assert_eq!(classify(b"-MOVED garbage\r\n"), Verdict::Done);
    }
}
