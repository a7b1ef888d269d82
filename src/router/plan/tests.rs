//! Tests of the planner (plan/mod.rs): what each command's plan is.

use super::*;
use crate::protocol::Request;

fn args(line: &str) -> Request {
    Request::from_args::<Vec<Bytes>, Bytes>({
        line.split(' ')
            .map(|t| Bytes::copy_from_slice(t.as_bytes()))
            .collect()
    })
}

#[test]
fn finds_block_among_stream_read_options_only() {
    assert_eq!(
        block_option(args("XREAD BLOCK 0 STREAMS k 0").args()),
        Some(None)
    );
    assert_eq!(
        block_option(args("xread count 2 block 10 streams k 0").args()),
        Some(Some(Duration::from_millis(10)))
    );
    assert!(
        block_option(args("XREADGROUP GROUP g c COUNT 1 BLOCK 5 STREAMS k >").args()).is_some()
    );
    assert_eq!(
        block_option(args("XREAD COUNT 2 STREAMS block 0").args()),
        None
    );
    assert_eq!(
        block_option(args("XREADGROUP GROUP block block STREAMS k >").args()),
        None
    );
    assert_eq!(
        block_option(args("XREAD COUNT block STREAMS k 0").args()),
        None
    );
}

#[test]
fn reads_each_blocking_command_timeout() {
    let timeout = |line: &str| {
        let args = args(line);
        let name = String::from_utf8_lossy(&args.args()[0]).to_ascii_lowercase();
        blocking_timeout(&name, args.args())
    };
    assert_eq!(timeout("BLPOP a b 1.5"), Some(Duration::from_millis(1500)));
    assert_eq!(timeout("BRPOP a 0"), None);
    assert_eq!(timeout("BLMPOP 2 1 k LEFT"), Some(Duration::from_secs(2)));
    assert_eq!(timeout("BZMPOP 0 1 k MIN"), None);
    assert_eq!(
        timeout("BLMOVE a b LEFT RIGHT 3"),
        Some(Duration::from_secs(3))
    );
    assert_eq!(timeout("BLPOP a nonsense"), None);
}

#[test]
fn blocking_and_transaction_commands_get_their_own_plans() {
    let plan = |line: &str| {
        let args = args(line);
        let spec = commands::lookup(args.args()).expect("known");
        let mut keys = Vec::new();
        plan_command(
            spec,
            args.args(),
            &mut keys,
            || true,
            |spec| plan_node_admin(spec, &[]),
        )
    };
    let slot = key_slot(b"k");
    assert_eq!(
        plan("BLPOP k 2"),
        Plan::Blocking {
            slot,
            write: true,
            timeout: Some(Duration::from_secs(2))
        }
    );
    assert!(matches!(plan("BLPOP a b 0"), Plan::Reply(_)), "cross-slot");
    assert_eq!(plan("WATCH k {k}x"), Plan::Tx(Tx::Watch, Some(slot)));
    assert!(matches!(plan("WATCH a b"), Plan::Reply(_)), "cross-slot");
    assert_eq!(plan("MULTI"), Plan::Tx(Tx::Multi, None));
}

#[test]
fn a_split_planned_with_the_slots_hashed_so_far_equals_one_hashed_afresh() {
    for line in [
        "MGET a b",
        "MGET {a}1 {a}2 {a}3 b {a}4 c",
        "MSET {a}1 x {a}2 y b z {a}3 w",
        "DEL a {a}x b {b}y",
        "MSET a 1 b",
    ] {
        let args = args(line);
        let spec = commands::lookup(args.args()).expect("known");
        let mut keys = Vec::new();
        let planned = plan_keyed(spec, args.args(), &mut keys);
        let merge = policy::split_merge(spec).expect("splits");
        let afresh = match split::plan(spec, merge, args.args(), &keys, None) {
            Ok(split) => Plan::Compound(Compound(Job::Split(Box::new(split)))),
            Err(reply) => Plan::Reply(reply),
        };
        assert_eq!(planned, afresh, "{line}");
    }
    let get = args("GET a");
    let spec = commands::lookup(get.args()).expect("known");
    let mut keys = Vec::new();
    assert!(matches!(
        plan_keyed(spec, get.args(), &mut keys),
        Plan::Slot { write: false, .. }
    ));
    let rename = args("RENAME a b");
    let spec = commands::lookup(rename.args()).expect("known");
    assert!(
        matches!(plan_keyed(spec, rename.args(), &mut keys), Plan::Reply(_)),
        "CROSSSLOT"
    );
}

#[test]
fn scripts_are_writes_unless_read_only() {
    let plan = |line: &str| {
        let args = args(line);
        let spec = commands::lookup(args.args()).expect("known");
        let mut keys = Vec::new();
        let plan = plan_keyed(spec, args.args(), &mut keys);
        keyed_special(spec, args.args(), plan)
    };
    let slot = key_slot(b"k");
    assert_eq!(
        plan("EVAL s 1 k"),
        Plan::Compound(Compound(Job::Eval {
            slot: Some(slot),
            write: true
        }))
    );
    assert_eq!(
        plan("EVALSHA_RO s 0"),
        Plan::Compound(Compound(Job::EvalSha {
            slot: None,
            write: false
        }))
    );
    assert_eq!(plan("FCALL f 1 k"), Plan::Slot { slot, write: true });
    assert_eq!(plan("FCALL_RO f 1 k"), Plan::Slot { slot, write: false });
    assert_eq!(plan("XREAD STREAMS k 0"), Plan::Slot { slot, write: false });
    assert_eq!(
        plan("XREAD BLOCK 0 STREAMS k 0"),
        Plan::Blocking {
            slot,
            write: false,
            timeout: None
        }
    );
}

#[test]
fn the_default_refusal_names_the_setting_unless_it_could_never_be_allowed() {
    let table = crate::commands::CommandTable::builtin();
    let text = |name: &str, allowed: &[String]| match plan_node_admin(
        table.by_name(name.as_bytes()).expect("known"),
        allowed,
    ) {
        Plan::Reply(reply) => String::from_utf8_lossy(&reply).to_string(),
        other => format!("{other:?}"),
    };
    assert!(text("config|set", &[]).contains("router.allow_node_admin"));
    assert!(!text("shutdown", &[]).contains("router.allow_node_admin"));
    assert!(text("shutdown", &[]).contains("stop every node"));
    let allowed = vec!["config|set".to_string()];
    assert_eq!(
        text("config|set", &allowed),
        format!("{:?}", Plan::Compound(Compound(Job::NodeAdmin)))
    );
}
