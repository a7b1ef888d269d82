use std::sync::Arc;

use super::*;

/// `count` current-thread runtimes (kept alive by the caller) and moves between them.
fn moves(count: usize) -> (Vec<tokio::runtime::Runtime>, Arc<Moves>) {
    let runtimes: Vec<_> = (0..count)
        .map(|_| {
            tokio::runtime::Builder::new_current_thread()
                .build()
                .expect("runtime")
        })
        .collect();
    let handles: Arc<[Handle]> = runtimes.iter().map(|r| r.handle().clone()).collect();
    let moves = Moves::new(handles, &ClientMetrics::default()).expect("two workers or more");
    (runtimes, Arc::new(moves))
}

fn pipelining(moves: &Moves) -> Vec<i64> {
    moves.workers.iter().map(|w| w.pipelining.get()).collect()
}

#[test]
fn one_worker_or_more_than_wait_can_record_moves_nothing() {
    let handles = |n: usize| -> Arc<[Handle]> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime");
        (0..n).map(|_| runtime.handle().clone()).collect()
    };
    let metrics = ClientMetrics::default();
    assert!(Moves::new(handles(1), &metrics).is_none());
    assert!(Moves::new(handles(MAX_WORKERS + 1), &metrics).is_none());
    assert!(Moves::new(handles(MAX_WORKERS), &metrics).is_some());
}

#[test]
fn pipelining_sessions_move_until_the_workers_hold_as_many_within_one() {
    let (_runtimes, moves) = moves(2);
    let mut members: Vec<_> = (0..5).map(|_| moves.join_pipelining(0)).collect();
    assert_eq!(pipelining(&moves), [5, 0]);
    assert!(moves.wanted(0), "worker 0 holds all five");
    let moved: Vec<_> = members
        .iter_mut()
        .map(|m| moves.shed_pipelining(m))
        .collect();
    assert_eq!(moved, [Some(1), Some(1), None, None, None]);
    assert_eq!(pipelining(&moves), [3, 2]);
    assert!(!moves.wanted(0) && !moves.wanted(1));
    // A membership moved with its session: dropping it counts it off its new worker.
    let first = members.remove(0);
    drop(first);
    assert_eq!(pipelining(&moves), [3, 1]);
    drop(members);
    assert_eq!(pipelining(&moves), [0, 0]);
}

#[test]
fn only_an_overflowing_worker_with_a_spare_one_hands_clients_over() {
    assert_eq!(
        overflow(0, &[0.97, 0.1], 40),
        Some(Overflow { to: 1, tickets: 5 })
    );
    // The least busy other worker takes them.
    assert_eq!(
        overflow(1, &[0.4, 0.99, 0.2], 9),
        Some(Overflow { to: 2, tickets: 2 })
    );
    assert_eq!(overflow(0, &[0.9, 0.1], 40), None, "not past the mark");
    assert_eq!(overflow(0, &[0.97, 0.6], 40), None, "nobody has room");
    assert_eq!(overflow(0, &[0.97, 0.1], 1), None, "one client stays");
    assert_eq!(overflow(5, &[0.97, 0.1], 40), None, "no such worker");
}

#[test]
fn tickets_are_taken_once_each_and_the_worker_pauses_before_issuing_more() {
    let (_runtimes, moves) = moves(2);
    moves.sample(0, &[0.99, 0.05], 16);
    assert!(moves.wanted(0));
    assert_eq!(moves.take_ticket(0), Some(1));
    assert_eq!(moves.take_ticket(0), Some(1));
    assert_eq!(moves.take_ticket(0), None, "16 clients: two tickets");
    assert!(!moves.wanted(0));
    assert_eq!(moves.take_ticket(1), None, "worker 1 issued none");
    // Still overflowing, but paused while the move shows in the busy share.
    for _ in 0..OVERFLOW_PAUSE {
        moves.sample(0, &[0.99, 0.05], 14);
        assert!(!moves.wanted(0));
    }
    moves.sample(0, &[0.99, 0.05], 14);
    assert!(moves.wanted(0), "the pause is over");
}

#[test]
fn a_pipelining_session_moved_by_a_ticket_takes_its_count_along() {
    let (_runtimes, moves) = moves(2);
    let mut member = moves.join_pipelining(0);
    moves.transfer(&mut member, 1);
    assert_eq!(pipelining(&moves), [0, 1]);
    drop(member);
    assert_eq!(pipelining(&moves), [0, 0]);
}
