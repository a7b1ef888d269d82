//! Reading the cluster: the topology from the first reachable seed, then every node's INFO,
//! CONFIG, CLUSTER INFO/SLOTS, SLOWLOG and LATENCY, all nodes at once.

use tokio::task::JoinSet;

use super::client::{ClientError, ConnectOptions, NodeClient};
use super::model::{ClusterNode, ClusterSnapshot, NodeData};
use super::parse;

/// The configuration parameters the checks read, fetched one `CONFIG GET` each: Redis < 7
/// accepts only one parameter per call.
const CONFIG_PARAMS: &[&str] = &[
    "appendonly",
    "appendfsync",
    "save",
    "maxmemory",
    "maxmemory-policy",
    "timeout",
    "tcp-keepalive",
    "maxclients",
    "latency-monitor-threshold",
];

/// No seed could describe the cluster; one line per seed says why.
#[derive(Debug, thiserror::Error)]
#[error("no seed is reachable as a cluster node:\n{}", .0.join("\n"))]
pub(crate) struct NoSeed(pub(crate) Vec<String>);

/// Asks each seed in turn for `CLUSTER NODES`; the first answer is the topology.
pub(crate) async fn discover(
    seeds: &[String],
    options: &ConnectOptions,
) -> Result<(String, Vec<ClusterNode>), NoSeed> {
    let mut failures = Vec::new();
    for seed in seeds {
        match cluster_nodes(seed, options).await {
            Ok(mut nodes) if !nodes.is_empty() => {
                // CLUSTER NODES lists nodes in no useful order; reports read better sorted.
                nodes.sort_by(|a, b| a.addr.cmp(&b.addr));
                return Ok((seed.clone(), nodes));
            }
            Ok(_) => failures.push(format!("  {seed}: CLUSTER NODES listed no node")),
            Err(error) => failures.push(format!("  {seed}: {error}")),
        }
    }
    Err(NoSeed(failures))
}

async fn cluster_nodes(
    seed: &str,
    options: &ConnectOptions,
) -> Result<Vec<ClusterNode>, ClientError> {
    let mut client = NodeClient::connect(seed, options).await?;
    let text = client.call_text(&["CLUSTER", "NODES"]).await?;
    let host = seed.rsplit_once(':').map_or(seed, |(host, _)| host);
    Ok(parse::parse_cluster_nodes(&text, host))
}

/// Reads every node of `topology` concurrently; nodes that fail are listed as unreachable.
pub(crate) async fn gather(
    seed: String,
    topology: Vec<ClusterNode>,
    options: &ConnectOptions,
) -> ClusterSnapshot {
    let mut tasks = JoinSet::new();
    for (index, node) in topology.iter().enumerate() {
        let (addr, options) = (node.addr.clone(), options.clone());
        tasks.spawn(async move { (index, read_node(&addr, &options).await) });
    }
    let mut results = Vec::with_capacity(topology.len());
    while let Some(joined) = tasks.join_next().await {
        // A panicking task would be a bug in the parsers; its node is simply left out.
        if let Ok(result) = joined {
            results.push(result);
        }
    }
    // Report nodes in the order CLUSTER NODES listed them, not in completion order.
    results.sort_by_key(|(index, _)| *index);
    let mut snapshot = ClusterSnapshot {
        seed,
        ..ClusterSnapshot::default()
    };
    for (index, result) in results {
        match result {
            Ok(data) => snapshot.nodes.push(data),
            Err(error) => snapshot
                .unreachable
                .push((topology[index].addr.clone(), error.to_string())),
        }
    }
    snapshot.topology = topology;
    snapshot
}

/// Everything the checks need from one node. Only a broken connection fails the node; an error
/// reply to one command (e.g. `CONFIG` renamed away) is recorded and the rest still runs.
async fn read_node(addr: &str, options: &ConnectOptions) -> Result<NodeData, ClientError> {
    let mut client = NodeClient::connect(addr, options).await?;
    let mut node = NodeData {
        addr: addr.to_string(),
        ..NodeData::default()
    };
    if let Some(text) = soft(&mut node, "INFO", client.call_text(&["INFO", "all"]).await)? {
        node.info = parse::parse_info(&text);
    }
    for param in CONFIG_PARAMS {
        let reply = soft(
            &mut node,
            "CONFIG GET",
            client.call(&["CONFIG", "GET", param]).await,
        )?;
        if let Some(value) = reply.as_ref().and_then(parse::parse_config_value) {
            node.config.insert((*param).to_string(), value);
        }
    }
    if let Some(text) = soft(
        &mut node,
        "CLUSTER INFO",
        client.call_text(&["CLUSTER", "INFO"]).await,
    )? {
        node.cluster_info = parse::parse_info(&text);
    }
    if let Some(reply) = soft(
        &mut node,
        "CLUSTER SLOTS",
        client.call(&["CLUSTER", "SLOTS"]).await,
    )? {
        node.slots = parse::parse_cluster_slots(&reply, addr);
    }
    if let Some(reply) = soft(
        &mut node,
        "SLOWLOG GET",
        client.call(&["SLOWLOG", "GET", "10"]).await,
    )? {
        node.slowlog = parse::parse_slowlog(&reply);
    }
    if let Some(reply) = soft(
        &mut node,
        "LATENCY LATEST",
        client.call(&["LATENCY", "LATEST"]).await,
    )? {
        node.latency = parse::parse_latency(&reply);
    }
    Ok(node)
}

/// Keeps an error reply as a note on the node; passes connection failures up.
fn soft<T>(
    node: &mut NodeData,
    command: &str,
    result: Result<T, ClientError>,
) -> Result<Option<T>, ClientError> {
    match result {
        Ok(value) => Ok(Some(value)),
        Err(ClientError::Reply(message)) => {
            let note = format!("{command}: {message}");
            // CONFIG GET fails the same way for every parameter; say it once.
            if !node.errors.contains(&note) {
                node.errors.push(note);
            }
            Ok(None)
        }
        Err(error) => Err(error),
    }
}
