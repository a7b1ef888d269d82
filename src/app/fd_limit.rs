//! The process's file-descriptor limit: raised at start-up from the soft limit to the hard one
//! (every client and every node connection is a descriptor), and said in the log.

/// Descriptors kept for everything that is not a client: node connections, listeners, the
/// admin server, files.
const HEADROOM: u64 = 256;

/// What start-up found and did.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct FdLimit {
    /// The soft limit before and after raising it, and the hard limit.
    pub(crate) was: u64,
    /// The soft limit after raising: equal to `hard` unless the OS refused.
    pub(crate) now: u64,
    /// The ceiling only root (or systemd's `LimitNOFILE=`) can raise.
    pub(crate) hard: u64,
}

/// Raises the soft limit to the hard limit and logs the result; warns when
/// `client.max_connections` cannot fit in what is left.
/// `None` when the limit cannot be read or raised (logged): the proxy starts anyway, with whatever
/// limit it was given. Called once, first thing in `run`.
pub(super) fn raise(max_connections: usize) -> Option<FdLimit> {
    let limit = match read_and_raise() {
        Ok(limit) => limit,
        Err(error) => {
            tracing::warn!(%error, "cannot read or raise the file descriptor limit (RLIMIT_NOFILE)");
            return None;
        }
    };
    tracing::info!(
        soft = limit.now,
        was = limit.was,
        hard = limit.hard,
        "file descriptor limit"
    );
    if let Some(fits) = clients_that_fit(limit.now, max_connections) {
        tracing::warn!(
            max_connections,
            fits,
            limit = limit.now,
            "client.max_connections is above what the file descriptor limit leaves for clients; \
             clients past about {fits} will be refused by the kernel (raise the hard limit: \
             `ulimit -Hn`, LimitNOFILE= in systemd, or lower client.max_connections)"
        );
    }
    Some(limit)
}

/// Fails if `getrlimit` or `setrlimit` fails.
fn read_and_raise() -> std::io::Result<FdLimit> {
    let (was, hard) = rlimit::Resource::NOFILE.get()?;
    let now = rlimit::increase_nofile_limit(hard)?;
    Ok(FdLimit { was, now, hard })
}

/// How many clients fit when fewer than `max_connections` do.
/// `HEADROOM` descriptors are kept back for non-client use; `None` means all fit.
fn clients_that_fit(limit: u64, max_connections: usize) -> Option<u64> {
    let fits = limit.saturating_sub(HEADROOM);
    (u64::try_from(max_connections).unwrap_or(u64::MAX) > fits).then_some(fits)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn start_up_raises_the_soft_limit_to_the_hard_one() {
        let limit = raise(10).expect("RLIMIT_NOFILE is readable here");
        assert_eq!(limit.now, limit.hard, "{limit:?}");
        assert!(limit.now >= limit.was);
        let (soft, _) = rlimit::Resource::NOFILE.get().expect("read again");
        assert_eq!(soft, limit.now);
    }

    #[test]
    fn a_max_connections_the_limit_cannot_hold_is_reported_with_what_fits() {
        assert_eq!(clients_that_fit(20_000, 10_000), None);
        assert_eq!(clients_that_fit(1024, 10_000), Some(1024 - HEADROOM));
        assert_eq!(clients_that_fit(100, 1), Some(0));
    }
}
