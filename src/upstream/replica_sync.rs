//! Whether a replica may serve reads, from its `INFO replication` (sent in the handshake of every
//! connection that may read replicas): one that has not been in sync with its primary since it
//! started — restarted empty and waiting for its full sync, or restarted with an old dataset —
//! answers reads with what it has (`replica-serve-stale-data yes`), nil for keys that exist.

/// How [`not_in_sync`]'s answer starts.
pub(super) const NOT_IN_SYNC: &str = "replica not in sync with its primary";

/// Why the node that sent `reply` (to `INFO replication`) must not serve reads yet, or `None`
/// when it may: a primary; a replica whose link to its primary is up; a replica that lost its
/// link after having been in sync (stale since then, and Redis serves it: redcar does too, see
/// docs/resilience.md); or a reply that says neither (an error such as `-NOPERM`: not known, so
/// the node is not refused for it).
pub(super) fn not_in_sync(reply: &[u8]) -> Option<String> {
    if reply.first() == Some(&b'-') {
        return None;
    }
    let mut role = None;
    let mut link = None;
    let mut syncing = false;
    let mut down_since = None;
    // RESP2 sends a bulk string, RESP3 a verbatim one (`=len`, then `txt:`): either way the
    // fields are `key:value` lines, and the frame's header line has no such key.
    for line in reply.split(|&b| b == b'\n') {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let Some(colon) = line.iter().position(|&b| b == b':') else {
            continue;
        };
        let (key, value) = (&line[..colon], &line[colon + 1..]);
        match key {
            b"role" => role = Some(value),
            b"master_link_status" => link = Some(value),
            b"master_sync_in_progress" => syncing = value == b"1",
            b"master_link_down_since_seconds" => down_since = Some(value),
            _ => {}
        }
    }
    if role != Some(&b"slave"[..]) || link != Some(&b"down"[..]) {
        return None;
    }
    let why = if syncing {
        "a sync from its primary is in progress"
    } else if down_since == Some(&b"-1"[..]) {
        // Redis says -1 until the first sync since the process started has completed.
        "it has not completed a sync from its primary since it started"
    } else {
        return None;
    };
    Some(format!(
        "{NOT_IN_SYNC} (master_link_status:down, {why}): no reads from it until it is"
    ))
}

#[cfg(test)]
mod tests {
    use super::not_in_sync;

    /// An `INFO replication` reply as RESP2 sends it, with the given fields.
    fn info(fields: &[&str]) -> Vec<u8> {
        let body = format!("# Replication\r\n{}\r\n", fields.join("\r\n"));
        format!("${}\r\n{body}\r\n", body.len()).into_bytes()
    }

    #[test]
    fn a_primary_and_a_connected_replica_serve_reads() {
        assert_eq!(
            not_in_sync(&info(&["role:master", "connected_slaves:1"])),
            None
        );
        let connected = info(&[
            "role:slave",
            "master_host:127.0.0.1",
            "master_link_status:up",
            "master_sync_in_progress:0",
        ]);
        assert_eq!(not_in_sync(&connected), None);
    }

    #[test]
    fn a_replica_restarted_and_not_yet_synced_does_not() {
        // Just started, its primary not yet reached (or waiting for the RDB: the same fields).
        let started = info(&[
            "role:slave",
            "master_link_status:down",
            "master_last_io_seconds_ago:-1",
            "master_sync_in_progress:0",
            "master_link_down_since_seconds:-1",
        ]);
        let why = not_in_sync(&started).expect("refused");
        assert!(why.contains("since it started"), "{why}");
        // Receiving the RDB.
        let transfer = info(&[
            "role:slave",
            "master_link_status:down",
            "master_sync_in_progress:1",
            "master_sync_total_bytes:1000",
            "master_link_down_since_seconds:-1",
        ]);
        let why = not_in_sync(&transfer).expect("refused");
        assert!(why.contains("in progress"), "{why}");
    }

    #[test]
    fn a_replica_that_lost_its_primary_after_syncing_keeps_serving() {
        let lost = info(&[
            "role:slave",
            "master_link_status:down",
            "master_sync_in_progress:0",
            "master_link_down_since_seconds:2",
        ]);
        assert_eq!(not_in_sync(&lost), None);
        // ... unless it is resyncing (the new primary sends a full copy).
        let resync = info(&[
            "role:slave",
            "master_link_status:down",
            "master_sync_in_progress:1",
            "master_link_down_since_seconds:2",
        ]);
        assert!(not_in_sync(&resync).is_some());
    }

    #[test]
    fn resp3_verbatim_replies_errors_and_unknown_replies() {
        let body = "txt:# Replication\r\nrole:slave\r\nmaster_link_status:down\r\n\
                    master_sync_in_progress:0\r\nmaster_link_down_since_seconds:-1\r\n";
        let verbatim = format!("={}\r\n{body}\r\n", body.len());
        assert!(not_in_sync(verbatim.as_bytes()).is_some());
        assert_eq!(
            not_in_sync(b"-NOPERM this user has no permissions to run the 'info' command\r\n"),
            None,
            "not allowed to ask: not refused"
        );
        assert_eq!(not_in_sync(b"$0\r\n\r\n"), None);
        // Link down without the field that says since when: not known, not refused.
        assert_eq!(
            not_in_sync(&info(&["role:slave", "master_link_status:down"])),
            None
        );
    }
}
