//! Who may use the proxy and what each user may do: `AUTH` / `HELLO … AUTH` against
//! `--requirepass` or users from the config, with Redis's replies (`-NOAUTH`, `-WRONGPASS`,
//! `-NOPERM`), checked before routing; each user's limits and figures.
//!
//! - `config`: `auth:` in the config file.
//! - `users`: every configured identity, and logging in; `user`: one identity and its check.
//! - `acl`: Redis ACL rules (`acl:`): commands, keys (read or write), channels, selectors.
//! - `legacy`: the older `read_only` / `allow` / `deny` rules.
//! - `limits`: token buckets for commands and bytes, per user and per client; `tenant`: each
//!   user's running state across reloads (connections, shared buckets) and unauthenticated
//!   connections per address; `client`: a connection's side of them (`Tenancy`).
//! - `metrics`: the per-user figures (`TenantMetrics`).
//!
//! With neither `requirepass` nor users configured, every client is the unrestricted default
//! user and nothing here runs per command.
#![warn(unreachable_pub, missing_docs)]

mod acl;
mod client;
mod config;
mod legacy;
mod limits;
mod metrics;
mod tenant;
mod user;
mod users;

pub(crate) use crate::values::secret::Secret;
pub(crate) use client::Tenancy;
pub use config::AuthConfig;
#[cfg(test)]
pub(crate) use config::{AclText, LimitsConfig, UserConfig};
pub(crate) use limits::Admit;
pub(crate) use metrics::TenantMetrics;
pub(crate) use tenant::Tenants;
pub(crate) use user::User;
pub(crate) use users::Users;

use crate::commands::spec::flags;
use crate::commands::CommandSpec;

pub(crate) const NOAUTH: &[u8] = b"-NOAUTH Authentication required.\r\n";
pub(crate) const WRONGPASS: &[u8] =
    b"-WRONGPASS invalid username-password pair or user is disabled.\r\n";

/// True for commands Redis serves before authentication (AUTH, HELLO, QUIT, ...).
pub(crate) fn allowed_before_auth(spec: &CommandSpec) -> bool {
    spec.has_flag(flags::NO_AUTH)
}

#[cfg(test)]
mod tests;
