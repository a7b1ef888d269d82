#!/usr/bin/env python3
"""Smoke test: redis-py (with hiredis when installed) against redcar as if it were one Redis node.

    smoke_redis_py.py HOST PORT

Connects with a plain `redis.Redis` (not RedisCluster), exercises every data type, a pipeline,
a transaction, WATCH, BLPOP, pub/sub, EVAL, SCAN and an error reply, and exits 1 with a message
at the first mismatch. Everything runs twice: with redis-py's defaults (RESP3 since redis-py 8:
`HELLO 3` on connect) and with `protocol=2`. Run by
tests/it/clients.rs (`cargo test --test it clients`); the interpreter is target/pyenv/bin/python
(scripts/ensure-clients.sh).
"""

import os
import sys
import time

try:
    import redis
except ImportError:
    sys.exit("redis-py is not installed: run scripts/ensure-clients.sh (make test does)")

checks = 0


def fail(msg):
    sys.stderr.write("smoke_redis_py: FAIL: %s\n" % msg)
    sys.exit(1)


def eq(what, got, want):
    global checks
    checks += 1
    if got != want:
        fail("%s: expected %r, got %r" % (what, want, got))


def msg(ps, timeout=5):
    """The next pub/sub message as (type, pattern, channel, data); fails after `timeout`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        m = ps.get_message(timeout=max(0.01, deadline - time.monotonic()))
        if m is not None:
            return (m["type"], m["pattern"], m["channel"], m["data"])
    fail("no pub/sub message within %ss" % timeout)


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: smoke_redis_py.py HOST PORT")
    host, port = sys.argv[1], int(sys.argv[2])
    notes = []
    for protocol in (None, 2):
        notes.append(run(host, port, protocol))
    print("smoke_redis_py: ok: %d checks, redis-py %s, hiredis %s; %s" % (
        checks, redis.__version__, hiredis_version(), "; ".join(notes)))


def run(host, port, protocol):
    """All the checks on connections made with `protocol` (None: redis-py's default)."""
    options = {} if protocol is None else {"protocol": protocol}

    def connect():
        return redis.Redis(host=host, port=port, socket_timeout=10, decode_responses=True,
                           **options)

    r = connect()
    hello = r.execute_command("HELLO")
    if isinstance(hello, list):  # RESP2: a flat list of names and values
        hello = dict(zip(hello[::2], hello[1::2]))
    spoken = hello["proto"]
    if protocol is None and int(redis.__version__.split(".")[0]) >= 8:
        eq("redis-py's default is RESP3", spoken, 3)
    elif protocol is not None:
        eq("HELLO proto", spoken, protocol)

    p = "smoke:py:%d:%d:" % (os.getpid(), spoken)
    written = set()

    def k(name):
        key = p + name
        written.add(key)
        return key

    eq("PING", r.ping(), True)
    eq("ECHO", r.echo("hello"), "hello")

    # strings
    eq("SET", r.set(k("str"), "value"), True)
    eq("GET", r.get(k("str")), "value")
    eq("GET missing", r.get(p + "missing"), None)
    eq("INCR", r.incr(k("counter")), 1)
    eq("INCRBY", r.incrby(p + "counter", 41), 42)
    eq("SET EX", r.set(k("ex"), "x", ex=100), True)

    # MSET/MGET over keys in (almost surely) different slots: redcar splits and merges them
    many = {k("m%d" % i): "v%d" % i for i in range(20)}
    eq("MSET", r.mset(many), True)
    names = list(many) + [p + "missing"]
    eq("MGET", r.mget(names), list(many.values()) + [None])

    # DEL of several keys across slots
    gone = [p + "m%d" % i for i in range(5)]
    eq("DEL", r.delete(*gone, p + "missing"), 5)
    written.difference_update(gone)
    eq("EXISTS", r.exists(*gone, p + "m5", p + "m6"), 2)

    # hash
    eq("HSET", r.hset(k("hash"), mapping={"a": "1", "b": "2", "c": "3"}), 3)
    eq("HGET", r.hget(p + "hash", "b"), "2")
    eq("HGETALL", r.hgetall(p + "hash"), {"a": "1", "b": "2", "c": "3"})
    eq("HINCRBY", r.hincrby(p + "hash", "a", 9), 10)
    eq("HDEL", r.hdel(p + "hash", "c"), 1)
    eq("HLEN", r.hlen(p + "hash"), 2)

    # list
    eq("RPUSH", r.rpush(k("list"), "a", "b", "c"), 3)
    eq("LPUSH", r.lpush(p + "list", "z"), 4)
    eq("LRANGE", r.lrange(p + "list", 0, -1), ["z", "a", "b", "c"])
    eq("LPOP", r.lpop(p + "list"), "z")
    eq("RPOP", r.rpop(p + "list"), "c")
    eq("LLEN", r.llen(p + "list"), 2)

    # set
    eq("SADD", r.sadd(k("set"), "x", "y", "z", "x"), 3)
    eq("SMEMBERS", r.smembers(p + "set"), {"x", "y", "z"})
    eq("SISMEMBER", r.sismember(p + "set", "y"), True)
    eq("SREM", r.srem(p + "set", "y"), 1)
    eq("SCARD", r.scard(p + "set"), 2)

    # sorted set
    eq("ZADD", r.zadd(k("zset"), {"a": 1, "b": 2.5, "c": 3}), 3)
    eq("ZRANGE WITHSCORES", r.zrange(p + "zset", 0, -1, withscores=True),
       [("a", 1.0), ("b", 2.5), ("c", 3.0)])
    eq("ZSCORE", r.zscore(p + "zset", "b"), 2.5)
    eq("ZINCRBY", r.zincrby(p + "zset", 10, "a"), 11.0)
    eq("ZRANK", r.zrank(p + "zset", "a"), 2)
    eq("ZRANGEBYSCORE", r.zrangebyscore(p + "zset", 2, 5), ["b", "c"])

    # expiry
    eq("TTL of EX key in range", 0 < r.ttl(p + "ex") <= 100, True)
    eq("EXPIRE", r.expire(p + "str", 500), True)
    eq("TTL after EXPIRE in range", 0 < r.ttl(p + "str") <= 500, True)
    eq("PERSIST", r.persist(p + "str"), True)
    eq("TTL persistent", r.ttl(p + "str"), -1)
    eq("TTL missing", r.ttl(p + "missing"), -2)

    # pipeline (no MULTI): commands for keys on every node, answered in order
    pipe = r.pipeline(transaction=False)
    for i in range(10):
        pipe.set(k("pipe%d" % i), i)
    pipe.incr(p + "counter")
    for i in range(10):
        pipe.get(p + "pipe%d" % i)
    pipe.mget([p + "pipe0", p + "pipe9", p + "missing"])
    pipe.hget(p + "hash", "a")
    got = pipe.execute()
    eq("pipeline", got,
       [True] * 10 + [43] + [str(i) for i in range(10)] + [["0", "9", None], "10"])

    # EVAL with a key (and the script cache: EVALSHA of the same body)
    script = "redis.call('SET', KEYS[1], ARGV[1]); return redis.call('GET', KEYS[1])"
    eq("EVAL", r.eval(script, 1, k("lua"), "from-lua"), "from-lua")
    sha = r.script_load(script)
    eq("EVALSHA", r.evalsha(sha, 1, p + "lua", "again"), "again")

    # error replies are raised by the client, and the connection stays usable
    try:
        r.incr(p + "str")
        fail("INCR on a non-number: expected an error")
    except redis.ResponseError as e:
        eq("INCR on non-number error", "not an integer" in str(e), True)
    try:
        r.lpush(p + "str", "x")
        fail("LPUSH on a string: expected an error")
    except redis.ResponseError as e:
        eq("WRONGTYPE error", str(e).startswith("WRONGTYPE"), True)
    eq("usable after errors", r.get(p + "str"), "value")

    # transaction: MULTI … EXEC, every key with the hash tag {tx} (one slot, as redcar requires)
    tx = r.pipeline(transaction=True)
    tx.set(k("{tx}a"), "1")
    tx.incrby(p + "{tx}a", 41)
    tx.rpush(k("{tx}list"), "x", "y")
    tx.hset(k("{tx}hash"), "f", "v")
    tx.get(p + "{tx}a")
    eq("MULTI/EXEC", tx.execute(), [True, 42, 2, 1, "42"])
    # a command failing inside EXEC (WRONGTYPE) fails alone, the others run
    tx = r.pipeline(transaction=True)
    tx.lpush(p + "{tx}a", "x")
    tx.incr(p + "{tx}a")
    got = tx.execute(raise_on_error=False)
    eq("WRONGTYPE inside EXEC", (isinstance(got[0], redis.ResponseError),
                                 str(got[0]).startswith("WRONGTYPE"), got[1]), (True, True, 43))

    # WATCH: an optimistic update that succeeds, one that another client's write aborts, and
    # the retrying helper r.transaction()
    with r.pipeline() as pipe:
        pipe.watch(p + "{tx}a")
        current = int(pipe.get(p + "{tx}a"))
        pipe.multi()
        pipe.set(p + "{tx}a", current + 1)
        pipe.get(p + "{tx}a")
        eq("WATCH … EXEC", pipe.execute(), [True, "44"])
    other = connect()
    with r.pipeline() as pipe:
        pipe.watch(p + "{tx}a")
        eq("write by another client", other.set(p + "{tx}a", "100"), True)
        pipe.multi()
        pipe.set(p + "{tx}a", "lost")
        try:
            pipe.execute()
            fail("EXEC after a watched key changed: expected WatchError")
        except redis.WatchError:
            eq("EXEC after a watched key changed raises WatchError", True, True)
    other.close()
    eq("GET after the aborted transaction", r.get(p + "{tx}a"), "100")

    def bump(pipe):
        value = int(pipe.get(p + "{tx}a"))
        pipe.multi()
        pipe.set(p + "{tx}a", value + 1)

    eq("r.transaction() with WATCH", r.transaction(bump, p + "{tx}a"), [True])
    eq("GET after r.transaction()", r.get(p + "{tx}a"), "101")

    # BLPOP: with data it returns at once; on an empty list it gives None after its timeout
    eq("RPUSH queue", r.rpush(k("{tx}queue"), "job1", "job2"), 2)
    t0 = time.monotonic()
    got = r.blpop([p + "{tx}queue"], timeout=5)
    waited = time.monotonic() - t0
    eq("BLPOP with data", tuple(got or ()), (p + "{tx}queue", "job1"))
    eq("BLPOP with data returns at once (%.3fs)" % waited, waited < 1, True)
    t0 = time.monotonic()
    eq("BLPOP on an empty list", r.blpop([p + "{tx}empty"], timeout=0.1), None)
    waited = time.monotonic() - t0
    eq("BLPOP waited its 0.1 s timeout (%.3fs)" % waited, 0.09 <= waited < 5, True)

    # pub/sub: subscribe (channel and pattern) on one connection, publish from another
    chan = p + "news"
    ps = r.pubsub()
    ps.subscribe(chan)
    eq("SUBSCRIBE", msg(ps), ("subscribe", None, chan, 1))
    ps.psubscribe(p + "n*")
    eq("PSUBSCRIBE", msg(ps), ("psubscribe", None, p + "n*", 2))
    # Redis Cluster semantics: PUBLISH counts the receivers on the node it reached (0 or 2)
    receivers = r.publish(chan, "hello")
    eq("PUBLISH receivers (%d)" % receivers, receivers in (0, 2), True)
    got = sorted([msg(ps), msg(ps)], key=lambda m: m[0])
    eq("message and pmessage", got,
       [("message", None, chan, "hello"), ("pmessage", p + "n*", chan, "hello")])
    ps.unsubscribe(chan)
    eq("UNSUBSCRIBE", msg(ps), ("unsubscribe", None, chan, 1))
    ps.punsubscribe(p + "n*")
    eq("PUNSUBSCRIBE", msg(ps), ("punsubscribe", None, p + "n*", 0))
    ps.close()
    eq("PUBSUB NUMSUB after unsubscribing", r.pubsub_numsub(chan), [(chan, 0)])
    eq("PUBLISH with nobody listening", r.publish(chan, "again"), 0)

    # SCAN visits every node: exactly the keys written under the prefix
    seen = set(r.scan_iter(match=p + "*", count=50))
    if seen != written:
        fail("SCAN: missing %r, unexpected %r" % (sorted(written - seen), sorted(seen - written)))
    eq("DBSIZE >= written", r.dbsize() >= len(written), True)

    # clean up
    eq("DEL all", r.delete(*written), len(written))
    eq("SCAN after cleanup", list(r.scan_iter(match=p + "*")), [])

    return "RESP%d%s: %d keys" % (spoken, "" if protocol else " (the default)", len(written))


def hiredis_version():
    try:
        import hiredis
        return hiredis.__version__
    except ImportError:
        return "not installed"


if __name__ == "__main__":
    try:
        main()
    except redis.RedisError as e:
        fail("unexpected %s: %s" % (type(e).__name__, e))
