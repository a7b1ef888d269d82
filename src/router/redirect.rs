//! Recognising the node error replies the router acts on: MOVED, ASK and the transient ones.

/// What a reply asks the router to do.
#[derive(Debug, PartialEq, Eq)]
pub enum Verdict<'a> {
    /// A normal reply (including ordinary errors): give it to the client.
    Done,
    /// `-MOVED <slot> <addr>`: the slot lives elsewhere for good; refresh the map.
    Moved(&'a str),
    /// `-ASK <slot> <addr>`: for this command only, ask `addr` (with `ASKING`).
    Ask(&'a str),
    /// `-TRYAGAIN`, `-CLUSTERDOWN`, `-LOADING`, `-MASTERDOWN`: the command did not run; it may
    /// run if retried a little later.
    Transient,
}

/// Classifies a raw reply frame by its first bytes only (no parsing for ordinary replies).
pub fn classify(reply: &[u8]) -> Verdict<'_> {
    if reply.first() != Some(&b'-') {
        return Verdict::Done;
    }
    let line = reply[1..].strip_suffix(b"\r\n").unwrap_or(&reply[1..]);
    if let Some(rest) = line.strip_prefix(b"MOVED ") {
        return target(rest).map_or(Verdict::Done, Verdict::Moved);
    }
    if let Some(rest) = line.strip_prefix(b"ASK ") {
        return target(rest).map_or(Verdict::Done, Verdict::Ask);
    }
    const TRANSIENT: [&[u8]; 4] = [b"TRYAGAIN", b"CLUSTERDOWN", b"LOADING", b"MASTERDOWN"];
    if TRANSIENT.iter().any(|prefix| line.starts_with(prefix)) {
        return Verdict::Transient;
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
