//! The same ACL rules on a redis-server and on redcar, the same generated stream of commands as
//! several users on both: the allow/deny decision and the refusal's text must be the same for
//! every command. Keys carry one hash tag (redcar would otherwise refuse some multi-key
//! commands as CROSSSLOT, which a standalone server never does); scripts declare every key
//! they touch (a proxy cannot see the keys a script body uses: docs/security.md, "Tenants").

use crate::redirects::write_config;
use crate::support::{Redcar, RedisCluster, RedisServer, RespClient, Value};

/// Each user's rules, as redcar's `acl` and (selectors as one argument each) `ACL SETUSER`.
const USERS: &[(&str, &str)] = &[
    (
        "u0",
        "on >pw ~app:* %R~ro:* %W~wo:* &chan:* +@all -@dangerous",
    ),
    (
        "u1",
        "on >pw ~a:* +get +mget +exists (~b:* +set +del) (%R~c:* +@read)",
    ),
    ("u2", "on >pw allkeys &x* +publish +spublish (~k* +get)"),
    (
        "u3",
        "on >pw ~[a-c]?:* ~x\\** %W~* +@write +@read -@scripting +eval_ro",
    ),
    (
        "u4",
        "on >pw allkeys allchannels -@all +@hash -hset +@string +touch",
    ),
];

/// Command templates: `K` is replaced by a key, `C` by a channel.
const TEMPLATES: &[&str] = &[
    "GET K",
    "SET K v",
    "SET K v GET",
    "MGET K K",
    "MSET K v K v",
    "DEL K K",
    "EXISTS K K",
    "INCR K",
    "APPEND K x",
    "GETDEL K",
    "STRLEN K",
    "TOUCH K",
    "TYPE K",
    "OBJECT ENCODING K",
    "EXPIRE K 100",
    "COPY K K",
    "LPUSH K x",
    "LMOVE K K LEFT LEFT",
    "HSET K f v",
    "HGET K f",
    "HGETALL K",
    "SORT K",
    "SORT K STORE K",
    "BITFIELD K GET u8 0",
    "BITFIELD K SET u8 0 1",
    "BITFIELD_RO K GET u8 0",
    "ZUNIONSTORE K 2 K K",
    "ZRANGESTORE K K 0 -1",
    "XADD K * f v",
    "EVAL_RO return(1) K",
    "EVAL return(1) K",
    "EVAL return(0)",
    "PUBLISH C m",
    "SPUBLISH C m",
    "PING",
    "ECHO x",
    "DBSIZE",
    "KEYS *",
    "FLUSHDB",
];

const KEYS: &[&str] = &[
    "app:1", "ro:1", "wo:1", "a:1", "b:1", "c:1", "ab:1", "k1", "x*1", "xy", "other",
];
const CHANNELS: &[&str] = &["chan:1", "x", "xy", "other"];

/// A small deterministic generator (the stream is the same on every run).
struct Lcg(u64);

impl Lcg {
    fn pick<'a>(&mut self, from: &[&'a str]) -> &'a str {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        from[(self.0 >> 33) as usize % from.len()]
    }
}

/// One generated command line (keys under one hash tag; `EVAL` with its key count).
fn generate(rng: &mut Lcg) -> Vec<String> {
    let template = rng.pick(TEMPLATES);
    let mut line: Vec<String> = Vec::new();
    for word in template.split(' ') {
        match word {
            "K" => line.push(format!("{}{{t}}", rng.pick(KEYS))),
            "C" => line.push(rng.pick(CHANNELS).to_string()),
            w => line.push(w.to_string()),
        }
    }
    if line[0].starts_with("EVAL") {
        let keys = line.len() - 2;
        line.insert(2, keys.to_string());
    }
    line
}

/// `ACL SETUSER` takes a selector as one argument.
fn setuser_words(rules: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut open = false;
    for word in rules.split(' ') {
        if open {
            let last = out.last_mut().expect("open selector");
            last.push(' ');
            last.push_str(word);
            open = !word.ends_with(')');
        } else {
            out.push(word.to_string());
            open = word.starts_with('(') && !word.ends_with(')');
        }
    }
    out
}

/// The refusal, when the reply is one (`NOPERM ...`).
fn refusal(v: &Value) -> Option<String> {
    v.error()
        .filter(|e| e.starts_with("NOPERM"))
        .map(str::to_string)
}

fn logged_in(mut c: RespClient, user: &str) -> RespClient {
    assert_eq!(c.q(&["AUTH", user, "pw"]), Value::simple("OK"), "{user}");
    c
}

#[test]
fn every_decision_and_refusal_is_the_redis_servers() {
    let redis = RedisServer::start();
    let mut yaml = String::from("auth:\n  users:\n");
    for (name, rules) in USERS {
        let mut setuser = vec!["ACL".to_string(), "SETUSER".into(), name.to_string()];
        setuser.extend(setuser_words(rules));
        let args: Vec<&str> = setuser.iter().map(String::as_str).collect();
        assert_eq!(redis.cmd(&args), Value::simple("OK"), "{rules}");
        let escaped = rules.replace('\\', "\\\\");
        yaml.push_str(&format!("    - name: {name}\n      acl: \"{escaped}\"\n"));
    }
    let cluster = RedisCluster::start(3, 0);
    let config = write_config(&yaml);
    let redcar = Redcar::start_with(&cluster.seeds(), &["--config", config.path_str()]);
    let mut rng = Lcg(48);
    let (mut compared, mut refused) = (0, 0);
    for (name, rules) in USERS {
        let mut ours = logged_in(redcar.client(), name);
        let mut theirs = logged_in(redis.client(), name);
        for _ in 0..120 {
            let line = generate(&mut rng);
            let args: Vec<&str> = line.iter().map(String::as_str).collect();
            let (want, got) = (refusal(&theirs.q(&args)), refusal(&ours.q(&args)));
            assert_eq!(got, want, "user {name} `{rules}`: {line:?}");
            compared += 1;
            refused += usize::from(want.is_some());
        }
    }
    eprintln!("{refused} of {compared} generated commands refused, by both");
    // The stream exercises both sides of the rules.
    assert!(refused > 0 && refused < compared, "{refused} of {compared}");
}
