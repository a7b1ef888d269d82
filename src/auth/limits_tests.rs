//! Tests of the token buckets, on a clock the test moves.

use super::*;

fn limits(
    per_client: (u32, u32, usize),
    per_user: (u32, u32, usize),
    when_over: WhenOver,
) -> Limits {
    let rate = |(commands_per_second, burst, bytes_per_second)| {
        Rate::new(&RateConfig {
            commands_per_second,
            burst,
            bytes_per_second,
        })
    };
    Limits {
        max_connections: 0,
        per_client: rate(per_client),
        per_user: rate(per_user),
        when_over,
    }
}

fn refusal() -> Bytes {
    Bytes::from_static(b"-ERR over\r\n")
}

/// Admits as many commands as the buckets allow over `seconds`, starting each as soon as it
/// may: what a client pipelining without end gets.
fn admitted(limits: &Limits, seconds: u64) -> u64 {
    let shared = SharedBuckets::default();
    let mut rates = ClientRates::default();
    let start = Instant::now();
    let end = start + Duration::from_secs(seconds);
    let (mut now, mut count) = (start, 0);
    while now < end {
        match rates.admit(limits, &shared, now, refusal) {
            Admit::Now => count += 1,
            Admit::After(wait) => now += wait,
            Admit::Refuse(_) => panic!("slow mode never refuses"),
        }
    }
    count
}

#[test]
fn a_client_gets_its_rate_plus_one_burst() {
    let l = limits((1000, 50, 0), (0, 0, 0), WhenOver::Slow);
    let got = admitted(&l, 10);
    assert!((10_040..=10_060).contains(&got), "{got}");
    // The default burst is a tenth of a second's worth.
    let l = limits((1000, 0, 0), (0, 0, 0), WhenOver::Slow);
    let got = admitted(&l, 10);
    assert!((10_090..=10_110).contains(&got), "{got}");
}

#[test]
fn the_users_rate_holds_whatever_the_client_rate() {
    let l = limits((5000, 0, 0), (200, 10, 0), WhenOver::Slow);
    let got = admitted(&l, 5);
    assert!((1000..=1020).contains(&got), "{got}");
}

#[test]
fn two_clients_of_one_user_share_its_rate() {
    let l = limits((0, 0, 0), (100, 10, 0), WhenOver::Slow);
    let shared = SharedBuckets::default();
    let (mut a, mut b) = (ClientRates::default(), ClientRates::default());
    let start = Instant::now();
    let mut count = 0;
    for ms in 0..2000 {
        let now = start + Duration::from_millis(ms);
        for client in [&mut a, &mut b] {
            if client.admit(&l, &shared, now, refusal) == Admit::Now {
                count += 1;
            }
        }
    }
    assert!((205..=212).contains(&count), "{count}");
}

#[test]
fn bytes_may_go_into_debt_and_are_paid_back_before_the_next_command() {
    let l = limits((0, 0, 1000), (0, 0, 0), WhenOver::Slow);
    let shared = SharedBuckets::default();
    let mut rates = ClientRates::default();
    let now = Instant::now();
    assert_eq!(rates.admit(&l, &shared, now, refusal), Admit::Now);
    // A 600-byte reply: 100 bytes of bucket, 500 of debt, half a second to pay back.
    rates.take_bytes(&l, &shared, now, 600);
    assert_eq!(
        rates.admit(&l, &shared, now, refusal),
        Admit::After(Duration::from_millis(500))
    );
    let later = now + Duration::from_millis(500);
    assert_eq!(rates.admit(&l, &shared, later, refusal), Admit::Now);
}

#[test]
fn fail_mode_answers_with_the_refusal_and_takes_nothing() {
    let l = limits((1, 1, 0), (0, 0, 0), WhenOver::Fail);
    let shared = SharedBuckets::default();
    let mut rates = ClientRates::default();
    let now = Instant::now();
    assert_eq!(rates.admit(&l, &shared, now, refusal), Admit::Now);
    assert_eq!(
        rates.admit(&l, &shared, now, refusal),
        Admit::Refuse(refusal())
    );
    assert_eq!(
        rates.admit(&l, &shared, now, refusal),
        Admit::Refuse(refusal())
    );
    let later = now + Duration::from_secs(1);
    assert_eq!(rates.admit(&l, &shared, later, refusal), Admit::Now);
}

#[test]
fn a_client_over_its_own_rate_takes_nothing_from_the_users() {
    let l = limits((1, 1, 0), (10, 2, 0), WhenOver::Slow);
    let shared = SharedBuckets::default();
    let (mut a, mut b) = (ClientRates::default(), ClientRates::default());
    let now = Instant::now();
    assert_eq!(a.admit(&l, &shared, now, refusal), Admit::Now);
    for _ in 0..5 {
        assert!(matches!(
            a.admit(&l, &shared, now, refusal),
            Admit::After(_)
        ));
    }
    assert_eq!(
        b.admit(&l, &shared, now, refusal),
        Admit::Now,
        "one token left"
    );
}

/// Fifty clients of one user, each pipelining without end and looked at again only when its
/// wait is over (what the event loop's and the session's timers do): the user gets its rate,
/// and each command is looked at about once while it waits and once when it starts, not
/// once at every refill (which cost the loop ~8 looks a command before tokens were reserved).
#[test]
fn clients_waiting_on_one_users_bucket_wake_once_a_command() {
    let l = limits((0, 0, 0), (5000, 500, 0), WhenOver::Slow);
    let shared = SharedBuckets::default();
    let start = Instant::now();
    let end = start + Duration::from_secs(2);
    let mut clients: Vec<(Instant, ClientRates)> =
        (0..50).map(|_| (start, ClientRates::default())).collect();
    let (mut admitted, mut looks) = (0u64, 0u64);
    // The client due first, until the end.
    while let Some((due, rates)) = clients.iter_mut().min_by_key(|(due, _)| *due) {
        if *due >= end {
            break;
        }
        looks += 1;
        match rates.admit(&l, &shared, *due, refusal) {
            Admit::Now => admitted += 1,
            Admit::After(wait) => *due += wait,
            Admit::Refuse(_) => panic!("slow mode never refuses"),
        }
    }
    assert!((10_450..=10_560).contains(&admitted), "{admitted}");
    assert!(looks <= admitted * 2 + 100, "{looks} looks for {admitted}");
}

#[test]
fn a_look_before_its_time_takes_nothing_more() {
    let l = limits((0, 0, 0), (10, 1, 0), WhenOver::Slow);
    let shared = SharedBuckets::default();
    let (mut a, mut b) = (ClientRates::default(), ClientRates::default());
    let now = Instant::now();
    assert_eq!(a.admit(&l, &shared, now, refusal), Admit::Now);
    // Over: a's next command takes the next token (due in 100 ms) and waits for it.
    let wait = Duration::from_millis(100);
    assert_eq!(a.admit(&l, &shared, now, refusal), Admit::After(wait));
    // Looked at again early (another event of the client): the rest of its wait, nothing taken.
    let early = now + Duration::from_millis(40);
    let rest = Duration::from_millis(60);
    for _ in 0..3 {
        assert_eq!(a.admit(&l, &shared, early, refusal), Admit::After(rest));
    }
    // b queues behind a's one token, not behind four.
    assert_eq!(
        b.admit(&l, &shared, now, refusal),
        Admit::After(Duration::from_millis(200))
    );
    assert_eq!(a.admit(&l, &shared, now + wait, refusal), Admit::Now);
}

#[test]
fn fail_mode_over_the_users_rate_gives_back_the_clients_token() {
    let l = limits((2, 2, 0), (1, 1, 0), WhenOver::Fail);
    let shared = SharedBuckets::default();
    let (mut a, mut b) = (ClientRates::default(), ClientRates::default());
    let now = Instant::now();
    assert_eq!(b.admit(&l, &shared, now, refusal), Admit::Now); // the user's one token
    for _ in 0..5 {
        assert_eq!(a.admit(&l, &shared, now, refusal), Admit::Refuse(refusal()));
    }
    // A second later the user has a token again, and a still has both of its own.
    let later = now + Duration::from_secs(1);
    assert_eq!(a.admit(&l, &shared, later, refusal), Admit::Now);
    let later = later + Duration::from_secs(1);
    assert_eq!(a.admit(&l, &shared, later, refusal), Admit::Now);
}
