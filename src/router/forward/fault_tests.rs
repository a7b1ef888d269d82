//! Which commands a fault rule picks, and what start-up refuses.

use std::time::Duration;

use super::{command_name, validate, FaultRule, Faults};
use crate::metrics::Metrics;

const GET: &[u8] = b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n";
const SET: &[u8] = b"*3\r\n$3\r\nset\r\n$1\r\nk\r\n$1\r\nv\r\n";

fn rule(yaml: &str) -> FaultRule {
    yaml_serde::from_str(yaml).expect("a rule")
}

#[test]
fn the_command_name_is_read_from_the_encoded_request() {
    assert_eq!(command_name(GET), b"GET");
    assert_eq!(command_name(SET), b"set");
    assert_eq!(command_name(b"*1\r\n$4\r\nPI"), b"");
    assert_eq!(command_name(b"garbage"), b"");
}

#[test]
fn no_rule_means_no_fault_state_at_all() {
    assert!(Faults::new(&[], &Metrics::default()).is_none());
}

#[test]
fn rules_match_by_command_any_case_and_by_node() {
    let metrics = Metrics::default();
    let rules = [
        rule("{commands: [get], percentage: 100, error: ERR injected fault}"),
        rule("{node: \"127.0.0.1:7001\", percentage: 100, delay: 5ms}"),
    ];
    let faults = Faults::new(&rules, &metrics).expect("rules");
    let picked = faults.pick(GET, "127.0.0.1:7000").expect("GET is picked");
    assert_eq!(
        picked.error.as_deref(),
        Some(&b"-ERR injected fault\r\n"[..])
    );
    assert!(
        faults.pick(SET, "127.0.0.1:7000").is_none(),
        "SET elsewhere"
    );
    let delayed = faults
        .pick(SET, "127.0.0.1:7001")
        .expect("any command on 7001");
    assert_eq!(delayed.delay, Duration::from_millis(5));
}

#[test]
fn percentage_zero_never_fires_and_fifty_sometimes_does() {
    let metrics = Metrics::default();
    let never = Faults::new(&[rule("{percentage: 0, delay: 1ms}")], &metrics).expect("rules");
    assert!((0..1000).all(|_| never.pick(GET, "a:1").is_none()));
    let half = Faults::new(&[rule("{percentage: 50, delay: 1ms}")], &metrics).expect("rules");
    let fired = (0..1000)
        .filter(|_| half.pick(GET, "a:1").is_some())
        .count();
    assert!((300..700).contains(&fired), "{fired} of 1000");
}

#[test]
fn bad_rules_are_refused_naming_the_key() {
    let cases = [
        (
            "{percentage: 150, delay: 1ms}",
            "router.faults[0].percentage",
        ),
        (
            "{percentage: -1, delay: 1ms}",
            "router.faults[0].percentage",
        ),
        (
            "{node: nowhere, percentage: 5, delay: 1ms}",
            "router.faults[0].node",
        ),
        (
            "{percentage: 5, error: \"ERR a\\r\\nb\"}",
            "router.faults[0].error",
        ),
        ("{percentage: 5, error: \"\"}", "router.faults[0].error"),
        ("{percentage: 5}", "neither `delay` nor `error`"),
        (
            "{commands: [\"\"], percentage: 5, delay: 1ms}",
            "router.faults[0].commands",
        ),
    ];
    for (yaml, expected) in cases {
        let error = validate(&[rule(yaml)]).expect_err(yaml);
        assert!(error.contains(expected), "{yaml}: {error}");
    }
    validate(&[rule(
        "{node: \"10.0.0.1:6379\", commands: [GET], percentage: 12.5, error: ERR x}",
    )])
    .expect("a valid rule");
}
