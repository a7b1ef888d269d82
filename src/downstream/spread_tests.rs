//! Tests of the workers' placement (spread.rs).

use super::*;

fn spread(workers: usize) -> Arc<Spread> {
    let metrics = Metrics::new(&crate::metrics::MetricsConfig::default());
    Arc::new(Spread::new(workers, Placement::Even, &metrics))
}

#[test]
fn a_worker_ahead_of_the_least_loaded_by_more_than_one_stops_accepting() {
    let spread = spread(2);
    let first = spread.join(0);
    assert!(spread.may_accept(0), "1 vs 0 is within the slack");
    let second = spread.join(0);
    assert!(!spread.may_accept(0), "2 vs 0");
    assert!(
        spread.may_accept(1),
        "the least-loaded worker always accepts"
    );
    let other = spread.join(1);
    assert!(spread.may_accept(0), "2 vs 1");
    drop((first, second, other));
    assert!(spread.may_accept(0) && spread.may_accept(1));
}

#[test]
fn a_departure_from_the_fuller_worker_reopens_it() {
    let spread = spread(3);
    let held: Vec<_> = (0..3).map(|_| spread.join(2)).collect();
    assert!(!spread.may_accept(2));
    let mut held = held;
    held.pop();
    assert!(!spread.may_accept(2), "2 vs 0 still");
    held.pop();
    assert!(spread.may_accept(2));
    assert!(spread.may_accept(7), "an unknown worker is never held back");
}

/// Worker 0 holding 2 clients and worker 1 none, and a task waiting for worker 0's turn.
async fn worker_0_paused() -> (Arc<Spread>, [Member; 2], tokio::task::JoinHandle<()>) {
    let spread = spread(2);
    let held = [spread.join(0), spread.join(0)];
    let waiter = {
        let spread = spread.clone();
        tokio::spawn(async move { spread.turn(0).await })
    };
    tokio::task::yield_now().await;
    assert!(!waiter.is_finished(), "2 vs 0: worker 0 waits");
    (spread, held, waiter)
}

/// `waiter` finishes well before the periodic re-check would have let it.
async fn resumes_at_once(waiter: tokio::task::JoinHandle<()>) {
    tokio::time::timeout(RECHECK / 5, waiter)
        .await
        .expect("resumed on the notification")
        .expect("waiter task");
}

#[tokio::test]
async fn a_paused_worker_resumes_when_another_catches_up() {
    let (spread, _held, waiter) = worker_0_paused().await;
    let _other = spread.join(1);
    resumes_at_once(waiter).await;
}

#[tokio::test]
async fn a_paused_worker_resumes_when_a_client_leaves() {
    let (_spread, [first, _second], waiter) = worker_0_paused().await;
    drop(first);
    resumes_at_once(waiter).await;
}

fn packed(workers: usize) -> Arc<Spread> {
    let metrics = Metrics::new(&crate::metrics::MetricsConfig::default());
    Arc::new(Spread::new(workers, Placement::Pack, &metrics))
}

#[test]
fn packed_clients_go_to_the_first_worker_not_yet_busy() {
    let spread = packed(3);
    let held: Vec<_> = (0..5).map(|_| spread.join(0)).collect();
    assert!(spread.may_accept(0), "5 vs 0, but worker 0 is not busy");
    assert!(!spread.may_accept(1) && !spread.may_accept(2));
    spread.set_busy(0, PACK_BUSY);
    assert!(!spread.may_accept(0), "full");
    assert!(spread.may_accept(1) && !spread.may_accept(2));
    spread.set_busy(1, 0.9);
    assert!(spread.may_accept(2));
    spread.set_busy(0, PACK_BUSY - 0.01);
    assert!(spread.may_accept(0), "worker 0 freed up: first again");
    assert!(!spread.may_accept(2));
    drop(held);
}

#[test]
fn with_every_worker_busy_the_client_counts_decide() {
    let spread = packed(2);
    spread.set_busy(0, 1.0);
    spread.set_busy(1, 0.7);
    let held = [spread.join(0), spread.join(0)];
    assert!(!spread.may_accept(0), "2 vs 0");
    assert!(spread.may_accept(1));
    assert!(spread.may_accept(5), "an unknown worker is never held back");
    drop(held);
    assert!(spread.may_accept(0));
}

#[tokio::test]
async fn a_paused_packed_worker_resumes_when_the_first_fills_up() {
    let spread = packed(2);
    let waiter = {
        let spread = spread.clone();
        tokio::spawn(async move { spread.turn(1).await })
    };
    tokio::task::yield_now().await;
    assert!(
        !waiter.is_finished(),
        "worker 0 is not busy: worker 1 waits"
    );
    spread.set_busy(0, 0.95);
    resumes_at_once(waiter).await;
}

#[test]
fn the_busy_share_is_a_fraction_of_the_elapsed_time() {
    let ms = Duration::from_millis;
    assert_eq!(busy_share(ms(25), ms(100)), 0.25);
    assert_eq!(busy_share(ms(120), ms(100)), 1.0, "clocks read apart");
    assert_eq!(busy_share(ms(5), Duration::ZERO), 0.0);
}

#[tokio::test(flavor = "current_thread")]
async fn a_worker_samples_its_own_busy_share() {
    let spread = packed(1);
    let watch = tokio::spawn(spread.clone().watch_busy(0));
    // Busy for a few samples: a task that computes for 20 ms at a time between yields. (Only
    // tasks count: the future `block_on` runs is not one.)
    let until = std::time::Instant::now() + BUSY_SAMPLE * 6;
    tokio::spawn(async move {
        while std::time::Instant::now() < until {
            let chunk = std::time::Instant::now() + Duration::from_millis(20);
            while std::time::Instant::now() < chunk {
                std::hint::black_box(0u64);
            }
            tokio::task::yield_now().await;
        }
    })
    .await
    .expect("busy task");
    let busy = spread.workers[0].busy.get();
    watch.abort();
    assert!(
        busy > PACK_BUSY,
        "busy share {busy} after 600 ms of running a task"
    );
}

#[test]
fn auto_placement_packs_and_a_moved_client_counts_on_its_new_worker() {
    let metrics = Metrics::new(&crate::metrics::MetricsConfig::default());
    let spread = Arc::new(Spread::new(2, Placement::Auto, &metrics));
    assert!(spread.may_accept(0) && !spread.may_accept(1), "packed");
    let mut held = [spread.join(0), spread.join(0), spread.join(0)];
    held[2].move_to(1);
    let counts: Vec<i64> = spread.workers.iter().map(|w| w.clients.get()).collect();
    assert_eq!(counts, [2, 1]);
    drop(held);
    let counts: Vec<i64> = spread.workers.iter().map(|w| w.clients.get()).collect();
    assert_eq!(counts, [0, 0], "each counted off where it was last");
}

#[tokio::test]
async fn a_worker_waiting_to_accept_hears_at_once_that_its_turn_passed() {
    let spread = packed(2);
    let waiter = {
        let spread = spread.clone();
        tokio::spawn(async move { spread.turn_passes(0).await })
    };
    tokio::task::yield_now().await;
    assert!(
        !waiter.is_finished(),
        "worker 0 is not busy: its turn holds"
    );
    spread.set_busy(0, 0.9);
    resumes_at_once(waiter).await;
    // Nothing left to wait for: it returns at once.
    tokio::time::timeout(RECHECK / 5, spread.turn_passes(0))
        .await
        .expect("turn already passed");
}
