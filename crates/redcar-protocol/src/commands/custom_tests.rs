//! Tests for commands declared in the configuration: their key positions and start-up checks.

use bytes::Bytes;

use super::*;
use crate::commands::keys::routing_indices;
use crate::commands::policy::{serve, Serve};
use crate::commands::InfoValue;
use crate::protocol::Request;

fn command(name: &str, first_key: i32) -> CustomCommand {
    CustomCommand {
        name: name.to_string(),
        first_key,
        last_key: None,
        key_step: 1,
        write: true,
        arity: None,
    }
}

fn args(line: &str) -> Request {
    Request::from_args::<Vec<Bytes>, Bytes>({
        line.split(' ')
            .map(|t| Bytes::copy_from_slice(t.as_bytes()))
            .collect()
    })
}

fn keys(spec: &CommandSpec, line: &str) -> Vec<usize> {
    let mut out = Vec::new();
    routing_indices(spec, args(line).args(), &mut out).expect("arguments fit");
    out
}

#[test]
fn one_key_by_default_and_a_write() {
    let spec = command("MyMod.Set", 1).spec();
    assert_eq!(spec.name, "mymod.set");
    assert_eq!(spec.arity, -2);
    assert!(spec.has_flag(flags::WRITE) && !spec.has_flag(flags::READONLY));
    assert_eq!(serve(&spec), Serve::Keyed);
    assert_eq!(keys(&spec, "MYMOD.SET k v extra"), vec![1]);
}

#[test]
fn ranges_steps_and_reads() {
    let pairs = CustomCommand {
        last_key: Some(-1),
        key_step: 2,
        write: false,
        ..command("mymod.mset", 1)
    };
    let spec = pairs.spec();
    assert!(spec.has_flag(flags::READONLY) && !spec.has_flag(flags::WRITE));
    assert_eq!(keys(&spec, "MYMOD.MSET a 1 b 2 c 3"), vec![1, 3, 5]);
    let fixed = CustomCommand {
        last_key: Some(3),
        ..command("mymod.pair", 2)
    };
    let spec = fixed.spec();
    assert_eq!(spec.arity, -4);
    assert_eq!(keys(&spec, "MYMOD.PAIR opt k1 k2 tail"), vec![2, 3]);
    let exact = CustomCommand {
        arity: Some(3),
        ..command("mymod.get", 1)
    };
    assert_eq!(exact.spec().arity, 3);
}

#[test]
fn a_declared_command_is_found_and_not_replaced_by_learning() {
    let mut table = CommandTable::builtin();
    table.declare(Box::leak(Box::new(command("mymod.get", 1).spec())));
    let found = table.lookup(args("MYMOD.GET k").args()).expect("declared");
    assert_eq!(found.name, "mymod.get");
    // The cluster describing the same name differently does not override the declaration.
    let entry = InfoValue::Array(vec![InfoValue::Array(vec![
        InfoValue::Str(Bytes::from_static(b"mymod.get")),
        InfoValue::Int(-3),
        InfoValue::Array(vec![]),
        InfoValue::Int(2),
        InfoValue::Int(2),
        InfoValue::Int(1),
        InfoValue::Array(vec![]),
    ])]);
    assert_eq!(table.learn(&entry), 0);
    assert_eq!(table.by_name(b"mymod.get").map(|s| s.arity), Some(-2));
}

#[test]
fn start_up_checks_name_the_offending_key() {
    let error = |commands: &[CustomCommand]| validate(commands).expect_err("must be rejected");
    assert!(validate(&[command("mymod.get", 1), command("mymod.set", 1)]).is_ok());
    assert!(validate(&[]).is_ok());

    let e = error(&[command("", 1)]);
    assert!(e.contains("`custom_commands[0].name` is empty"), "{e}");
    let e = error(&[command("my cmd", 1)]);
    assert!(e.contains("`custom_commands[0].name`"), "{e}");
    let e = error(&[command("mymod.get", 1), command("get", 1)]);
    assert!(
        e.contains("`custom_commands[1].name` is `get`: GET is a built-in"),
        "{e}"
    );
    let e = error(&[command("client|list", 1)]);
    assert!(e.contains("`custom_commands[0].name`"), "{e}");
    let e = error(&[command("mymod.get", 1), command("MYMOD.GET", 1)]);
    assert!(
        e.contains(
            "`custom_commands[1].name` is `MYMOD.GET`, already declared by `custom_commands[0]`"
        ),
        "{e}"
    );
    let e = error(&[command("mymod.info", 0)]);
    assert!(e.contains("`custom_commands[0].first_key` is 0"), "{e}");
    let e = error(&[CustomCommand {
        last_key: Some(1),
        ..command("mymod.x", 2)
    }]);
    assert!(e.contains("`custom_commands[0].last_key` is 1"), "{e}");
    let e = error(&[CustomCommand {
        key_step: 0,
        ..command("mymod.x", 1)
    }]);
    assert!(e.contains("`custom_commands[0].key_step` is 0"), "{e}");
    for arity in [0, 1, -1] {
        let e = error(&[CustomCommand {
            arity: Some(arity),
            ..command("mymod.x", 1)
        }]);
        assert!(
            e.contains(&format!("`custom_commands[0].arity` is {arity}")),
            "{e}"
        );
    }
    assert!(validate(&[CustomCommand {
        arity: Some(-2),
        ..command("mymod.x", 1)
    }])
    .is_ok());
}
