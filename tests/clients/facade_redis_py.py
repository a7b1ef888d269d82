#!/usr/bin/env python3
"""Cluster facade: redis-py's `RedisCluster` pointed at redcar's cluster-facade listener.

    facade_redis_py.py HOST PORT

RedisCluster reads CLUSTER SLOTS strictly at start-up; it must find one primary (redcar, at
PORT) owning every slot. Then SET/GET on keys in many slots and `mget_nonatomic` across slots.
Runs with redis-py's default protocol (RESP3 since redis-py 8) and with `protocol=2`.
Exits 1 at the first mismatch. Run by tests/it/facade.rs (`cargo test --test it facade`).
"""

import os
import sys

try:
    import redis
    from redis.cluster import RedisCluster
except ImportError:
    sys.exit("redis-py is not installed: run scripts/ensure-clients.sh (make test does)")


def fail(msg):
    sys.stderr.write("facade_redis_py: FAIL: %s\n" % msg)
    sys.exit(1)


def eq(what, got, want):
    if got != want:
        fail("%s: expected %r, got %r" % (what, want, got))


def main():
    host, port = sys.argv[1], int(sys.argv[2])
    done = [run(host, port, protocol) for protocol in (None, 2)]
    print("ok: redis-py RedisCluster through the facade (%s)" % "; ".join(done))


def run(host, port, protocol):
    """The checks with `protocol` (None: redis-py's default)."""
    options = {} if protocol is None else {"protocol": protocol}
    rc = RedisCluster(host=host, port=port, decode_responses=True, socket_timeout=10, **options)
    nodes = [(n.host, n.port, n.server_type) for n in rc.get_nodes()]
    eq("nodes from CLUSTER SLOTS", nodes, [(host, port, "primary")])
    p = "facade:py:%d:%s:" % (os.getpid(), protocol)
    keys = [p + str(i) for i in range(20)]
    slots = {rc.keyslot(k) for k in keys}
    if len(slots) < 10:
        fail("the keys should span many slots, got %d" % len(slots))
    for i, k in enumerate(keys):
        eq("SET " + k, rc.set(k, "v%d" % i), True)
    for i, k in enumerate(keys):
        eq("GET " + k, rc.get(k), "v%d" % i)
    eq("MGET across slots", rc.mget_nonatomic(keys), ["v%d" % i for i in range(len(keys))])
    eq("CLUSTER INFO state", rc.cluster_info()["cluster_state"], "ok")
    eq("DEL", rc.delete(*keys), len(keys))
    eq("GET after DEL", rc.get(keys[0]), None)
    rc.close()
    return "%s: %d slots" % ("default protocol" if protocol is None else "RESP%d" % protocol,
                             len(slots))


if __name__ == "__main__":
    try:
        main()
    except redis.RedisError as e:
        fail("%s: %s" % (type(e).__name__, e))
