"""Rate-limit workload of the connection benchmarks (bench/connections.sh).

The scenarios of the Go rate-limit service: every request is INCRBY key 1 + EXPIRE key 60 for
each of its keys, sent as one pipeline (no MULTI):

    fixed    1 fixed key
    mixed2   1 fixed key + 1 random key
    mixed10  5 fixed keys + 5 random keys

    python ratelimit.py TARGET SCENARIO MODE SECONDS [WORKERS]

TARGET   cluster:H:P,H:P,...  redis-py RedisCluster (cluster-aware, pipeline per node, written to
                              every node before any reply is read)
         redcar:H:P           redis-py Redis to redcar over TCP
         unix:PATH            redis-py Redis to redcar's Unix socket
MODE     NUMBER   a fixed rate (requests/s), split evenly over WORKERS client processes (default
                  2, staggered), open loop: each request has a scheduled start and its latency is
                  measured from there, so a client that falls behind shows it (no coordinated
                  omission), and req/s shows the rate it really reached
         max      WORKERS closed-loop client processes as fast as they can

Prints one JSON object: requests, seconds, req/s, latency avg/p50/p99/max in ms, errors.
Each client opens its connections once (a long-running service), then is warmed up. RESP2
(protocol=2) for both: redcar refuses HELLO 3.
"""

import json
import multiprocessing
import random
import sys
import time

import redis
from redis.cluster import ClusterNode, RedisCluster

SCENARIOS = {"fixed": (1, 0), "mixed2": (1, 1), "mixed10": (5, 5)}
RANDOM_KEYS = 1_000_000


def connect(target):
    kind, _, rest = target.partition(":")
    if kind == "cluster":
        nodes = []
        for hp in rest.split(","):
            host, _, port = hp.rpartition(":")
            nodes.append(ClusterNode(host, int(port)))
        return RedisCluster(startup_nodes=nodes, protocol=2, socket_timeout=2)
    if kind == "redcar":
        host, _, port = rest.rpartition(":")
        return redis.Redis(host=host, port=int(port), protocol=2, socket_timeout=2)
    if kind == "unix":
        return redis.Redis(unix_socket_path=rest, protocol=2, socket_timeout=2)
    raise SystemExit(f"unknown target {target!r}")


def request(client, fixed, rand):
    keys = [f"rl:fixed:{i}" for i in range(fixed)]
    keys += [f"rl:rand:{random.randrange(RANDOM_KEYS)}" for _ in range(rand)]
    pipe = client.pipeline(transaction=False)
    for k in keys:
        pipe.incrby(k, 1)
        pipe.expire(k, 60)
    replies = pipe.execute()
    if len(replies) != 2 * len(keys) or not isinstance(replies[0], int):
        raise RuntimeError(f"unexpected replies {replies!r}")


def warm_up(client, fixed, rand):
    for _ in range(50):
        request(client, fixed, rand)


def worker(target, scenario, seconds, rate, offset):
    """One client process. rate None: closed loop for `seconds`. Otherwise open loop: request i
    starts at start + offset + i/rate, latency counted from that scheduled start."""
    fixed, rand = SCENARIOS[scenario]
    client = connect(target)
    warm_up(client, fixed, rand)
    lat = []
    errors = 0
    start = time.perf_counter()
    i = 0
    while True:
        if rate is None:
            due = time.perf_counter()
            if due >= start + seconds:
                break
        else:
            due = start + offset + i / rate
            if due >= start + seconds:
                break
            wait = due - time.perf_counter()
            if wait > 0:
                time.sleep(wait)
        i += 1
        try:
            request(client, fixed, rand)
        except redis.RedisError:
            errors += 1
        lat.append(time.perf_counter() - due)
    return lat, errors, time.perf_counter() - start


def worker_main(args):
    out = args[-1]
    try:
        out.put(worker(*args[:-1]))
    except Exception as e:  # reported by the parent, which would otherwise wait for a result
        out.put(e)


def run(target, scenario, seconds, rate, workers):
    """WORKERS processes; a fixed rate is split evenly between them (staggered starts)."""
    out = multiprocessing.Queue()
    per = None if rate is None else rate / workers
    procs = [
        multiprocessing.Process(
            target=worker_main,
            args=((target, scenario, seconds, per, 0 if rate is None else w / rate, out),),
        )
        for w in range(workers)
    ]
    for p in procs:
        p.start()
    lat, errors, took = [], 0, 0.0
    for _ in procs:
        got = out.get(timeout=seconds + 120)
        if isinstance(got, Exception):
            for p in procs:
                p.terminate()
            raise SystemExit(f"ratelimit: a worker failed: {got!r}")
        lat += got[0]
        errors += got[1]
        took = max(took, got[2])
    for p in procs:
        p.join()
    return lat, took, errors


def main():
    if len(sys.argv) not in (5, 6) or sys.argv[2] not in SCENARIOS:
        raise SystemExit(__doc__)
    target, scenario, mode, seconds = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
    workers = int(sys.argv[5]) if len(sys.argv) == 6 else 2
    rate = None if mode == "max" else float(mode)
    lat, took, errors = run(target, scenario, seconds, rate, workers)
    lat.sort()
    n = len(lat)
    ms = [x * 1e3 for x in lat]
    print(
        json.dumps(
            {
                "target": target.split(":")[0],
                "scenario": scenario,
                "mode": mode,
                "requests": n,
                "seconds": round(took, 3),
                "rps": round(n / took, 1),
                "avg_ms": sum(ms) / n,
                "p50_ms": ms[n // 2],
                "p99_ms": ms[min(n - 1, int(n * 0.99))],
                "max_ms": ms[-1],
                "errors": errors,
            }
        )
    )


if __name__ == "__main__":
    main()
