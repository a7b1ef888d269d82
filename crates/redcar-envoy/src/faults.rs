//! Envoy's `faults` (`RedisFault`) → `router.faults`: same shape (share, commands, delay,
//! error); the error text is Envoy's own, so clients see the same reply.
//!
//! | `RedisFault` | `router.faults[]` |
//! | --- | --- |
//! | `fault_type: ERROR` (or 1) | `error: "Fault Injected: Error"` |
//! | `delay` (`0s` dropped) | `delay` |
//! | `fault_enabled.default_value` | `percentage` (0 to 100, a float when not whole) |
//! | `commands` | `commands` |
//!
//! A `runtime_key` is ignored with a note (redcar has no runtime layer); the default value counts.

use yaml_serde::{Mapping, Value};

use super::draft::Draft;
use super::source::{duration_text, require_number};
use super::ConvertError;

/// The error Envoy answers an `ERROR` fault with; redcar sends it as `-Fault Injected: Error`.
/// Kept word for word so clients (and their error handling) see no difference after the move.
const ENVOY_FAULT_ERROR: &str = "Fault Injected: Error";

/// Each `faults[]` entry becomes a `router.faults` rule, in order; `router.faults` is written only
/// if at least one rule remains. Fails on an unknown fault type or a malformed fraction.
pub(super) fn convert(proxy: &Value, draft: &mut Draft) -> Result<(), ConvertError> {
    let mut rules = Vec::new();
    for (i, fault) in proxy["faults"]
        .as_sequence()
        .into_iter()
        .flatten()
        .enumerate()
    {
        if let Some(rule) = convert_one(fault, &format!("faults[{i}]"), draft)? {
            rules.push(Value::Mapping(rule));
        }
    }
    if !rules.is_empty() {
        draft.set(&["router", "faults"], Value::Sequence(rules));
    }
    Ok(())
}

/// The type may be a name or the enum number (1 is `ERROR`, anything else `DELAY`). A `DELAY` rule
/// without a delay changes nothing, so it is dropped (`Ok(None)`) with a note.
fn convert_one(
    fault: &Value,
    key: &str,
    draft: &mut Draft,
) -> Result<Option<Mapping>, ConvertError> {
    let kind = match (fault["fault_type"].as_str(), fault["fault_type"].as_u64()) {
        (Some(name), _) => name.to_ascii_uppercase(),
        (None, Some(1)) => "ERROR".to_owned(),
        _ => "DELAY".to_owned(),
    };
    if !matches!(kind.as_str(), "DELAY" | "ERROR") {
        return Err(ConvertError(format!(
            "`{key}.fault_type` is `{kind}`: expected DELAY or ERROR"
        )));
    }
    draft.note_unknown(
        "router",
        fault,
        &["fault_type", "fault_enabled", "delay", "commands"],
        &format!("{key}."),
    );
    draft.note_unknown(
        "router",
        &fault["fault_enabled"],
        &["default_value", "runtime_key"],
        &format!("{key}.fault_enabled."),
    );
    let mut rule = Mapping::new();
    let commands: Vec<Value> = fault["commands"]
        .as_sequence()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(Value::from)
        .collect();
    if !commands.is_empty() {
        rule.insert("commands".into(), Value::Sequence(commands));
    }
    rule.insert(
        "percentage".into(),
        percentage(&fault["fault_enabled"], key)?,
    );
    if fault["fault_enabled"]["runtime_key"].is_string() {
        draft.note(
            "router",
            format!("{key}.fault_enabled.runtime_key: ignored; redcar has no runtime layer, the default_value is used"),
        );
    }
    if !fault["delay"].is_null() {
        let (delay, text) = duration_text(&fault["delay"], &format!("{key}.delay"))?;
        if !delay.is_zero() {
            rule.insert("delay".into(), text.into());
        }
    }
    if kind == "ERROR" {
        rule.insert("error".into(), ENVOY_FAULT_ERROR.into());
    } else if !rule.contains_key("delay") {
        draft.note(
            "router",
            format!("{key}: a DELAY fault without a delay does nothing; dropped"),
        );
        return Ok(None);
    }
    Ok(Some(rule))
}

/// `fault_enabled.default_value` {numerator, denominator} as a percentage (0–100).
/// A whole number when exact, else a float. A missing `default_value` is an error: Envoy
/// requires it too, and without it the rule's share would be a guess.
fn percentage(enabled: &Value, key: &str) -> Result<Value, ConvertError> {
    let fraction = &enabled["default_value"];
    if fraction.is_null() {
        return Err(ConvertError(format!(
            "`{key}.fault_enabled.default_value` is missing"
        )));
    }
    let numerator = match &fraction["numerator"] {
        Value::Null => 0,
        value => require_number(
            value,
            &format!("{key}.fault_enabled.default_value.numerator"),
        )?,
    };
    let denominator: u64 = match fraction["denominator"].as_str().unwrap_or("HUNDRED") {
        "HUNDRED" => 100,
        "TEN_THOUSAND" => 10_000,
        "MILLION" => 1_000_000,
        other => {
            return Err(ConvertError(format!(
                "`{key}.fault_enabled.default_value.denominator` is `{other}`: expected \
                 HUNDRED, TEN_THOUSAND or MILLION"
            )))
        }
    };
    // Envoy treats a numerator above the denominator as 100%.
    let share = numerator.min(denominator) as f64 * 100.0 / denominator as f64;
    if share.fract() == 0.0 {
        return Ok(Value::from(share as u64));
    }
    Ok(Value::from(share))
}
