//! Why the ACL refused a command, and Redis 7.0's words for it.

use bytes::Bytes;

use crate::commands::CommandSpec;

/// Why a command was refused, in Redis's order of precedence (its `ACL_DENIED_*` codes).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Denied {
    /// The command itself is not allowed.
    Command,
    /// A key it touches is outside the user's key patterns.
    Key,
    /// A channel it names is outside the user's channel patterns.
    Channel,
}

impl Denied {
    /// Redis 7.0's reply (word for word: clients and tests match on it).
    pub(crate) fn reply(self, spec: &CommandSpec) -> Bytes {
        match self {
            Denied::Command => Bytes::from(format!(
                "-NOPERM this user has no permissions to run the '{}' command\r\n",
                spec.name
            )),
            Denied::Key => Bytes::from_static(
                b"-NOPERM this user has no permissions to access one of the keys used as arguments\r\n",
            ),
            Denied::Channel => Bytes::from_static(
                b"-NOPERM this user has no permissions to access one of the channels used as arguments\r\n",
            ),
        }
    }
}
