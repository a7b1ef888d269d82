//! The cluster facade's replies, in the shapes Redis 7.0 gives them in each RESP version, for a
//! one-node cluster that owns every slot. Cluster clients parse these strictly, so the field
//! sets match a real node's.

use bytes::{Bytes, BytesMut};

use crate::protocol::{
    write_array_len, write_bulk, write_integer, write_map_len, write_verbatim, Protocol,
};

/// What one client connection is told about "the" cluster node: itself.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Endpoint {
    /// Where clients should connect: the announced host, or the local IP the client reached.
    pub(crate) host: String,
    /// An IP for CLUSTER SHARDS' `ip` field (the local one when `host` is a name).
    pub(crate) ip: String,
    /// Set when `host` is a name rather than an IP (CLUSTER SHARDS' `hostname`).
    pub(crate) hostname: Option<String>,
    pub(crate) port: u16,
    pub(crate) tls: bool,
    /// 40 hex digits, a SHA-1 of `host:port`: the same across restarts and connections.
    pub(crate) id: String,
}

/// The last slot: the facade owns `0..=LAST_SLOT`.
const LAST_SLOT: i64 = 16383;

/// `CLUSTER SLOTS`: one range, `[0, 16383, [host, port, id, {}]]`. The fourth element of the
/// node entry is Redis 7's networking metadata (a map); left empty (the host is the preferred
/// endpoint).
pub(crate) fn slots(node: &Endpoint, protocol: Protocol) -> Bytes {
    let mut out = BytesMut::with_capacity(128);
    write_array_len(&mut out, 1);
    write_array_len(&mut out, 3);
    write_integer(&mut out, 0);
    write_integer(&mut out, LAST_SLOT);
    write_array_len(&mut out, 4);
    write_bulk(&mut out, node.host.as_bytes());
    write_integer(&mut out, i64::from(node.port));
    write_bulk(&mut out, node.id.as_bytes());
    write_map_len(&mut out, 0, protocol);
    out.freeze()
}

/// `CLUSTER SHARDS`: one shard with `slots` `[0, 16383]` and one primary. A TLS listener's port
/// is given as `tls-port`, a plain one's as `port`, as a node with only that port would.
pub(crate) fn shards(node: &Endpoint, protocol: Protocol) -> Bytes {
    let mut out = BytesMut::with_capacity(320);
    write_array_len(&mut out, 1);
    write_map_len(&mut out, 2, protocol);
    write_bulk(&mut out, b"slots");
    write_array_len(&mut out, 2);
    write_integer(&mut out, 0);
    write_integer(&mut out, LAST_SLOT);
    write_bulk(&mut out, b"nodes");
    write_array_len(&mut out, 1);
    let pairs = 7 + usize::from(node.hostname.is_some());
    write_map_len(&mut out, pairs, protocol);
    write_bulk(&mut out, b"id");
    write_bulk(&mut out, node.id.as_bytes());
    write_bulk(&mut out, if node.tls { b"tls-port" } else { b"port" });
    write_integer(&mut out, i64::from(node.port));
    write_bulk(&mut out, b"ip");
    write_bulk(&mut out, node.ip.as_bytes());
    write_bulk(&mut out, b"endpoint");
    write_bulk(&mut out, node.host.as_bytes());
    if let Some(hostname) = &node.hostname {
        write_bulk(&mut out, b"hostname");
        write_bulk(&mut out, hostname.as_bytes());
    }
    write_bulk(&mut out, b"role");
    write_bulk(&mut out, b"master");
    write_bulk(&mut out, b"replication-offset");
    write_integer(&mut out, 0);
    write_bulk(&mut out, b"health");
    write_bulk(&mut out, b"online");
    out.freeze()
}

/// `CLUSTER NODES`: one line, `id host:port@cport myself,master - 0 0 1 connected 0-16383`.
/// The bus port is the usual port + 10000 (0 when that does not fit); nobody can use it.
pub(crate) fn nodes(node: &Endpoint, protocol: Protocol) -> Bytes {
    let bus = node.port.checked_add(10000).unwrap_or(0);
    let line = format!(
        "{} {}:{}@{bus} myself,master - 0 0 1 connected 0-{LAST_SLOT}\n",
        node.id, node.host, node.port
    );
    text(line.as_bytes(), protocol)
}

/// `CLUSTER INFO`, Redis 7.0's fields. `ready`: redcar has a complete slot map; before that the
/// facade says `cluster_state:fail` with every slot failing, so clients wait as they would for
/// a real cluster that is not up yet.
pub(crate) fn info(ready: bool, protocol: Protocol) -> Bytes {
    let (state, ok, fail) = match ready {
        true => ("ok", LAST_SLOT + 1, 0),
        false => ("fail", 0, LAST_SLOT + 1),
    };
    let fields = format!(
        "cluster_state:{state}\r\n\
         cluster_slots_assigned:{}\r\n\
         cluster_slots_ok:{ok}\r\n\
         cluster_slots_pfail:0\r\n\
         cluster_slots_fail:{fail}\r\n\
         cluster_known_nodes:1\r\n\
         cluster_size:1\r\n\
         cluster_current_epoch:1\r\n\
         cluster_my_epoch:1\r\n\
         cluster_stats_messages_sent:0\r\n\
         cluster_stats_messages_received:0\r\n\
         total_cluster_links_buffer_limit_exceeded:0\r\n",
        LAST_SLOT + 1
    );
    text(fields.as_bytes(), protocol)
}

/// `CLUSTER MYID`.
pub(crate) fn myid(node: &Endpoint) -> Bytes {
    bulk(node.id.as_bytes())
}

/// Text for people: verbatim in RESP3, as Redis sends CLUSTER NODES and CLUSTER INFO.
fn text(text: &[u8], protocol: Protocol) -> Bytes {
    let mut out = BytesMut::with_capacity(text.len() + 20);
    write_verbatim(&mut out, text, protocol);
    out.freeze()
}

fn bulk(text: &[u8]) -> Bytes {
    let mut out = BytesMut::with_capacity(text.len() + 16);
    write_bulk(&mut out, text);
    out.freeze()
}
