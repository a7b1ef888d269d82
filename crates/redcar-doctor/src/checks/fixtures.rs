//! Canned nodes for the checks' unit tests: INFO text and CONFIG values as Redis prints them.

use crate::model::NodeData;
use crate::parse::parse_info;

/// A node at `addr` whose `INFO all` printed `info` and whose `CONFIG GET` gave `config`.
pub(crate) fn node(addr: &str, info: &str, config: &[(&str, &str)]) -> NodeData {
    NodeData {
        addr: addr.to_string(),
        info: parse_info(info),
        config: config
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        ..NodeData::default()
    }
}
