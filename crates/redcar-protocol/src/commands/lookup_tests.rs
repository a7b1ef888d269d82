//! Tests for lookup: case handling, subcommand resolution, table invariants, the real server.

use bytes::Bytes;

use super::*;
use crate::commands::test_server::{Reply, TestServer};
use crate::commands::COMMANDS;
use crate::protocol::Request;

/// What only the tests (here and in learn_tests.rs) read of the table.
impl CommandTable {
    /// Every top-level command: builtin ones sorted by name, then learned ones sorted by name.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &'static CommandSpec> {
        let mut learned: Vec<&'static CommandSpec> = self.learned.values().copied().collect();
        learned.sort_by_key(|spec| spec.name);
        COMMANDS.iter().chain(learned)
    }

    /// Number of top-level commands (what `COMMAND COUNT` reports).
    pub(crate) fn len(&self) -> usize {
        COMMANDS.len() + self.learned.len()
    }

    /// Never true: the builtin table is not empty. Present for API symmetry with `len`.
    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

fn args(line: &str) -> Request {
    Request::from_args::<Vec<Bytes>, Bytes>({
        line.split(' ')
            .map(|t| Bytes::copy_from_slice(t.as_bytes()))
            .collect()
    })
}

fn name_of(line: &str) -> Option<&'static str> {
    lookup(args(line).args()).map(|spec| spec.name)
}

#[test]
fn finds_commands_in_any_case() {
    assert_eq!(name_of("GET k"), Some("get"));
    assert_eq!(name_of("gEt k"), Some("get"));
    assert_eq!(
        name_of("georadiusbymember_RO k"),
        Some("georadiusbymember_ro")
    );
}

#[test]
fn resolves_subcommands_or_falls_back_to_the_container() {
    assert_eq!(name_of("CLIENT SETNAME x"), Some("client|setname"));
    assert_eq!(name_of("client setName x"), Some("client|setname"));
    assert_eq!(name_of("CLIENT NOSUCH"), Some("client"));
    assert_eq!(name_of("CLIENT"), Some("client"));
    assert_eq!(name_of("OBJECT ENCODING k"), Some("object|encoding"));
    // Plain commands ignore args[1] even when it looks like a subcommand name.
    assert_eq!(name_of("GET setname"), Some("get"));
}

#[test]
fn unknown_or_odd_names_are_none() {
    assert_eq!(name_of("NOSUCHCOMMAND"), None);
    assert_eq!(
        lookup(Request::from_args::<[&str; 0], &str>([]).args()),
        None
    );
    assert_eq!(lookup(Request::from_args([""]).args()), None);
    assert_eq!(lookup(Request::from_args([&b"g\xffet"[..]]).args()), None);
    let long = "x".repeat(MAX_NAME_LEN + 1);
    assert_eq!(name_of(&long), None);
    // A subcommand name that is too long resolves to the container.
    assert_eq!(name_of(&format!("CLIENT {long}")), Some("client"));
}

#[test]
fn table_is_sorted_unique_and_lowercase() {
    let sorted = |specs: &[CommandSpec]| specs.windows(2).all(|w| w[0].name < w[1].name);
    assert!(sorted(COMMANDS));
    for spec in COMMANDS {
        assert!(sorted(spec.subcommands), "{}", spec.name);
        for s in std::iter::once(spec).chain(spec.subcommands) {
            assert_eq!(s.name, s.name.to_ascii_lowercase());
            // `lookup` compares names byte by byte, case-insensitively: they must be ASCII.
            assert!(s.name.is_ascii(), "{}", s.name);
            assert!(
                s.name.split('|').all(|part| part.len() <= MAX_NAME_LEN),
                "{}",
                s.name
            );
        }
        for sub in spec.subcommands {
            assert_eq!(sub.container(), spec.name);
        }
    }
}

#[test]
fn every_builtin_is_found_by_its_own_name() {
    let table = CommandTable::builtin();
    for spec in COMMANDS {
        let upper = spec.name.to_ascii_uppercase();
        assert_eq!(name_of(&upper), Some(spec.name));
        for sub in spec.subcommands {
            let line = sub.name.replace('|', " ");
            assert_eq!(
                table.lookup(args(&line).args()).map(|s| s.name),
                Some(sub.name)
            );
            assert_eq!(
                table
                    .by_name(sub.name.to_ascii_uppercase().as_bytes())
                    .map(|s| s.name),
                Some(sub.name)
            );
        }
    }
    assert_eq!(table.len(), COMMANDS.len());
    assert!(!table.is_empty());
    assert_eq!(table.iter().count(), COMMANDS.len());
    assert_eq!(table.by_name(b"client|nosuch"), None);
}

#[test]
fn table_matches_the_running_server() {
    let Some(mut server) = TestServer::start() else {
        return;
    };
    assert_eq!(
        server.call(&[b"COMMAND", b"COUNT"]),
        Reply::Int(COMMANDS.len() as i64)
    );
    let Reply::Array(Some(names)) = server.call(&[b"COMMAND", b"LIST"]) else {
        panic!("COMMAND LIST")
    };
    for name in names {
        let Reply::Bulk(Some(name)) = name else {
            panic!("name")
        };
        assert!(
            CommandTable::builtin().by_name(&name).is_some(),
            "{}",
            String::from_utf8_lossy(&name)
        );
    }
}

#[test]
fn the_builtin_index_finds_every_command_and_nothing_else() {
    for spec in super::COMMANDS {
        let found = super::find_builtin(spec.name).expect("builtin found");
        assert!(std::ptr::eq(found, spec), "{}", spec.name);
    }
    for absent in ["", "gett", "ge", "client|setname", "nosuchcommand"] {
        assert!(super::find_builtin(absent).is_none(), "{absent}");
    }
}

#[test]
fn lookup_matches_names_in_any_case_and_nothing_else() {
    let index = super::BuiltinIndex::get();
    for spec in super::COMMANDS {
        for name in [spec.name.to_string(), spec.name.to_ascii_uppercase()] {
            let found = index.find_any_case(name.as_bytes()).expect("found");
            assert!(std::ptr::eq(found, spec), "{name}");
        }
    }
    // Bytes that only lowercase to a name outside ASCII, or are not UTF-8, match nothing.
    for absent in [
        &b"G\xc3\x89T"[..],
        b"g\xffet",
        b"GE",
        b"GETT",
        b"\x07et",
        b"get ",
    ] {
        assert!(index.find_any_case(absent).is_none(), "{absent:?}");
    }
    // A name one byte off in the case bit that is not a letter ('@' is '`' & !0x20).
    assert!(index.find_any_case(b"GE@").is_none());
    assert_eq!(name_of(&"G".repeat(MAX_NAME_LEN + 1)), None);
}
