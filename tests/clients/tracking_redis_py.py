#!/usr/bin/env python3
"""Client-side caching through redcar with redis-py (RESP3, `cache_config=CacheConfig()`).

    tracking_redis_py.py HOST PORT

redis-py turns `CLIENT TRACKING on` for its connection and keeps read replies in a local cache
that the invalidation pushes empty. Checks: a second GET is served from the cache (the nodes
count no GET for it), another client's SET invalidates it, and the next GET reads the new value
from the nodes. Run by tests/it/tracking.rs; exits 1 with a message at the first mismatch.
"""

import sys
import time

try:
    import redis
    from redis.cache import CacheConfig
except ImportError:
    sys.exit("redis-py is not installed: run scripts/ensure-clients.sh (make test does)")


def fail(msg):
    sys.stderr.write("tracking_redis_py: FAIL: %s\n" % msg)
    sys.exit(1)


def gets(plain):
    """GET calls the primaries counted (INFO commandstats through redcar sums them)."""
    stats = plain.info("commandstats")
    return stats.get("cmdstat_get", {}).get("calls", 0)


def main():
    host, port = sys.argv[1], int(sys.argv[2])
    # redis-py 8 refuses client-side caching unless HELLO names Redis 7.4 or later; redcar
    # says 7.0.0 (the nodes here are 7.0, whose CLIENT TRACKING is all this needs).
    redis.connection.CacheProxyConnection.MIN_ALLOWED_VERSION = "7.0.0"
    cached = redis.Redis(host=host, port=port, protocol=3, cache_config=CacheConfig())
    plain = redis.Redis(host=host, port=port, protocol=2)
    plain.set("py:cc:k", "one")
    if cached.get("py:cc:k") != b"one":
        fail("first GET")
    before = gets(plain)
    for _ in range(5):
        if cached.get("py:cc:k") != b"one":
            fail("GET served from the cache")
    if gets(plain) != before:
        fail("GETs reached the nodes: %d -> %d" % (before, gets(plain)))
    plain.set("py:cc:k", "two")
    deadline = time.monotonic() + 5
    while True:
        # redis-py reads pending invalidations before serving from the cache.
        value = cached.get("py:cc:k")
        if value == b"two":
            break
        if time.monotonic() > deadline:
            fail("still %r from the cache after another client's SET" % value)
        time.sleep(0.05)
    if gets(plain) <= before:
        fail("the GET after the invalidation did not reach the nodes")
    print("tracking_redis_py: ok")


main()
