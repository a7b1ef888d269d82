//! Tests for learning specs from COMMAND INFO replies, including every builtin via a real server.

use bytes::Bytes;

use super::*;
use crate::commands::keys::{key_indices, KeyScan};
use crate::commands::lookup::{CommandTable, MAX_LEARNED};
use crate::commands::spec::flags;
use crate::commands::test_server::{Reply, TestServer};
use crate::commands::COMMANDS;
use crate::protocol::Request;

fn s(text: &str) -> InfoValue {
    InfoValue::Str(Bytes::copy_from_slice(text.as_bytes()))
}

fn arr(items: Vec<InfoValue>) -> InfoValue {
    InfoValue::Array(items)
}

fn strs(items: &[&str]) -> InfoValue {
    arr(items.iter().map(|t| s(t)).collect())
}

/// A Redis 7 entry for a module command `name` with one key at index 1.
fn module_entry(name: &str, subs: Vec<InfoValue>) -> InfoValue {
    let spec = arr(vec![
        s("flags"),
        strs(&["RO", "some_future_flag"]),
        s("begin_search"),
        arr(vec![
            s("type"),
            s("index"),
            s("spec"),
            arr(vec![s("index"), InfoValue::Int(1)]),
        ]),
        s("find_keys"),
        arr(vec![
            s("type"),
            s("range"),
            s("spec"),
            arr(vec![
                s("lastkey"),
                InfoValue::Int(0),
                s("keystep"),
                InfoValue::Int(1),
                s("limit"),
                InfoValue::Int(0),
            ]),
        ]),
    ]);
    arr(vec![
        s(name),
        InfoValue::Int(-2),
        strs(&["readonly", "module", "brand_new"]),
        InfoValue::Int(1),
        InfoValue::Int(1),
        InfoValue::Int(1),
        strs(&["@read", "@fast"]),
        strs(&[]),
        arr(vec![spec]),
        arr(subs),
    ])
}

#[test]
fn learns_a_module_command_once() {
    let mut table = CommandTable::builtin();
    let reply = arr(vec![module_entry("MyMod.Get", vec![]), InfoValue::Nil]);
    assert_eq!(table.learn(&reply), 1);
    assert_eq!(table.learn(&reply), 0);
    let args = Request::from_args([Bytes::from_static(b"MYMOD.GET"), Bytes::from_static(b"k")]);
    let spec = table.lookup(args.args()).expect("learned");
    assert_eq!(spec.name, "mymod.get");
    assert_eq!(spec.flags, flags::READONLY | flags::MODULE);
    let mut out = Vec::new();
    assert_eq!(
        key_indices(spec, args.args(), &mut out),
        Ok(KeyScan::Complete)
    );
    assert_eq!(out, [1]);
    assert_eq!(table.len(), COMMANDS.len() + 1);
    assert_eq!(table.iter().last().map(|c| c.name), Some("mymod.get"));
}

#[test]
fn learns_subcommands_and_resolves_them() {
    let mut table = CommandTable::builtin();
    let sub = module_entry("mymod|sub", vec![]);
    assert_eq!(table.learn(&arr(vec![module_entry("mymod", vec![sub])])), 1);
    let args = Request::from_args([Bytes::from_static(b"mymod"), Bytes::from_static(b"SUB")]);
    assert_eq!(table.lookup(args.args()).map(|c| c.name), Some("mymod|sub"));
}

#[test]
fn skips_builtins_malformed_entries_and_non_arrays() {
    let mut table = CommandTable::builtin();
    assert_eq!(table.learn(&arr(vec![module_entry("get", vec![])])), 0);
    assert_eq!(
        table.learn(&arr(vec![
            arr(vec![s("broken")]),
            InfoValue::Int(3),
            s("x")
        ])),
        0
    );
    assert_eq!(table.learn(&s("not an array")), 0);
    assert_eq!(table.len(), COMMANDS.len());
}

#[test]
fn legacy_entries_get_a_range_spec() {
    let mut table = CommandTable::builtin();
    let entry = arr(vec![
        s("old.mset"),
        InfoValue::Int(-3),
        strs(&["write"]),
        InfoValue::Int(1),
        InfoValue::Int(-1),
        InfoValue::Int(2),
        strs(&[]),
    ]);
    assert_eq!(table.learn(&arr(vec![entry])), 1);
    let args = Request::from_args::<Vec<Bytes>, Bytes>(
        ["old.mset", "a", "1", "b", "2"]
            .iter()
            .map(|t| Bytes::from(*t))
            .collect(),
    );
    let spec = table.lookup(args.args()).expect("learned");
    let mut out = Vec::new();
    assert_eq!(
        key_indices(spec, args.args(), &mut out),
        Ok(KeyScan::Complete)
    );
    assert_eq!(out, [1, 3]);
}

#[test]
fn learning_is_bounded() {
    let mut table = CommandTable::builtin();
    let many: Vec<InfoValue> = (0..MAX_LEARNED + 5)
        .map(|i| module_entry(&format!("m.{i}"), vec![]))
        .collect();
    assert_eq!(table.learn(&arr(many)), MAX_LEARNED);
    assert_eq!(table.learn(&arr(vec![module_entry("m.extra", vec![])])), 0);
}

fn to_info(reply: Reply) -> InfoValue {
    match reply {
        Reply::Status(t) => InfoValue::Str(Bytes::from(t)),
        Reply::Error(t) => panic!("error reply {t}"),
        Reply::Int(n) => InfoValue::Int(n),
        Reply::Bulk(Some(b)) => InfoValue::Str(Bytes::from(b)),
        Reply::Bulk(None) | Reply::Array(None) => InfoValue::Nil,
        Reply::Array(Some(items)) => InfoValue::Array(items.into_iter().map(to_info).collect()),
    }
}

/// Parsing the server's own COMMAND reply must reproduce the generated table exactly.
#[test]
fn parsing_the_servers_command_reply_reproduces_the_builtin_table() {
    let Some(mut server) = TestServer::start() else {
        return;
    };
    let InfoValue::Array(entries) = to_info(server.call(&[b"COMMAND"])) else {
        panic!("COMMAND")
    };
    assert_eq!(entries.len(), COMMANDS.len());
    for entry in &entries {
        let parsed = into_static(parse_entry(entry).expect("parses"));
        let builtin = CommandTable::builtin()
            .by_name(parsed.name.as_bytes())
            .expect("builtin");
        assert_eq!(&parsed, builtin);
    }
}
