//! Learning commands the built-in table does not know (module commands, newer servers) from a
//! cluster node's `COMMAND` reply once the cluster is reachable, after the ones the configuration
//! declares (`custom_commands`).

use std::sync::Arc;

use bytes::Bytes;
use rand::seq::IndexedRandom;

use super::Planner;
use crate::commands::{CommandTable, CustomCommand, InfoValue};
use crate::protocol::{Frame, Limits};
use crate::upstream::Lane;

const COMMAND: &[u8] = b"*1\r\n$7\r\nCOMMAND\r\n";

impl Planner<'_> {
    /// Makes the commands declared in the configuration routable. Called once at start-up, before
    /// [`Planner::learn_commands`]; `custom` has been validated (no clash with a builtin name).
    pub(crate) fn declare_commands(self, custom: &[CustomCommand]) {
        if custom.is_empty() {
            return;
        }
        let mut table = self.command_table();
        for command in custom {
            // Leaked once per declared command at start-up: a fixed, small cost.
            table.declare(Box::leak(Box::new(command.spec())));
        }
        self.commands.learned.store(Some(Arc::new(table)));
    }

    /// The current table: builtin plus whatever was declared or learned so far.
    fn command_table(self) -> CommandTable {
        self.commands
            .learned
            .load()
            .as_deref()
            .cloned()
            .unwrap_or_else(CommandTable::builtin)
    }

    /// Asks one primary, picked at random (a fleet of sidecars started together must not all
    /// ask, and hold a connection to, the same node), for `COMMAND` and keeps the commands the
    /// built-in table lacks. Returns how many were learned; errors are logged by the caller and
    /// leave the built-in table alone.
    pub(crate) async fn learn_commands(self) -> Result<usize, String> {
        let topology = self.core.cluster.topology().ok_or("no slot map yet")?;
        let shard = topology
            .shards()
            .choose(&mut rand::rng())
            .ok_or("no shard known")?;
        let call = shard
            .primary
            .call(Bytes::from_static(COMMAND), false, Lane::default());
        let reply = tokio::time::timeout(self.core.op_timeout() * 5, call)
            .await
            .map_err(|_| "COMMAND timed out".to_string())?
            .map_err(|e| e.to_string())?;
        let limits = Limits {
            max_depth: 16,
            ..Limits::default()
        };
        let frame = Frame::from_bytes(reply, &limits).map_err(|e| e.to_string())?;
        if let Frame::Error(message) = &frame {
            return Err(String::from_utf8_lossy(message).into_owned());
        }
        // Declared commands stay, and win: learning skips names the table already has.
        let mut table = self.command_table();
        let learned = table.learn(&info_value(frame));
        if learned > 0 {
            self.commands.learned.store(Some(Arc::new(table)));
        }
        Ok(learned)
    }
}

/// The protocol frame in the shape the command table reads.
fn info_value(frame: Frame) -> InfoValue {
    match frame {
        Frame::Integer(n) => InfoValue::Int(n),
        Frame::Simple(s) | Frame::Bulk(s) | Frame::Error(s) => InfoValue::Str(s),
        Frame::Array(items) => InfoValue::Array(items.into_iter().map(info_value).collect()),
        Frame::Null | Frame::NullArray => InfoValue::Nil,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_convert_to_info_values() {
        let frame = Frame::Array(vec![
            Frame::Bulk(Bytes::from_static(b"get")),
            Frame::Integer(2),
            Frame::Null,
            Frame::Array(vec![Frame::Simple(Bytes::from_static(b"readonly"))]),
        ]);
        let value = info_value(frame);
        assert_eq!(
            value,
            InfoValue::Array(vec![
                InfoValue::Str(Bytes::from_static(b"get")),
                InfoValue::Int(2),
                InfoValue::Nil,
                InfoValue::Array(vec![InfoValue::Str(Bytes::from_static(b"readonly"))]),
            ])
        );
    }
}
