//! redcar: a Redis Cluster sidecar proxy.
//!
//! # Layout
//! Dependencies point one way, top to bottom (tests/layering.rs checks it):
//! - [`protocol`]: RESP frames as zero-copy views over `Bytes`; streaming parse with limits; encode.
//! - [`commands`]: the one command table (arity, flags, key specs, how redcar serves it).
//!
//!   These two are the crate `redcar_protocol` (crates/redcar-protocol), re-exported here; Cargo
//!   keeps it below everything else.
//! - [`reactor`]: how other threads wake a worker's event loop and hand it mail (mio, no tokio).
//! - [`cluster`]: CRC16 slots, the immutable slot map, topology discovery and refresh.
//! - [`upstream`]: per-node shared, pipelined connections with FIFO reply matching.
//! - [`router`]: slot → node, MOVED/ASK, retries within the command deadline; key-prefix routes.
//! - [`backends`]: named backends (cluster, standalone, sentinel), each with its topology source,
//!   and the route table built over them.
//! - [`near_cache`]: chosen reads served from memory, kept correct by the nodes' invalidations.
//! - [`downstream`]: listeners and client sessions with in-order replies.
//! - [`metrics`]: the Prometheus registry (one group of series per producing module), the slow log
//!   and the event log.
//! - [`hotkeys`]: the hottest keys (sampled, Space-Saving over a sliding window) and the biggest
//!   requests and replies, in memory fixed at start-up.
//! - [`admin`]: HTTP health, readiness, metrics, topology, clients, slow log, config.
//! - [`auth`]: AUTH against `--requirepass` or configured users, and per-user command rules.
//! - [`values`]: durations, sizes, secrets and PEM loading, the value types every layer uses.
//! - [`workers`]: the threading model and the per-core worker layout.
//! - [`memory`]: freed memory given back to the system after a large value went through.
//! - [`sentinel`]: a Sentinel-managed primary published as a one-shard map.
//! - [`config`]: the typed configuration tree, CLI and YAML, validated at start-up; it only
//!   assembles the modules' own `*Config` types (only [`app`] and `main` import it).
//! - [`app`]: wiring and graceful shutdown.
//!
//! # Glossary
//! The few words of redcar's own that code names use:
//! - **slot map**: which shard owns each of the 16384 slots; an immutable snapshot
//!   ([`cluster`]'s `Topology`) the refresher swaps whole.
//! - **lane**: which of a node's connections carry one client's commands (`upstream::Lane`): the
//!   same ones every time, so the client's commands to a node keep their order.
//! - **owed reply**: a reply a client is owed, written in the order its commands came
//!   (`OwedReply` in `downstream/event_loop/replies.rs`, `OwedReplies` in `session/owed.rs`).
//! - **busy spell**: a session task's state while it has work, from a readable socket until
//!   nothing is owed or buffered (`Spell`, `downstream/session/busy.rs`); boxed, so idle is small.
//! - **safe point**: the end of a turn with nothing owed or buffered and no transaction, WATCH or
//!   tracking; where a client may move, age out or leave in an upgrade (`session/moving.rs`).
//! - **tally**: a thread's per-command counts and latencies, added to the shared series in
//!   batches (`metrics::CommandTally`, `metrics/tally.rs`).
//! - **room**: one of the router's parts, a small type for one concern over the shared core
//!   (`Forwarder`, `Planner`, `Fanout`, `Stateful`, ...; `router/mod.rs`).
//! - **near cache**: chosen reads answered from memory, kept correct by the nodes'
//!   invalidations ([`near_cache`]; `NearCacheRequest` on a session's path).
//! - **cluster facade**: a listener on which redcar calls itself a one-node cluster owning every
//!   slot, for clients that insist on cluster mode (`downstream/facade.rs`).
//! - **dedicated connection**: a node connection lent to one client for a blocking command or a
//!   WATCH (to its EXEC), shared with no one meanwhile (`router/stateful/dedicated.rs`).
//!
//! # A GET, from socket to socket
//! Per core, one worker thread's event loop serves it from start to end (docs/architecture.md,
//! docs/decisions/0001-one-loop-per-worker.md), in these files, in order (`protocol/` and
//! `commands/` are under crates/redcar-protocol/src, the rest under src/):
//! 1. `downstream/event_loop/mod.rs`: `poll` says the client's socket is readable.
//! 2. `downstream/event_loop/commands.rs`, `downstream/session/buffers.rs`,
//!    `protocol/parse.rs`: read into the client's buffer, the request parsed in place.
//! 3. `downstream/session/record.rs`: what the request is, decided once (`decide`):
//!    `router/plan/mod.rs`, `commands/lookup.rs`, `commands/keys.rs`, `cluster/slot.rs` give the
//!    command, its key and the key's slot; `downstream/client_state.rs` the auth gate and the user's
//!    rate.
//! 4. `router/forward/resolve.rs`: the slot's node from the map, by read policy.
//! 5. `upstream/loop_conn.rs`, `upstream/wire.rs`, `downstream/event_loop/replies.rs`: the
//!    request's bytes appended to the loop's connection to that node; the client owes a reply.
//! 6. `downstream/event_loop/conns.rs`, `upstream/loop_conn.rs`: at the end of the turn, one
//!    write per connection.
//! 7. `upstream/wire.rs`, `protocol/scan.rs`: the node's reply read and framed;
//!    `downstream/event_loop/arrivals.rs`: handed to its client in place.
//! 8. `downstream/session/record.rs`, `metrics/tally.rs`: recorded; appended to the client's
//!    output, which `downstream/event_loop/arrivals.rs` writes at the end of the turn.
//!
//! `bench/path_files.py` lists the files a GET's code runs in, from a callgrind dump of the
//! path: the functions called once per GET (not inlined) sit in the files named above; the
//! counts, and those that include inlined helpers, sampled work (hot keys) and per-turn chores,
//! are in docs/decisions/0001-one-loop-per-worker.md and bench/RESULTS.md.

pub mod admin;
pub mod app;
pub mod auth;
pub mod backends;
pub mod cluster;
pub mod config;
pub mod downstream;
pub mod hotkeys;
pub mod memory;
pub mod metrics;
pub mod near_cache;
pub mod reactor;
pub mod router;
pub mod sentinel;
pub mod upstream;
pub mod values;
pub mod workers;

// The RESP codec and the command table live in their own crate; re-exported so the proxy's
// modules name them `crate::protocol` and `crate::commands` like their own.
pub use redcar_protocol::{commands, protocol};
