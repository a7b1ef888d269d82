//! Tests for the transaction rules: queueing, refusals that abort EXEC, and WATCH steps.

use bytes::Bytes;

use super::*;

fn raw(text: &str) -> Bytes {
    Bytes::copy_from_slice(text.as_bytes())
}

fn reply_of(step: TxStep) -> Bytes {
    match step {
        TxStep::Reply(reply) => reply,
        _ => panic!("expected a reply"),
    }
}

#[test]
fn queues_commands_of_one_slot_and_execs_them_as_one_unit() {
    let mut tx = Transaction::default();
    assert!(!tx.is_exclusive(&Plan::Tx(Tx::Multi, None)));
    assert_eq!(
        &reply_of(tx.step(Plan::Tx(Tx::Multi, None), &raw("m"), 1 << 20))[..],
        OK
    );
    let set = Plan::Slot {
        slot: 7,
        write: true,
    };
    assert_eq!(&reply_of(tx.step(set, &raw("A"), 1 << 20))[..], QUEUED);
    assert_eq!(
        &reply_of(tx.step(Plan::AnyNode, &raw("B"), 1 << 20))[..],
        QUEUED
    );
    match tx.step(Plan::Tx(Tx::Exec, None), &raw("e"), 1 << 20) {
        TxStep::Exec {
            payload,
            frames,
            slot,
            backend,
        } => {
            assert!(backend.is_none());
            assert_eq!(frames, 4);
            assert_eq!(slot, Some(7));
            assert_eq!(&payload[..], b"*1\r\n$5\r\nMULTI\r\nAB*1\r\n$4\r\nEXEC\r\n");
        }
        _ => panic!("expected EXEC"),
    }
    assert!(!tx.is_open());
}

#[test]
fn a_refused_command_aborts_exec_like_redis() {
    let mut tx = Transaction::default();
    tx.step(Plan::Tx(Tx::Multi, None), &raw("m"), 1 << 20);
    tx.step(
        Plan::Slot {
            slot: 1,
            write: true,
        },
        &raw("A"),
        1 << 20,
    );
    let cross = reply_of(tx.step(
        Plan::Slot {
            slot: 2,
            write: true,
        },
        &raw("B"),
        1 << 20,
    ));
    assert!(cross.starts_with(b"-CROSSSLOT"));
    let exec = reply_of(tx.step(Plan::Tx(Tx::Exec, None), &raw("e"), 1 << 20));
    assert_eq!(&exec[..], EXECABORT);
}

#[test]
fn nesting_and_watch_inside_multi_are_errors_that_do_not_abort() {
    let mut tx = Transaction::default();
    tx.step(Plan::Tx(Tx::Multi, None), &raw("m"), 1 << 20);
    let nested = reply_of(tx.step(Plan::Tx(Tx::Multi, None), &raw("m"), 1 << 20));
    assert_eq!(&nested[..], b"-ERR MULTI calls can not be nested\r\n");
    let watch = reply_of(tx.step(Plan::Tx(Tx::Watch, Some(1)), &raw("w"), 1 << 20));
    assert_eq!(&watch[..], b"-ERR WATCH inside MULTI is not allowed\r\n");
    assert!(matches!(
        tx.step(Plan::Tx(Tx::Exec, None), &raw("e"), 1 << 20),
        TxStep::Exec { frames: 2, .. }
    ));
}

#[test]
fn exec_and_discard_without_multi_and_oversized_transactions() {
    let mut tx = Transaction::default();
    let exec = reply_of(tx.step(Plan::Tx(Tx::Exec, None), &raw("e"), 10));
    assert_eq!(&exec[..], b"-ERR EXEC without MULTI\r\n");
    let discard = reply_of(tx.step(Plan::Tx(Tx::Discard, None), &raw("d"), 10));
    assert_eq!(&discard[..], b"-ERR DISCARD without MULTI\r\n");
    tx.step(Plan::Tx(Tx::Multi, None), &raw("m"), 10);
    let big = reply_of(tx.step(
        Plan::Slot {
            slot: 1,
            write: true,
        },
        &raw("0123456789x"),
        10,
    ));
    assert!(big.starts_with(b"-ERR redcar: transaction too large"));
    assert_eq!(
        &reply_of(tx.step(Plan::Tx(Tx::Exec, None), &raw("e"), 10))[..],
        EXECABORT
    );
}

#[test]
fn watch_and_blocking_commands_run_alone_outside_multi_only() {
    let mut tx = Transaction::default();
    let blocking = Plan::Blocking {
        slot: 1,
        write: true,
        timeout: None,
    };
    assert!(tx.is_exclusive(&blocking));
    assert!(tx.is_exclusive(&Plan::Tx(Tx::Watch, Some(1))));
    assert!(
        !tx.is_exclusive(&Plan::Tx(Tx::Unwatch, None)),
        "nothing watched"
    );
    assert!(matches!(
        tx.step(Plan::Tx(Tx::Watch, Some(1)), &raw("w"), 10),
        TxStep::Watch { slot: 1, .. }
    ));
    tx.step(Plan::Tx(Tx::Multi, None), &raw("m"), 10);
    assert!(!tx.is_exclusive(&blocking), "queued, not run, inside MULTI");
    assert_eq!(&reply_of(tx.step(blocking, &raw("B"), 100))[..], QUEUED);
}

/// `is_exclusive` answers one-slot commands without looking at the transaction: the answer must
/// be "no" whatever its state.
#[test]
fn a_one_slot_command_never_runs_alone() {
    let mut tx = Transaction::default();
    let get = Plan::Slot {
        slot: 1,
        write: false,
    };
    assert!(!tx.is_exclusive(&get));
    tx.step(Plan::Tx(Tx::Watch, Some(1)), &raw("w"), 10);
    assert!(!tx.is_exclusive(&get), "watching");
    tx.step(Plan::Tx(Tx::Multi, None), &raw("m"), 10);
    assert!(!tx.is_exclusive(&get), "inside MULTI");
}
