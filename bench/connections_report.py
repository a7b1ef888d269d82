"""Markdown tables for bench/connections.sh: reads its results directory, prints to stdout.

    python3 connections_report.py RESULTS_DIR DELAY_US

Files read (written by connections.sh):
    pr-NET-CLIENT.json   per_request.php output      pr-NET-CLIENT.tw   TIME_WAIT counts (k=v)
    ping-NET-direct.json, ping-simulated-relay.json  PING round trips (per_request.php ping)
    rl-NET-TARGET-SCENARIO-MODE.json                 ratelimit.py output
    slotscost-NET.json   CLUSTER SLOTS size and fetch time (per_request.php slotscost)
    redcar-NET.kv        redcar start-up / idle CPU, refreshes, redirects (k=v)
    pr-NET-CLIENT.cpu    redcar's CPU clock ticks over a per-request run, and its requests
    rl-NET-TARGET-SCENARIO-MODE.cpu  redcar's CPU clock ticks over a rate-limit run
"""

import json
import os
import sys

NETS = ("simulated", "loopback")
DIRECT = ("phpredis-cluster", "predis-cluster")
REDCAR = ("redcar-tcp", "redcar-unix")
LABEL = {
    "phpredis-cluster": "phpredis RedisCluster (direct)",
    "predis-cluster": "predis cluster (direct)",
    "redcar-tcp": "phpredis Redis → redcar TCP",
    "redcar-unix": "phpredis Redis → redcar Unix socket",
    "cluster": "redis-py RedisCluster (direct)",
    "redcar": "redis-py Redis → redcar TCP",
    "unix": "redis-py Redis → redcar Unix socket",
}


def load_json(path):
    with open(path) as f:
        return json.loads(f.read())


def load_kv(path):
    with open(path) as f:
        return dict(line.strip().split("=", 1) for line in f if "=" in line)


# Commands per rate-limit request: INCRBY + EXPIRE per key (bench/ratelimit.py SCENARIOS).
RL_COMMANDS = {"fixed": 2, "mixed2": 4, "mixed10": 20}
CLK_TCK = os.sysconf("SC_CLK_TCK")


def read_words(path):
    """The whitespace-separated numbers in PATH, or None when it does not exist."""
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return [int(w) for w in f.read().split()]


def f2(x):
    return f"{x:.2f}"


def yes(ok):
    return "**met**" if ok else "**not met**"


def relay_cost(res, delay_us):
    direct = os.path.join(res, "ping-simulated-direct.json")
    relay = os.path.join(res, "ping-simulated-relay.json")
    if not (os.path.exists(direct) and os.path.exists(relay)):
        return
    d, r = load_json(direct)["rtt_ms"], load_json(relay)["rtt_ms"]
    n = load_json(relay)["pings"]
    print("## The simulated network: what the relay adds")
    print()
    print(f"{n} PINGs on one open connection to the first node, direct and through its relay")
    print(f"(`--delay-us {delay_us}`: {2 * delay_us / 1000:.2f} ms per round trip intended).")
    print()
    print("| path | mean ms | p50 ms | p99 ms |")
    print("|---|---:|---:|---:|")
    print(f"| direct (loopback) | {d['mean']:.3f} | {d['p50']:.3f} | {d['p99']:.3f} |")
    print(f"| through the relay | {r['mean']:.3f} | {r['p50']:.3f} | {r['p99']:.3f} |")
    # A difference of two p99s of independent samples means nothing (it can be negative).
    print(f"| added by the relay | {r['mean'] - d['mean']:.3f} | {r['p50'] - d['p50']:.3f} | — |")
    print()


def per_request(res, net):
    runs = {}
    for c in DIRECT + REDCAR:
        path = os.path.join(res, f"pr-{net}-{c}.json")
        if os.path.exists(path):
            runs[c] = (load_json(path), load_kv(os.path.join(res, f"pr-{net}-{c}.tw")))
    if not runs:
        return None
    n = next(iter(runs.values()))[0]["requests"]
    print(f"## Per-request workload: {net} network")
    print()
    print(f"{n} requests per client, each: connect, 10 commands, close (bench/php/per_request.php).")
    print("TIME_WAIT: sockets that entered TIME_WAIT during the run, by the port at either end:")
    print("the cluster's addresses as clients see them" + (" (the relay ports)" if net == "simulated" else ""))
    print("and redcar's TCP port." + (
        " `relay→node` are the relay's own sockets toward the real node ports (one per"
        " connection the relay carried): an artefact of the simulation, not counted as the client's."
        if net == "simulated" else ""))
    print()
    extra = " | TIME_WAIT relay→node" if net == "simulated" else ""
    print(
        "| client | ms/request mean | p50 | p99 | connect→first reply ms mean | p50 | p99 "
        f"| TIME_WAIT → cluster | TIME_WAIT → redcar{extra} | redcar node connections before → after "
        "| redcar CPU µs/request |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|" + ("---:|" if extra else "") + "---|---:|")
    cpu_note = "redcar CPU µs/request: redcar's user + system CPU over the run (warm-up included) per request: accept, 10 commands, close."
    for c, (j, tw) in runs.items():
        q, f = j["req_ms"], j["first_ms"]
        cells = [
            LABEL[c], f2(q["mean"]), f2(q["p50"]), f2(q["p99"]), f2(f["mean"]), f2(f["p50"]),
            f2(f["p99"]), tw["cluster"], tw["redcar"],
        ]
        if extra:
            cells.append(tw["relay_node"])
        cells.append(f"{tw['node_conns_before']} → {tw['node_conns_after']}")
        cpu = read_words(os.path.join(res, f"pr-{net}-{c}.cpu"))
        cells.append(f"{cpu[0] / CLK_TCK * 1e6 / cpu[1]:.0f}" if cpu and cpu[1] else "")
        print("| " + " | ".join(cells) + " |")
    print()
    print(cpu_note)
    print()
    direct = [c for c in DIRECT if c in runs]
    if not direct:
        return runs
    best_req = min(direct, key=lambda c: runs[c][0]["req_ms"]["mean"])
    best_first = min(direct, key=lambda c: runs[c][0]["first_ms"]["mean"])
    print(
        f"redcar vs the best direct client (lowest mean: `{best_req}` for the whole request, "
        f"`{best_first}` for the first reply); above 1 = redcar faster:"
    )
    print()
    print("| through | first reply: mean ratio | p50 ratio | whole request: mean ratio | p50 ratio |")
    print("|---|---:|---:|---:|---:|")
    for c in REDCAR:
        if c not in runs:
            continue
        j = runs[c][0]
        bf, bq = runs[best_first][0]["first_ms"], runs[best_req][0]["req_ms"]
        print(
            f"| {LABEL[c]} | {bf['mean'] / j['first_ms']['mean']:.2f}× "
            f"| {bf['p50'] / j['first_ms']['p50']:.2f}× | {bq['mean'] / j['req_ms']['mean']:.2f}× "
            f"| {bq['p50'] / j['req_ms']['p50']:.2f}× |"
        )
    print()
    return runs


def targets(pr):
    rows = []
    sim, loop = pr.get("simulated"), pr.get("loopback")

    def best(runs, key):
        return min(runs[c][0][key]["mean"] for c in DIRECT if c in runs)

    if sim and any(c in sim for c in DIRECT):
        for c in REDCAR:
            if c not in sim:
                continue
            j, tw = sim[c]
            r = best(sim, "first_ms") / j["first_ms"]["mean"]
            rows.append((f"simulated: connect→first reply ≥ 5× faster than the best direct client ({c})",
                         f"{r:.2f}×", r >= 5))
            r = best(sim, "req_ms") / j["req_ms"]["mean"]
            rows.append((f"simulated: whole request ≥ 1.3× faster ({c})", f"{r:.2f}×", r >= 1.3))
    for net, runs in pr.items():
        if not runs:
            continue
        for c in REDCAR:
            if c in runs:
                n = int(runs[c][1]["cluster"])
                rows.append((f"{net}: 0 new TIME_WAIT toward cluster ports ({c})", str(n), n == 0))
        if "redcar-unix" in runs:
            tw = runs["redcar-unix"][1]
            n = int(tw["cluster"]) + int(tw["redcar"]) + int(tw.get("relay_node", 0))
            rows.append((f"{net}: 0 TIME_WAIT at all over the Unix socket", str(n), n == 0))
    if loop and any(c in loop for c in DIRECT):
        for c in REDCAR:
            if c in loop:
                b, m = best(loop, "req_ms"), loop[c][0]["req_ms"]["mean"]
                rows.append((f"loopback: no slower than direct, mean ms/request ({c})",
                             f"{m:.2f} vs {b:.2f}", m <= b))
    if not rows:
        return
    print("## The issue's targets")
    print()
    print("| target | measured | |")
    print("|---|---:|---|")
    for what, got, ok in rows:
        print(f"| {what} | {got} | {yes(ok)} |")
    print()


def rate_limit(res, net):
    found = {}
    for name in sorted(os.listdir(res)):
        if name.startswith(f"rl-{net}-") and name.endswith(".json"):
            j = load_json(os.path.join(res, name))
            cpu = read_words(os.path.join(res, name[: -len(".json")] + ".cpu"))
            commands = j["requests"] * RL_COMMANDS.get(j["scenario"], 0)
            j["cpu_per_m"] = f"{cpu[0] / CLK_TCK / (commands / 1e6):.1f}" if cpu and commands else ""
            found[(j["scenario"], j["mode"], j["target"])] = j
    if not found:
        return
    print(f"## Rate-limit workload: {net} network")
    print()
    print("Per request: INCRBY key 1 + EXPIRE key 60 for each key, one pipeline (bench/ratelimit.py).")
    print("Fixed rate: split over the client processes, open loop, latency from each request's")
    print("scheduled start (a client that cannot keep up shows it in latency and in req/s below the rate).")
    print("`max`: the same client processes in a closed loop, as fast as they go.")
    print()
    print("redcar CPU s/M: redcar's CPU seconds per million commands (INCRBY and EXPIRE each count).")
    print()
    print("| scenario | rate | client | req/s | avg ms | p50 ms | p99 ms | max ms | errors | redcar CPU s/M |")
    print("|---|---|---|---:|---:|---:|---:|---:|---:|---:|")
    order = {"fixed": 0, "mixed2": 1, "mixed10": 2}
    for (s, m, t), j in sorted(found.items(), key=lambda kv: (order[kv[0][0]], kv[0][1] == "max", kv[0][2])):
        print(
            f"| {s} | {m} | {LABEL.get(t, t)} | {j['rps']:.0f} | {j['avg_ms']:.2f} | {j['p50_ms']:.2f} "
            f"| {j['p99_ms']:.2f} | {j['max_ms']:.2f} | {j['errors']} | {j['cpu_per_m']} |"
        )
    print()
    pairs = [(s, m) for (s, m, t) in found if t == "cluster"]
    if pairs:
        print("redcar relative to the direct client (latency: direct / redcar, above 1 = redcar faster;")
        print("req/s: redcar / direct):")
        print()
        print("| scenario | rate | through | avg | p50 | p99 | req/s |")
        print("|---|---|---|---:|---:|---:|---:|")
        for s, m in sorted(set(pairs), key=lambda p: (order[p[0]], p[1] == "max")):
            d = found[(s, m, "cluster")]
            for t in ("redcar", "unix"):
                if (s, m, t) not in found:
                    continue
                r = found[(s, m, t)]
                print(
                    f"| {s} | {m} | {LABEL[t]} | {d['avg_ms'] / r['avg_ms']:.2f}× | {d['p50_ms'] / r['p50_ms']:.2f}× "
                    f"| {d['p99_ms'] / r['p99_ms']:.2f}× | {r['rps'] / d['rps']:.2f}× |"
                )
        print()


def topology(res):
    rows = [n for n in NETS if os.path.exists(os.path.join(res, f"slotscost-{n}.json"))]
    if not rows:
        return
    print("## The topology reply and redcar's cost")
    print()
    print("CLUSTER SLOTS as a client fetches it (phpredis `rawCommand`, i.e. read + build the PHP")
    print("arrays), from the first node's address as clients see it; bytes = the RESP2 reply's size.")
    print("`open`: on one open connection; `fresh`: connect + CLUSTER SLOTS + close, what a")
    print("per-request cluster client pays before it can route its first command.")
    print()
    print("| network | ranges | bytes | open: mean ms | p50 | fresh: mean ms | p50 | p99 |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for n in rows:
        c = load_json(os.path.join(res, f"slotscost-{n}.json"))
        o, f = c["open_ms"], c["fresh_ms"]
        print(f"| {n} | {c['ranges']} | {c['bytes']} | {f2(o['mean'])} | {f2(o['p50'])} | "
              f"{f2(f['mean'])} | {f2(f['p50'])} | {f2(f['p99'])} |")
    print()
    kvs = [(n, os.path.join(res, f"redcar-{n}.kv")) for n in rows]
    kvs = [(n, load_kv(p)) for n, p in kvs if os.path.exists(p)]
    if kvs:
        print("redcar on the same cluster: start to /readyz, CPU (user + system, 10 ms ticks) at ready,")
        print("over 10 idle seconds after (two periodic topology refreshes) and in total for the")
        print("network's runs; topology refreshes, rejected topologies, MOVED/ASK redirects and")
        print("command errors counted over the whole run.")
        print()
        print("| network | ready ms | CPU ms at ready | CPU ms idle 10 s | refreshes idle | CPU ms total | refreshes | rejected | redirects | errors |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for n, kv in kvs:
            g = lambda k: kv.get(k, "—")
            print(f"| {n} | {g('ready_ms')} | {g('startup_cpu_ms')} | {g('idle_cpu_ms')} | "
                  f"{g('idle_refreshes')} | {g('total_cpu_ms')} | {g('refreshes')} | {g('rejected')} | "
                  f"{g('redirects')} | {g('errors')} |")
        print()


def main():
    res, delay_us = sys.argv[1], int(sys.argv[2])
    pr = {}
    for net in NETS:
        pr[net] = per_request(res, net)
    targets(pr)
    relay_cost(res, delay_us)
    topology(res)
    for net in NETS:
        rate_limit(res, net)


if __name__ == "__main__":
    main()
