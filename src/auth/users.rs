//! Every configured identity, resolved (secrets read and hashed, rules read) at start-up and at
//! each reload, and logging in against them.
//!
//! A `Users` is immutable once built: a reload builds a new one from the new config and swaps it
//! in, then retires the old one, and sessions notice through the downstream's generation number
//! (and subscribers through [`Users::retired`]) and re-check their login against the new set.
//! Passwords are never held in clear: secrets are read from files or environment variables at
//! resolve time and kept as SHA-256 digests. What holds for a login: the replies are Redis's own
//! (`WRONGPASS` for an unknown user and a wrong password alike, so a client cannot probe for
//! names), and without any configured identity every client is the unrestricted `default` user, as
//! with a redis-server without `requirepass`.

use std::collections::HashMap;
use std::sync::Arc;

use bytes::Bytes;
use tokio::sync::watch;

use super::acl;
use super::config::{AuthConfig, UserConfig};
use super::legacy::Lists;
use super::limits::{Limits, Rate};
use super::metrics::TenantMetrics;
use super::tenant::{Tenants, Waiting};
use super::user::{Rules, User, UserCredentials};
use super::WRONGPASS;

/// Every configured identity.
pub(crate) struct Users {
    /// `requirepass`, or a user named `default`.
    default: Option<Arc<User>>,
    /// Every other configured user, by name (names are case-sensitive, as in Redis).
    named: HashMap<String, Arc<User>>,
    /// What clients are before they authenticate; `None` when authentication is required.
    anonymous: Option<Arc<User>>,
    /// `auth.max_failures` (0: no limit).
    max_failures: u32,
    /// `auth.max_unauthenticated_per_address` (0: no limit).
    max_waiting: u32,
    /// The users' running state, carried from one reload to the next.
    tenants: Arc<Tenants>,
    /// Set when a reload replaced these users: subscribers then look at their rights again.
    retired: watch::Sender<bool>,
}

impl std::fmt::Debug for Users {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Users")
            .field("default", &self.default)
            .field("named", &self.named)
            .finish_non_exhaustive()
    }
}

impl Users {
    /// No authentication: everyone is the unrestricted default user.
    #[cfg(test)]
    pub(crate) fn open() -> Users {
        Users::open_in(Tenants::new(Arc::default()))
    }

    /// The set with no authentication, sharing `tenants` with the running proxy.
    fn open_in(tenants: Arc<Tenants>) -> Users {
        let rules = Rules::Lists(Lists::default());
        let anyone = UserCredentials {
            enabled: true,
            nopass: true,
            passwords: Vec::new(),
        };
        Users {
            default: None,
            named: HashMap::new(),
            anonymous: Some(Arc::new(User::new("default", anyone, rules))),
            max_failures: 0,
            max_waiting: 0,
            tenants,
            retired: watch::Sender::new(false),
        }
    }

    /// Resolves the config on its own (validation: nothing runs with these users).
    pub(crate) fn from_config(config: &AuthConfig) -> Result<Users, String> {
        Users::from_config_in(config, &Tenants::new(Arc::default()))
    }

    /// Resolves the config (reads files and environment variables) for the running proxy:
    /// `tenants` is the process's, so a user kept by a reload keeps its connections, buckets and
    /// figures. Errors name the key.
    ///
    /// Fails on the first problem, naming the key (`auth.users[2].password`): a user defined twice,
    /// `default` defined both ways, a user with rules given both as `acl` and as lists, an
    /// unreadable secret, a user that is on but has no password and is not `nopass`.
    pub(crate) fn from_config_in(
        config: &AuthConfig,
        tenants: &Arc<Tenants>,
    ) -> Result<Users, String> {
        if config.requirepass.is_none() && config.users.is_empty() {
            return Ok(Users::open_in(tenants.clone()));
        }
        let mut users = Users {
            default: None,
            named: HashMap::new(),
            anonymous: None,
            max_failures: config.max_failures,
            max_waiting: config.max_unauthenticated_per_address,
            tenants: tenants.clone(),
            retired: watch::Sender::new(false),
        };
        if let Some(secret) = &config.requirepass {
            let credentials = UserCredentials {
                enabled: true,
                nopass: false,
                passwords: vec![secret.resolve("auth.requirepass")?],
            };
            let mut user = User::new("default", credentials, Rules::Lists(Lists::default()));
            user.tenant = Some(tenants.tenant("default"));
            users.default = Some(Arc::new(user));
        }
        for (i, user) in config.users.iter().enumerate() {
            let key = format!("auth.users[{i}]");
            let mut resolved = resolve_user(&key, user)?;
            resolved.tenant = Some(tenants.tenant(&user.name));
            let resolved = Arc::new(resolved);
            if user.name == "default" {
                if users.default.is_some() {
                    return Err(format!(
                        "`{key}` defines the user `default` and `auth.requirepass` is set too: \
                         use one of them"
                    ));
                }
                users.default = Some(resolved);
            } else if users.named.insert(user.name.clone(), resolved).is_some() {
                return Err(format!("`{key}`: user `{}` is defined twice", user.name));
            }
        }
        Ok(users)
    }

    /// A reload replaced these users (they are no longer in effect).
    ///
    /// Called by the reload once the new set is in place; wakes every [`Users::retired`] future.
    pub(crate) fn retire(&self) {
        self.retired.send_replace(true);
    }

    /// Resolves once a reload replaced these users.
    ///
    /// `'static`, so a subscribed session can hold it across awaits without borrowing the set.
    pub(crate) fn retired(&self) -> impl std::future::Future<Output = ()> + Send + 'static {
        let mut retired = self.retired.subscribe();
        async move {
            let _ = retired.wait_for(|&r| r).await;
        }
    }

    /// `auth.max_failures`: failed logins after which a connection is closed (0: never).
    pub(crate) fn max_failures(&self) -> u32 {
        self.max_failures
    }

    /// The users' running state (a reload's users take it over).
    pub(crate) fn tenants(&self) -> &Arc<Tenants> {
        &self.tenants
    }

    /// The per-user figures (the hub's group in the running proxy).
    pub(crate) fn metrics(&self) -> &Arc<TenantMetrics> {
        &self.tenants.metrics
    }

    /// The identity of a client that has not authenticated: `None` when it must.
    pub(crate) fn anonymous(&self) -> Option<Arc<User>> {
        self.anonymous.clone()
    }

    /// A new connection from `peer`: while authentication is required it counts against
    /// `auth.max_unauthenticated_per_address` until it logs in. `Err`: the reply to send before
    /// closing it.
    pub(crate) fn connect(&self, peer: &str) -> Result<Option<Waiting>, Bytes> {
        if self.anonymous.is_some() {
            return Ok(None);
        }
        self.tenants.wait(peer, self.max_waiting).map_err(|()| {
            Bytes::from(format!(
                "-ERR redcar: too many unauthenticated connections from this address \
                 (auth.max_unauthenticated_per_address: {}); authenticate the open ones first\r\n",
                self.max_waiting
            ))
        })
    }

    /// `user` as this (reloaded) set defines it: the same name with the same passwords, else
    /// `None` (removed, disabled, or its passwords changed). The open default user only matches
    /// the open default user, so turning `requirepass` on logs out clients that never
    /// authenticated.
    pub(crate) fn renewed(&self, user: &User) -> Option<Arc<User>> {
        let candidate = if user.name == "default" {
            self.default.as_ref().or(self.anonymous.as_ref())
        } else {
            self.named.get(&user.name)
        };
        candidate
            .filter(|found| found.same_credentials(user))
            .cloned()
    }

    /// A login carried over by an upgrade: the user `name` as this set defines it, if it still
    /// accepts the password whose digest is `credential` (as [`Users::renewed`]).
    pub(crate) fn adopted(&self, name: &str, credential: Option<[u8; 32]>) -> Option<Arc<User>> {
        let candidate = if name == "default" {
            self.default.as_ref().or(self.anonymous.as_ref())
        } else {
            self.named.get(name)
        };
        candidate
            .filter(|found| found.still_accepts(credential))
            .cloned()
    }

    /// `AUTH [user] password`: the user, or the reply refusing it.
    ///
    /// Every digest of the user is compared, whichever matches, so the time taken does not say
    /// which password was right. A disabled user (`off`) refuses every password. The caller
    /// counts failures against `auth.max_failures`.
    pub(crate) fn login(&self, user: Option<&[u8]>, password: &[u8]) -> Result<Arc<User>, Bytes> {
        if let Some(anonymous) = &self.anonymous {
            // Nothing configured: like redis-server without requirepass.
            return match user {
                None => Err(Bytes::from_static(
                    b"-ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?\r\n",
                )),
                Some(b"default") => Ok(anonymous.clone()),
                Some(_) => Err(Bytes::from_static(WRONGPASS)),
            };
        }
        let candidate = match user {
            None | Some(b"default") => self.default.as_ref(),
            Some(name) => std::str::from_utf8(name)
                .ok()
                .and_then(|name| self.named.get(name)),
        };
        match candidate {
            Some(found) if found.accepts(password) => Ok(found.clone()),
            _ => Err(Bytes::from_static(WRONGPASS)),
        }
    }
}

/// One `auth.users` entry: its rules (`acl`, or the older lists — not both), passwords and
/// limits.
///
/// `key` (`auth.users[N]`) names the entry in errors. `password` is added to whatever passwords the
/// `acl` rules gave, and turns `nopass` off, as a `>password` rule would.
fn resolve_user(key: &str, config: &UserConfig) -> Result<User, String> {
    if config.name.is_empty() || config.name.contains(|c: char| c.is_whitespace()) {
        return Err(format!("`{key}.name` `{}` is not a user name", config.name));
    }
    let named = format!("`{key}` (user `{}`)", config.name);
    let (mut credentials, rules) = match &config.acl {
        Some(acl) => {
            if config.read_only || !config.allow.is_empty() || !config.deny.is_empty() {
                return Err(format!(
                    "{named} has both `acl` and `read_only`/`allow`/`deny`: give its rules one \
                     way (in `acl`, `-@write`, `+@read` and so on say the same)"
                ));
            }
            let (acl, name) = acl::parse(&acl.0)
                .map_err(|e| format!("{named}: `acl` rule `{}`: {}", e.rule, e.reason))?;
            if name.as_ref().is_some_and(|n| *n != config.name) {
                return Err(format!(
                    "{named}: `acl` starts with `user {}`: the name must be the user's own",
                    name.unwrap_or_default()
                ));
            }
            let credentials = UserCredentials {
                enabled: acl.enabled,
                nopass: acl.nopass,
                passwords: acl.passwords.clone(),
            };
            (credentials, Rules::Acl(acl))
        }
        None => {
            let lists = Lists::new(key, config.read_only, &config.allow, &config.deny)?;
            let credentials = UserCredentials {
                enabled: true,
                ..UserCredentials::default()
            };
            (credentials, Rules::Lists(lists))
        }
    };
    if let Some(password) = &config.password {
        let digest = password.resolve(&format!("{key}.password"))?;
        credentials.nopass = false;
        if !credentials.passwords.contains(&digest) {
            credentials.passwords.push(digest);
        }
    }
    if credentials.enabled && !credentials.nopass && credentials.passwords.is_empty() {
        return Err(format!(
            "{named} has no password: give `password`, or `>password`, `#<sha256>` or `nopass` \
             in `acl`"
        ));
    }
    let mut user = User::new(&config.name, credentials, rules);
    user.filter_keys = config.filter_keys;
    user.limits = limits(&named, config)?;
    Ok(user)
}

/// `limits`, checked.
///
/// A `burst` without a rate is refused: it would be a bucket that never refills.
fn limits(named: &str, config: &UserConfig) -> Result<Limits, String> {
    let l = &config.limits;
    for (field, rate) in [("per_user", &l.per_user), ("per_client", &l.per_client)] {
        if rate.burst > 0 && rate.commands_per_second == 0 {
            return Err(format!(
                "{named}: `limits.{field}.burst` needs `limits.{field}.commands_per_second`"
            ));
        }
    }
    Ok(Limits {
        max_connections: l.max_connections,
        per_user: Rate::new(&l.per_user),
        per_client: Rate::new(&l.per_client),
        when_over: l.when_over,
    })
}
