//! A mixed GET/SET load generator and a staleness probe for redcar's near-cache benchmark
//! (bench/nearcache.sh). `redis-benchmark` runs one command per test, so it cannot mix reads
//! and writes over the same keys; this does.
//!
//! ```text
//! mixload --addr HOST:PORT [--clients 50] [--seconds 10 | --requests N] [--keys 100]
//!         [--prefix hot:] [--read-ratio 0.9] [--value-size 32] [--threads 1] [--seed N]
//!         [--no-populate] [--rate N] [--user U --password P]
//! mixload --staleness --addr REDCAR --node HOST:PORT [--key hot:staleness] [--writes 2000]
//!         [--bound-ms 205] [--readers 1] [--timeout-ms 2000] [--gap-us 500]
//! ```
//!
//! **Load** (default mode): `--clients` connections, each its own TCP connection with one command
//! in flight (pipeline depth 1), each sending GET (with probability `--read-ratio`) or SET of a
//! key drawn uniformly from `PREFIX0 .. PREFIX{keys-1}`, until `--seconds` have passed or
//! `--requests` commands were sent in all. Before the run every key is SET once (unless
//! `--no-populate`), so GETs find values. Latency is per command, from the write of the command
//! to the end of its reply. The last line, `RESULT key=value ...`, is for scripts.
//!
//! `--rate N` paces the load (open loop): N commands a second in all, each client sending one
//! every `clients / N` seconds on a fixed schedule (clients staggered), so the load stays the
//! same however fast or slow the answers come; `behind` counts commands sent more than one
//! interval after their scheduled time (the client fell behind, and its latency understates
//! the wait). `--user`/`--password`: every connection logs in (`AUTH user password`) first.
//!
//! **Staleness** (`--staleness`): a writer connected straight to the cluster primary that owns
//! `--key` (it sends to `--node` and follows `-MOVED`), and `--readers` readers through `--addr`
//! (redcar) reading the key in a tight loop. The writer SETs `NONCE:1`, `NONCE:2`, ... (a new
//! value each time); for each write, the time from its acknowledgement to the end of the first
//! read through redcar that returns it (or a later one) is its visibility latency. A read that
//! *started* more than `--bound-ms` after a write was acknowledged and still returns an older
//! value is a "stale read after the bound"; with a correct near cache there are none. The writer
//! waits until its write was seen (at most `--timeout-ms`; otherwise it counts it "not seen"),
//! then pauses about `--gap-us` before the next one.

mod resp;
mod staleness;

use std::process::exit;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn usage() -> ! {
    eprintln!(
        "usage: mixload --addr HOST:PORT [--clients 50] [--seconds 10 | --requests N] [--keys 100]\n\
         \x20              [--prefix hot:] [--read-ratio 0.9] [--value-size 32] [--threads 1]\n\
         \x20              [--seed N] [--no-populate] [--rate N] [--user U --password P]\n\
         \x20      mixload --staleness --addr REDCAR --node HOST:PORT [--key hot:staleness]\n\
         \x20              [--writes 2000] [--bound-ms 205] [--readers 1] [--timeout-ms 2000] [--gap-us 500]"
    );
    exit(2)
}

fn die(msg: impl std::fmt::Display) -> ! {
    eprintln!("mixload: {msg}");
    exit(1)
}

#[derive(Clone)]
struct Opts {
    addr: String,
    clients: usize,
    seconds: f64,
    requests: Option<u64>,
    keys: u64,
    prefix: String,
    read_ratio: f64,
    value_size: usize,
    threads: usize,
    seed: u64,
    populate: bool,
    staleness: bool,
    node: Option<String>,
    key: String,
    writes: u64,
    bound_ms: f64,
    readers: usize,
    timeout_ms: u64,
    gap_us: u64,
    rate: f64,
    user: Option<String>,
    password: Option<String>,
}

fn parse_args() -> Opts {
    let mut o = Opts {
        addr: String::new(),
        clients: 50,
        seconds: 10.0,
        requests: None,
        keys: 100,
        prefix: "hot:".into(),
        read_ratio: 0.9,
        value_size: 32,
        threads: 1,
        seed: 1,
        populate: true,
        staleness: false,
        node: None,
        key: "hot:staleness".into(),
        writes: 2000,
        bound_ms: 205.0,
        readers: 1,
        timeout_ms: 2000,
        gap_us: 500,
        rate: 0.0,
        user: None,
        password: None,
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut val = || args.next().unwrap_or_else(|| usage());
        fn num<T: std::str::FromStr>(name: &str, v: String) -> T {
            v.parse()
                .unwrap_or_else(|_| die(format!("{name}: not a number: {v}")))
        }
        match a.as_str() {
            "--addr" => o.addr = val(),
            "--clients" => o.clients = num(&a, val()),
            "--seconds" => o.seconds = num(&a, val()),
            "--requests" => o.requests = Some(num(&a, val())),
            "--keys" => o.keys = num(&a, val()),
            "--prefix" => o.prefix = val(),
            "--read-ratio" => o.read_ratio = num(&a, val()),
            "--value-size" => o.value_size = num(&a, val()),
            "--threads" => o.threads = num(&a, val()),
            "--seed" => o.seed = num(&a, val()),
            "--no-populate" => o.populate = false,
            "--staleness" => o.staleness = true,
            "--node" => o.node = Some(val()),
            "--key" => o.key = val(),
            "--writes" => o.writes = num(&a, val()),
            "--bound-ms" => o.bound_ms = num(&a, val()),
            "--readers" => o.readers = num(&a, val()),
            "--timeout-ms" => o.timeout_ms = num(&a, val()),
            "--gap-us" => o.gap_us = num(&a, val()),
            "--rate" => o.rate = num(&a, val()),
            "--user" => o.user = Some(val()),
            "--password" => o.password = Some(val()),
            "-h" | "--help" => usage(),
            _ => {
                eprintln!("mixload: unknown argument {a}");
                usage()
            }
        }
    }
    if o.addr.is_empty() {
        usage()
    }
    if o.clients == 0 || o.keys == 0 || o.threads == 0 || o.readers == 0 {
        die("--clients, --keys, --threads and --readers must be at least 1");
    }
    if !(0.0..=1.0).contains(&o.read_ratio) {
        die("--read-ratio must be between 0 and 1");
    }
    o
}

fn main() {
    let o = parse_args();
    if o.staleness {
        staleness::staleness(&o)
    } else {
        load(&o)
    }
}

/// xorshift64*: fast, seedable, good enough to pick keys and commands.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// The `q`-quantile (0..=1) of sorted nanoseconds, in milliseconds (nearest rank).
fn quantile_ms(sorted: &[u64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1] as f64 / 1e6
}

// ------------------------------------------------------------------------------------- load

#[derive(Default)]
struct ClientStats {
    gets: u64,
    sets: u64,
    errors: u64,
    behind: u64,
    first_error: Option<String>,
    latencies: Vec<u64>,
}

fn load(o: &Opts) {
    let rt = if o.threads == 1 {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
    } else {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(o.threads)
            .enable_all()
            .build()
    }
    .unwrap_or_else(|e| die(format!("tokio runtime: {e}")));
    rt.block_on(load_async(o.clone()))
}

async fn load_async(o: Opts) {
    use tokio::io::{AsyncWriteExt, BufReader};
    use tokio::net::TcpStream;

    let o = Arc::new(o);
    println!(
        "mixload: {} clients, pipeline 1, {}{}, {:.0}% GET / {:.0}% SET over {} keys ({}0..{}{}), value {} B, {} thread(s)",
        o.clients,
        match o.requests {
            Some(n) => format!("{n} requests"),
            None => format!("{} s", o.seconds),
        },
        match o.rate > 0.0 {
            true => format!(", paced at {} commands/s", o.rate),
            false => String::new(),
        },
        o.read_ratio * 100.0,
        (1.0 - o.read_ratio) * 100.0,
        o.keys,
        o.prefix,
        o.prefix,
        o.keys - 1,
        o.value_size,
        o.threads
    );
    if o.populate {
        let s = TcpStream::connect(&o.addr)
            .await
            .unwrap_or_else(|e| die(format!("connect {}: {e}", o.addr)));
        let (r, mut w) = s.into_split();
        let mut r = BufReader::new(r);
        if let Err(e) = login(&o, &mut r, &mut w).await {
            die(format!("populate: {e}"))
        }
        let mut buf = Vec::new();
        let value = value_of(0, 0, o.value_size);
        for k in 0..o.keys {
            let key = format!("{}{}", o.prefix, k);
            resp::encode(&mut buf, &[b"SET", key.as_bytes(), value.as_bytes()]);
        }
        w.write_all(&buf)
            .await
            .unwrap_or_else(|e| die(format!("populate: {e}")));
        let mut line = Vec::new();
        for k in 0..o.keys {
            match resp::skip_reply(&mut r, &mut line).await {
                Ok(None) => {}
                Ok(Some(e)) => die(format!("populate: SET {}{k}: -{e}", o.prefix)),
                Err(e) => die(format!("populate: {e}")),
            }
        }
    }

    let budget = Arc::new(AtomicU64::new(0));
    let start = Instant::now();
    let deadline = match o.requests {
        Some(_) => None,
        None => Some(start + Duration::from_secs_f64(o.seconds)),
    };
    let mut tasks = Vec::new();
    for id in 0..o.clients {
        let o = o.clone();
        let budget = budget.clone();
        tasks.push(tokio::spawn(async move {
            let mut st = ClientStats::default();
            let s = match TcpStream::connect(&o.addr).await {
                Ok(s) => s,
                Err(e) => {
                    st.errors += 1;
                    st.first_error = Some(format!("connect: {e}"));
                    return st;
                }
            };
            let _ = s.set_nodelay(true);
            let (r, mut w) = s.into_split();
            let mut r = BufReader::with_capacity(16 << 10, r);
            if let Err(e) = login(&o, &mut r, &mut w).await {
                st.errors += 1;
                st.first_error = Some(e);
                return st;
            }
            // `--rate`: this client's schedule, staggered among the clients.
            let interval =
                (o.rate > 0.0).then(|| Duration::from_secs_f64(o.clients as f64 / o.rate));
            let mut due =
                interval.map(|i| Instant::now() + i.mul_f64(id as f64 / o.clients as f64));
            let mut rng = Rng::new(o.seed.wrapping_add(id as u64 * 7919));
            let mut cmd = Vec::with_capacity(128 + o.value_size);
            let mut line = Vec::with_capacity(128);
            let mut n = 0u64;
            loop {
                if let Some(total) = o.requests {
                    if budget.fetch_add(1, Ordering::Relaxed) >= total {
                        break;
                    }
                } else if deadline.is_some_and(|d| Instant::now() >= d) {
                    break;
                }
                let key = format!("{}{}", o.prefix, rng.next() % o.keys);
                let get = rng.unit() < o.read_ratio;
                cmd.clear();
                if get {
                    resp::encode(&mut cmd, &[b"GET", key.as_bytes()]);
                } else {
                    n += 1;
                    let v = value_of(id, n, o.value_size);
                    resp::encode(&mut cmd, &[b"SET", key.as_bytes(), v.as_bytes()]);
                }
                if let (Some(at), Some(interval)) = (due, interval) {
                    tokio::time::sleep_until(at.into()).await;
                    if Instant::now() > at + interval {
                        st.behind += 1;
                    }
                    due = Some(at + interval);
                }
                let t0 = Instant::now();
                let done = async {
                    w.write_all(&cmd).await?;
                    resp::skip_reply(&mut r, &mut line).await
                }
                .await;
                match done {
                    Ok(err) => {
                        st.latencies.push(t0.elapsed().as_nanos() as u64);
                        if get {
                            st.gets += 1;
                        } else {
                            st.sets += 1;
                        }
                        if let Some(e) = err {
                            st.errors += 1;
                            st.first_error.get_or_insert(format!("-{e}"));
                        }
                    }
                    Err(e) => {
                        st.errors += 1;
                        st.first_error.get_or_insert(format!("connection: {e}"));
                        break;
                    }
                }
            }
            st
        }));
    }
    let mut all = ClientStats::default();
    for t in tasks {
        let st = t.await.unwrap_or_else(|e| die(format!("client task: {e}")));
        all.gets += st.gets;
        all.sets += st.sets;
        all.errors += st.errors;
        all.behind += st.behind;
        if all.first_error.is_none() {
            all.first_error = st.first_error;
        }
        all.latencies.extend(st.latencies);
    }
    let elapsed = start.elapsed().as_secs_f64();
    all.latencies.sort_unstable();
    let ops = all.gets + all.sets;
    let rate = ops as f64 / elapsed;
    let (p50, p99, max) = (
        quantile_ms(&all.latencies, 0.50),
        quantile_ms(&all.latencies, 0.99),
        quantile_ms(&all.latencies, 1.0),
    );
    println!(
        "{ops} commands in {elapsed:.2} s: {rate:.0} ops/s ({} GET, {} SET); latency p50 {p50:.3} ms, p99 {p99:.3} ms, max {max:.3} ms; errors {}{}",
        all.gets,
        all.sets,
        all.errors,
        all.first_error
            .as_deref()
            .map(|e| format!(" (first: {e})"))
            .unwrap_or_default()
    );
    println!(
        "RESULT ops={ops} seconds={elapsed:.3} ops_per_sec={rate:.0} gets={} sets={} p50_ms={p50:.3} p99_ms={p99:.3} max_ms={max:.3} errors={} behind={}",
        all.gets, all.sets, all.errors, all.behind
    );
    if ops == 0 {
        exit(1);
    }
}

/// `--user`/`--password`: `AUTH` on a new connection.
async fn login<R, W>(o: &Opts, r: &mut R, w: &mut W) -> Result<(), String>
where
    R: tokio::io::AsyncBufRead + Unpin,
    W: tokio::io::AsyncWrite + Unpin,
{
    use tokio::io::AsyncWriteExt;
    let Some(password) = &o.password else {
        return Ok(());
    };
    let mut cmd = Vec::new();
    match &o.user {
        Some(user) => resp::encode(&mut cmd, &[b"AUTH", user.as_bytes(), password.as_bytes()]),
        None => resp::encode(&mut cmd, &[b"AUTH", password.as_bytes()]),
    }
    w.write_all(&cmd).await.map_err(|e| format!("AUTH: {e}"))?;
    match resp::skip_reply(r, &mut Vec::new()).await {
        Ok(None) => Ok(()),
        Ok(Some(e)) => Err(format!("AUTH: -{e}")),
        Err(e) => Err(format!("AUTH: {e}")),
    }
}

/// A SET value of `size` bytes (at least the id and counter).
fn value_of(client: usize, n: u64, size: usize) -> String {
    let mut v = format!("v{client}-{n}-");
    while v.len() < size {
        v.push('x');
    }
    v
}
