//! Commands redcar answers itself, because they concern the client's own connection (PING, ECHO,
//! SELECT, HELLO, CLIENT SETNAME/GETNAME/ID, QUIT) rather than data on a node.

use bytes::{Bytes, BytesMut};

use super::client_state::ClientState;
use super::local_args::{hello_options, hello_version, select, set_info, Field, HelloOptions};
use crate::commands::Local;
use crate::protocol::{
    write_array_len, write_bulk, write_error, write_integer, write_map_len, write_null_in,
    write_simple, Args, Protocol,
};
use crate::router::redcar_error;

impl ClientState {
    /// `AUTH [user] password`.
    fn auth(&mut self, args: Args<'_>) -> Bytes {
        let (user, password) = match (args.len(), args.get(1), args.get(2)) {
            (2, Some(password), _) => (None, password),
            (3, Some(user), Some(password)) => (Some(user), password),
            _ => return Bytes::from_static(b"-ERR syntax error\r\n"),
        };
        match self.users.login(user, password) {
            Ok(user) => match self.log_in(user) {
                Ok(()) => Bytes::from_static(b"+OK\r\n"),
                Err(refusal) => refusal,
            },
            Err(refusal) => self.failed(refusal),
        }
    }

    /// Counts a refused login and passes its refusal on.
    fn failed(&mut self, refusal: Bytes) -> Bytes {
        self.failed_logins = self.failed_logins.saturating_add(1);
        self.failed_now = true;
        refusal
    }

    /// After each command: `Some(failures so far)` when it was a refused login (once), and
    /// whether they reached `auth.max_failures`, so the connection must close.
    pub(crate) fn take_failed_login(&mut self) -> Option<(u16, bool)> {
        if !std::mem::take(&mut self.failed_now) {
            return None;
        }
        let limit = self.users.max_failures();
        Some((
            self.failed_logins,
            limit > 0 && u32::from(self.failed_logins) >= limit,
        ))
    }

    /// The reply to a locally served command (`args[0]` is the command name).
    pub(crate) fn answer(&mut self, local: Local, args: Args<'_>) -> Bytes {
        let mut out = BytesMut::with_capacity(64);
        match local {
            Local::Auth => return self.auth(args),
            Local::Ping => match args.get(1) {
                Some(message) => write_bulk(&mut out, message),
                None => write_simple(&mut out, b"PONG"),
            },
            Local::Echo => write_bulk(&mut out, args.get(1).map_or(&b""[..], |a| a)),
            Local::Quit => {
                self.quit = true;
                write_simple(&mut out, b"OK");
            }
            Local::Select => return select(args),
            Local::Hello => return self.hello(args),
            Local::ClientSetName => return self.set_name(args.get(2)),
            Local::ClientSetInfo => return set_info(args),
            Local::ClientGetName => match &self.name {
                Some(name) => write_bulk(&mut out, name),
                None => write_null_in(&mut out, self.protocol),
            },
            Local::ClientId => write_integer(&mut out, self.id as i64),
            Local::Reset => {
                self.name = None;
                write_simple(&mut out, b"RESET");
            }
            other => return redcar_error(format_args!("{other:?} cannot be answered locally")),
        }
        out.freeze()
    }

    /// `HELLO [protover [AUTH u p] [SETNAME n]]`, in Redis 7's order: the version is checked,
    /// then the options, then the login, then the name; the connection switches to the
    /// version only when all of that succeeded. Describes redcar as a standalone Redis (or a
    /// cluster node, on a cluster-facade listener).
    fn hello(&mut self, args: Args<'_>) -> Bytes {
        let mut out = BytesMut::with_capacity(256);
        let protocol = match args.get(1) {
            Some(version) => match hello_version(version, &mut out) {
                Some(asked) => asked,
                None => return out.freeze(),
            },
            None => self.protocol,
        };
        let Some(HelloOptions { login, name }) = hello_options(args, &mut out) else {
            return out.freeze();
        };
        if let Some((user, password)) = login {
            match self.users.login(Some(user), password) {
                Ok(user) => {
                    if let Err(refusal) = self.log_in(user) {
                        return refusal;
                    }
                }
                Err(refusal) => return self.failed(refusal),
            }
        }
        if self.user.is_none() {
            write_error(
                &mut out,
                b"NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time",
            );
            return out.freeze();
        }
        if name.is_some() {
            let reply = self.set_name(name);
            if reply.first() == Some(&b'-') {
                return reply;
            }
        }
        self.protocol = protocol;
        self.write_hello_map(&mut out, protocol);
        out.freeze()
    }

    /// HELLO's reply: the server's description as a map, in the version just agreed on.
    fn write_hello_map(&self, out: &mut BytesMut, protocol: Protocol) {
        let fields: [(&[u8], Field); 8] = [
            (b"server", Field::Text(b"redis")),
            (b"version", Field::Text(b"7.0.0")),
            (b"proto", Field::Int(protocol.number())),
            (b"id", Field::Int(self.id as i64)),
            (
                b"mode",
                Field::Text(if self.cluster_mode {
                    b"cluster"
                } else {
                    b"standalone"
                }),
            ),
            (b"role", Field::Text(b"master")),
            (b"modules", Field::EmptyArray),
            (
                b"proxy",
                Field::Text(concat!("redcar ", env!("CARGO_PKG_VERSION")).as_bytes()),
            ),
        ];
        write_map_len(out, fields.len(), protocol);
        for (key, value) in fields {
            write_bulk(out, key);
            match value {
                Field::Text(text) => write_bulk(out, text),
                Field::Int(n) => write_integer(out, n),
                Field::EmptyArray => write_array_len(out, 0),
            }
        }
    }

    fn set_name(&mut self, name: Option<&[u8]>) -> Bytes {
        let mut out = BytesMut::with_capacity(96);
        let Some(name) = name else {
            write_error(
                &mut out,
                b"ERR wrong number of arguments for 'client|setname' command",
            );
            return out.freeze();
        };
        // Redis's rule: names are printable ASCII without spaces (they appear in CLIENT LIST).
        if name.iter().any(|&b| !(b'!'..=b'~').contains(&b)) {
            write_error(
                &mut out,
                b"ERR Client names cannot contain spaces, newlines or special characters.",
            );
            return out.freeze();
        }
        self.name = (!name.is_empty()).then(|| Bytes::copy_from_slice(name));
        write_simple(&mut out, b"OK");
        out.freeze()
    }
}

#[cfg(test)]
#[path = "local_tests.rs"]
mod tests;
