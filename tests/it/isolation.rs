//! One client's behaviour never stalls another: a client that pipelines without reading is held
//! back (back-pressure) while others keep being answered; a client vanishing mid-pipeline costs
//! nobody else anything.

use std::io::Write;
use std::net::TcpStream;
use std::time::Duration;

use crate::support::resp_client::encode_command;
use crate::support::{Redcar, RedisCluster, Value};

/// 1 KiB values, so replies owed to a client that never reads add up quickly.
fn big_value() -> String {
    "x".repeat(1024)
}

#[test]
fn a_client_that_never_reads_does_not_stall_others() {
    let cluster = RedisCluster::start(3, 1);
    let config =
        crate::redirects::write_config("client:\n  max_reply_bytes: 1mb\n  max_in_flight: 256\n");
    let redcar = Redcar::start_with(&cluster.seeds(), &["--config", config.path_str()]);
    let mut good = redcar.client();
    // A 1 KiB key as well, so the hog's requests are large too (more than kernel buffers hold).
    let big_key = format!("big:{}", "k".repeat(1020));
    assert_eq!(
        good.q(&["SET", &big_key, &big_value()]),
        Value::simple("OK")
    );

    // The hog writes 100k GETs (100 MB of requests, 100 MB of replies) and never reads a byte.
    let addr = redcar.addr();
    let hog_key = big_key.clone();
    let hog = std::thread::spawn(move || {
        let mut stream = TcpStream::connect(addr).expect("hog connects");
        stream
            .set_write_timeout(Some(Duration::from_secs(5)))
            .expect("timeout");
        let batch: Vec<u8> = (0..1000)
            .flat_map(|_| encode_command(&["GET", hog_key.as_str()]))
            .collect();
        let mut written = 0;
        for _ in 0..100 {
            // Once redcar stops reading (back-pressure) the kernel buffers fill and this times out.
            if stream.write_all(&batch).is_err() {
                break;
            }
            written += 1000;
        }
        (stream, written)
    });
    // Meanwhile another client is served normally, commands on every node.
    for i in 0..300 {
        let key = format!("other:{i}");
        assert_eq!(
            good.q(&["SET", &key, "v"]),
            Value::simple("OK"),
            "SET {i} while the hog is stuck"
        );
        assert_eq!(good.q(&["GET", &key]), Value::bulk("v"));
    }
    let (hog_stream, written) = hog.join().expect("hog thread");
    assert!(
        written < 100_000,
        "redcar must push back on a client that never reads (it accepted all {written})"
    );
    drop(hog_stream);
    assert_eq!(
        good.q(&["GET", &big_key]),
        Value::bulk(big_value()),
        "served after the hog left"
    );
}

#[test]
fn a_client_vanishing_mid_pipeline_affects_nobody_else() {
    let cluster = RedisCluster::start(3, 1);
    let redcar = Redcar::start(&cluster.seeds());
    let mut good = redcar.client();
    for round in 0..20 {
        let mut gone = TcpStream::connect(redcar.addr()).expect("connect");
        let pipeline: Vec<u8> = (0..500)
            .flat_map(|i| encode_command(&["SET", &format!("gone:{round}:{i}"), "1"]))
            .collect();
        gone.write_all(&pipeline).expect("write");
        // Half a command, then vanish without reading.
        gone.write_all(b"*3\r\n$3\r\nSET\r\n$1\r\nk")
            .expect("write");
        drop(gone);
        assert_eq!(good.q(&["INCR", "survivor"]), Value::Int(round + 1));
    }
    assert_eq!(good.q(&["PING"]), Value::simple("PONG"));
}
