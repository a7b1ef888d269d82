#!/usr/bin/env python3
"""Skew reproduction: LIFO client pools behind a round-robin L4 front, one slow proxy.

Two subcommands (bench/skew.sh runs both; see bench/README.md and docs/skew.md):

  skew.py run  --instances H:P,... --admins H:P,... --out RUN.json [options]
      Starts, inside this process, a round-robin TCP front (the "load balancer") in front of
      the given redcar instances and a client that simulates app servers with LIFO connection
      pools. Samples connections per instance (from each instance's admin /metrics) and
      request latency every second, and writes everything to RUN.json.

  skew.py plot --without A.json --with B.json --img-dir DIR
      Draws one PNG per run (connections per instance, the slow instance's share, latency)
      with the same axes, and prints a summary (Markdown table) to stdout.

The front adds the injected delay: every chunk a client sends towards the slow instance is
forwarded DELAY seconds later (in order). From the client's side that is the same as the
instance answering DELAY later; redcar itself is not modified.

The client: requests arrive as a Poisson process at BASE req/s, with a PEAK req/s burst of
PEAK_LEN seconds after every BASE_LEN seconds of base load, spread at random over POOLS app
servers. Each app server has its own pool: a request borrows the most recently returned
connection (LIFO, like commons-pool2 behind Jedis and lettuce), opens a new one through the
front when none is idle, runs one GET or SET and returns the connection. A connection the
server closed (redcar's client.max_age) is noticed when borrowed (EOF already read:
testOnBorrow) or by the pool's evictor (testWhileIdle); a request whose connection is closed
under it is retried once on a new connection. The evictor also closes connections idle for
IDLE_EVICT seconds (commons-pool2's minEvictableIdleTime; 0 = the pool never shrinks).

Only the standard library is needed for `run`; `plot` needs matplotlib.
"""

import argparse
import asyncio
import json
import random
import re
import sys
import time

# ---------------------------------------------------------------- the front (load balancer)


class Front:
    """Round-robin TCP front: each accepted connection goes to the next instance."""

    def __init__(self, instances, slow, delay):
        self.instances = instances  # [(host, port)]
        self.slow = slow
        self.delay = delay
        self.next = 0
        # client-side local port -> instance index, so the client can attribute requests
        self.by_port = {}
        self.opened = [0] * len(instances)
        self.server = None
        self.tasks = set()

    async def start(self):
        self.server = await asyncio.start_server(self.accept, "127.0.0.1", 0)
        return self.server.sockets[0].getsockname()[1]

    async def stop(self):
        self.server.close()
        for t in list(self.tasks):
            t.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)

    def accept(self, creader, cwriter):
        idx = self.next % len(self.instances)
        self.next += 1
        self.opened[idx] += 1
        self.by_port[cwriter.get_extra_info("peername")[1]] = idx
        task = asyncio.ensure_future(self.serve(idx, creader, cwriter))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def serve(self, idx, creader, cwriter):
        host, port = self.instances[idx]
        try:
            ureader, uwriter = await asyncio.open_connection(host, port)
        except OSError:
            cwriter.close()
            return
        delay = self.delay if idx == self.slow else 0.0
        up = asyncio.ensure_future(self.pump_up(creader, uwriter, delay))
        down = asyncio.ensure_future(self.pump(ureader, cwriter))
        try:
            # Either side closing ends the pair (redcar closing at max_age, the pool evicting).
            await asyncio.wait([up, down], return_when=asyncio.FIRST_COMPLETED)
        finally:
            up.cancel()
            down.cancel()
            for w in (uwriter, cwriter):
                w.close()
            await asyncio.gather(up, down, return_exceptions=True)

    @staticmethod
    async def pump(reader, writer):
        try:
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        except (ConnectionError, OSError):
            pass

    @staticmethod
    async def pump_up(reader, writer, delay):
        """Client -> instance; with a delay, each chunk leaves `delay` s after it arrived."""
        if delay <= 0:
            return await Front.pump(reader, writer)
        queue = asyncio.Queue()

        async def sender():
            while True:
                due, data = await queue.get()
                if data is None:
                    return
                wait = due - time.monotonic()
                if wait > 0:
                    await asyncio.sleep(wait)
                writer.write(data)
                await writer.drain()

        send = asyncio.ensure_future(sender())
        try:
            while data := await reader.read(65536):
                queue.put_nowait((time.monotonic() + delay, data))
            queue.put_nowait((0, None))
            await send  # deliver what is still delayed, then end
        except (ConnectionError, OSError):
            pass
        finally:
            send.cancel()


# ---------------------------------------------------------------- RESP (just enough for GET/SET)


def encode(*args):
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)


async def read_reply(reader):
    line = await reader.readuntil(b"\r\n")
    kind, rest = line[:1], line[1:-2]
    if kind in (b"+", b":"):
        return rest
    if kind == b"-":
        raise RuntimeError(rest.decode(errors="replace"))
    if kind == b"$":
        n = int(rest)
        return None if n < 0 else (await reader.readexactly(n + 2))[:-2]
    raise RuntimeError(f"unexpected reply {line!r}")


# ---------------------------------------------------------------- the client (LIFO pools)


class Conn:
    def __init__(self, reader, writer, now):
        self.reader = reader
        self.writer = writer
        self.born = now
        self.returned = now
        self.port = writer.get_extra_info("sockname")[1]

    def dead(self):
        return self.reader.at_eof() or self.writer.is_closing()

    def close(self):
        self.writer.close()


class Pool:
    """One app server's pool: LIFO, unbounded, idle connections kept unless evicted."""

    def __init__(self, port, stats):
        self.port = port
        self.idle = []  # stack: the most recently returned connection is last
        self.stats = stats

    async def open(self):
        reader, writer = await asyncio.open_connection("127.0.0.1", self.port)
        self.stats["opened"] += 1
        return Conn(reader, writer, time.monotonic())

    async def borrow(self):
        while self.idle:
            conn = self.idle.pop()
            if conn.dead():  # testOnBorrow: the server closed it (max_age)
                self.stats["closed_by_server"] += 1
                conn.close()
                continue
            return conn, False
        return await self.open(), True

    def give_back(self, conn):
        conn.returned = time.monotonic()
        self.idle.append(conn)

    def evict(self, now, idle_evict):
        """The evictor: drop dead connections (testWhileIdle) and long-idle ones."""
        keep = []
        for conn in self.idle:
            if conn.dead():
                self.stats["closed_by_server"] += 1
                conn.close()
            elif idle_evict > 0 and now - conn.returned >= idle_evict:
                self.stats["evicted_idle"] += 1
                conn.close()
            else:
                keep.append(conn)
        self.idle = keep


async def request(pool, front, rec, key, timeout):
    start = time.monotonic()
    cmd = encode("SET", key, "v" * 32) if random.random() < 0.5 else encode("GET", key)
    new_conn = retried = False
    for attempt in (0, 1):
        conn = None
        try:
            if attempt == 0:
                conn, fresh = await pool.borrow()
            else:  # the pool's other idle connections may be closing too: open a new one
                conn, fresh = await pool.open(), True
            new_conn |= fresh
            conn.writer.write(cmd)
            await conn.writer.drain()
            await asyncio.wait_for(read_reply(conn.reader), timeout)
        except (asyncio.IncompleteReadError, ConnectionError, OSError) as e:
            # Closed under us (the server's FIN crossed our command): retry once, new connection.
            if conn is not None:
                conn.close()
            if attempt == 0:
                retried = True
                pool.stats["retried"] += 1
                inst = None if conn is None else front.by_port.get(conn.port)
                if inst is not None:
                    pool.stats["retried_per_instance"][inst] += 1
                continue
            rec(start, None, None, new_conn, retried, repr(e))
            return
        except (asyncio.TimeoutError, RuntimeError) as e:
            if conn is not None:
                conn.close()
            rec(start, None, None, new_conn, retried, repr(e))
            return
        inst = front.by_port.get(conn.port)
        pool.give_back(conn)
        rec(start, time.monotonic() - start, inst, new_conn, retried, None)
        return


def rate_at(t, a):
    cycle = a.base_len + a.peak_len
    return a.peak if (t % cycle) >= a.base_len else a.base


# ---------------------------------------------------------------- sampling


async def http_get(addr, path):
    host, port = addr
    reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), 2)
    try:
        writer.write(f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nConnection: close\r\n\r\n".encode())
        data = await asyncio.wait_for(reader.read(), 2)
    finally:
        writer.close()
    return data.split(b"\r\n\r\n", 1)[-1].decode(errors="replace")


CONNS_RE = re.compile(r'^redcar_client_connections\{listener="tcp"\}\s+([0-9.eE+-]+)', re.M)
MAXAGE_RE = re.compile(r"^redcar_clients_closed_max_age_total(?:\{[^}]*\})?\s+([0-9.eE+-]+)", re.M)


async def scrape(addr):
    """-> (tcp client connections, clients closed at max_age so far), None when unreachable."""
    try:
        body = await http_get(addr, "/metrics")
    except (OSError, asyncio.TimeoutError):
        return None, None
    m = CONNS_RE.search(body)
    a = MAXAGE_RE.search(body)
    return (int(float(m.group(1))) if m else None), (int(float(a.group(1))) if a else 0)


def pct(values, q):
    if not values:
        return None
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def parse_addrs(s):
    out = []
    for part in s.split(","):
        host, port = part.rsplit(":", 1)
        out.append((host, int(port)))
    return out


async def run(a):
    instances = parse_addrs(a.instances)
    admins = parse_addrs(a.admins)
    if len(instances) != len(admins):
        sys.exit("error: --instances and --admins must list the same number of addresses")
    n = len(instances)
    random.seed(a.seed)
    front = Front(instances, a.slow, a.delay)
    port = await front.start()
    stats = {"opened": 0, "closed_by_server": 0, "evicted_idle": 0, "retried": 0, "errors": 0,
             "retried_per_instance": [0] * n}
    pools = [Pool(port, stats) for _ in range(a.pools)]
    records = []  # (start, latency or None, instance, new_conn, retried, error)

    def rec(start, lat, inst, new_conn, retried, err):
        records.append((start, lat, inst, new_conn, retried, err))
        if err:
            stats["errors"] += 1
            print(f"  request error at t={start - t0:.1f}s (retried: {retried}): {err}", file=sys.stderr)

    t0 = time.monotonic()
    tasks = set()

    async def arrivals():
        rnd = random.Random(a.seed)
        t = 0.0
        i = 0
        while True:
            t += rnd.expovariate(rate_at(t, a)) if a.poisson else 1.0 / rate_at(t, a)
            if t >= a.duration:
                return
            wait = t0 + t - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            i += 1
            pool = pools[rnd.randrange(len(pools))]
            task = asyncio.ensure_future(request(pool, front, rec, f"skew:{i % 1000}", a.timeout))
            tasks.add(task)
            task.add_done_callback(tasks.discard)

    async def evictor():
        while True:
            await asyncio.sleep(a.evict_every)
            now = time.monotonic()
            for p in pools:
                p.evict(now, a.idle_evict)

    samples = []

    async def sampler():
        next_at = t0 + 1.0
        last_rec = 0
        while True:
            await asyncio.sleep(max(0.0, next_at - time.monotonic()))
            t = round(next_at - t0, 3)
            next_at += 1.0
            scraped = await asyncio.gather(*(scrape(x) for x in admins))
            window = records[last_rec:]
            last_rec = len(records)
            lats = [r[1] for r in window if r[1] is not None]
            per_inst = [0] * n
            for r in window:
                if r[2] is not None:
                    per_inst[r[2]] += 1
            samples.append(
                {
                    "t": t,
                    "rate": rate_at(t - 0.5, a),
                    "conns": [c for c, _ in scraped],
                    "closed_max_age": [m for _, m in scraped],
                    "pool_idle": sum(len(p.idle) for p in pools),
                    "requests": per_inst,
                    "errors": sum(1 for r in window if r[5]),
                    "p50_ms": None if not lats else 1000 * pct(lats, 0.50),
                    "p99_ms": None if not lats else 1000 * pct(lats, 0.99),
                }
            )
            s = samples[-1]
            if a.verbose:
                print(
                    f"  t={t:5.0f}s rate={s['rate']:3d}/s conns={s['conns']} reqs={per_inst} "
                    f"p50={s['p50_ms'] or 0:.1f}ms p99={s['p99_ms'] or 0:.1f}ms",
                    file=sys.stderr,
                )

    bg = [asyncio.ensure_future(evictor()), asyncio.ensure_future(sampler())]
    await arrivals()
    # the last sample (t = duration) is taken while the pools are still open
    deadline = time.monotonic() + 3
    while len(samples) < int(a.duration) and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    if tasks:
        await asyncio.wait(tasks, timeout=a.timeout + 1)
    for b in bg:
        b.cancel()
    await asyncio.gather(*bg, return_exceptions=True)
    for p in pools:
        for c in p.idle:
            c.close()
    await front.stop()

    lats = [r[1] for r in records if r[1] is not None]
    second_half = [r for r in records if r[0] - t0 >= a.duration / 2]
    lats2 = [r[1] for r in second_half if r[1] is not None]
    result = {
        "label": a.label,
        "params": {
            k: getattr(a, k)
            for k in (
                "instances", "slow", "delay", "duration", "base", "peak", "base_len", "peak_len",
                "pools", "idle_evict", "evict_every", "poisson", "seed", "max_age",
            )
        },
        "front_opened_per_instance": front.opened,
        "stats": stats,
        "requests": len(records),
        "p50_ms": 1000 * pct(lats, 0.50) if lats else None,
        "p90_ms": 1000 * pct(lats, 0.90) if lats else None,
        "p99_ms": 1000 * pct(lats, 0.99) if lats else None,
        "mean_ms": 1000 * sum(lats) / len(lats) if lats else None,
        "p50_ms_second_half": 1000 * pct(lats2, 0.50) if lats2 else None,
        "p99_ms_second_half": 1000 * pct(lats2, 0.99) if lats2 else None,
        "requests_per_instance": [sum(1 for r in records if r[2] == i) for i in range(n)],
        "errors": sorted({r[5] for r in records if r[5]}),
        "samples": samples,
    }
    result["summary"] = summarize(result)
    with open(a.out, "w") as f:
        json.dump(result, f, indent=1)
    s = result["summary"]
    print(
        f"{a.label}: slow instance's share of connections: end {fmt_share(s['share_end'])}, "
        f"second half {fmt_share(s['share_second_half'])}; of requests (second half) "
        f"{fmt_share(s['req_share_second_half'])}; latency p50 {result['p50_ms']:.1f} ms, "
        f"p90 {result['p90_ms']:.1f} ms, p99 {result['p99_ms']:.1f} ms, mean {result['mean_ms']:.1f} ms; {len(records)} requests, {stats['errors']} errors, "
        f"{stats['opened']} connections opened, {stats['closed_by_server']} closed by redcar, "
        f"{stats['evicted_idle']} evicted idle, {stats['retried']} retried "
        f"(per instance {stats['retried_per_instance']})",
        file=sys.stderr,
    )
    return 0 if stats["errors"] == 0 else 1


def summarize(r):
    slow = r["params"]["slow"]
    samples = [s for s in r["samples"] if None not in s["conns"]]
    half = [s for s in samples if s["t"] > r["params"]["duration"] / 2]

    def share(rows, key):
        tot = sum(sum(s[key]) for s in rows)
        return None if tot == 0 else sum(s[key][slow] for s in rows) / tot

    end = samples[-1] if samples else None
    return {
        "share_end": None if not end or sum(end["conns"]) == 0 else end["conns"][slow] / sum(end["conns"]),
        "conns_end": end["conns"] if end else None,
        "share_second_half": share(half, "conns"),
        "req_share_second_half": share(half, "requests"),
        "mean_conns_second_half": (
            None if not half else [round(sum(s["conns"][i] for s in half) / len(half), 1) for i in range(len(half[0]["conns"]))]
        ),
    }


def fmt_ms(x):
    return "n/a" if x is None else f"{x:.1f}"


def fmt_share(x):
    return "n/a" if x is None else f"{x:.2f}"


# ---------------------------------------------------------------- plot


def plot(a):
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        sys.exit(
            "error: matplotlib is missing. Install it into the venv that runs this script:\n"
            f"  {sys.executable} -m pip install matplotlib"
        )
    runs = []
    for path in (a.without, a.with_):
        with open(path) as f:
            runs.append(json.load(f))
    ymax_i = max(max((c or 0) for s in r["samples"] for c in s["conns"]) for r in runs)
    ymax_l = max(max((s["p99_ms"] or 0) for s in r["samples"]) for r in runs)
    for r, name in zip(runs, ("skew-without-max-age.png", "skew-with-max-age.png")):
        p = r["params"]
        slow = p["slow"]
        t = [s["t"] for s in r["samples"]]
        n = len(r["samples"][0]["conns"])
        fig, axes = plt.subplots(3, 1, figsize=(8, 7.2), sharex=True, gridspec_kw={"height_ratios": [3, 2, 2]})
        title = (
            f"{r['label']}: 4 redcar behind a round-robin front, instance {slow} +{p['delay'] * 1000:.0f} ms; "
            f"{p['pools']} LIFO pools, {p['base']}→{p['peak']} req/s"
        )
        fig.suptitle(title, fontsize=10)
        cycle = p["base_len"] + p["peak_len"]
        for ax in axes:
            start = p["base_len"]
            while start < p["duration"]:
                ax.axvspan(start, min(start + p["peak_len"], p["duration"]), color="0.92", lw=0)
                start += cycle
            ax.grid(True, alpha=0.3)
        ax = axes[0]
        for i in range(n):
            ys = [s["conns"][i] for s in r["samples"]]
            if i == slow:
                ax.plot(t, ys, color="tab:red", lw=2.2, label=f"instance {i} (slow, +{p['delay'] * 1000:.0f} ms)")
            else:
                ax.plot(t, ys, lw=1.2, label=f"instance {i}")
        ax.set_ylabel("client connections\n(redcar /metrics)")
        ax.set_ylim(0, ymax_i * 1.1 + 1)
        ax.legend(fontsize=8, loc="upper left", ncol=2)
        ax = axes[1]
        share = [
            (s["conns"][slow] / sum(s["conns"])) if None not in s["conns"] and sum(s["conns"]) else None
            for s in r["samples"]
        ]
        ax.plot(t, share, color="tab:red", lw=1.8, label="slow instance's share of connections")
        rs = [(s["requests"][slow] / sum(s["requests"])) if sum(s["requests"]) else None for s in r["samples"]]
        ax.plot(t, rs, color="tab:purple", lw=1, ls="--", label="… of requests")
        ax.axhline(1 / n, color="k", lw=1, ls=":", label=f"1/{n}")
        ax.set_ylim(0, 1)
        ax.set_ylabel("share")
        ax.legend(fontsize=8, loc="upper left", ncol=3)
        ax = axes[2]
        ax.plot(t, [s["p50_ms"] for s in r["samples"]], lw=1.5, label="p50")
        ax.plot(t, [s["p99_ms"] for s in r["samples"]], lw=1.5, label="p99")
        ax.set_yscale("log")
        ax.set_ylim(0.1, ymax_l * 2)
        ax.set_ylabel("request latency\nper second (ms)")
        ax.set_xlabel("time (s); shaded: peak load")
        ax.legend(fontsize=8, loc="upper left", ncol=2)
        fig.tight_layout()
        out = f"{a.img_dir}/{name}"
        fig.savefig(out, dpi=a.dpi)
        plt.close(fig)
        print(f"wrote {out}", file=sys.stderr)
    # summary table
    print("| run | slow share of connections at the end | … averaged over the second half | "
          "slow share of requests (second half) | mean connections per instance (second half) | "
          "p50 ms | p90 ms | p99 ms | mean ms | p50 / p99 ms (second half) | connections opened | "
          "closed by redcar (max_age) | retried | errors |")
    print("|---|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in runs:
        s = r["summary"]
        print(
            f"| {r['label']} | {fmt_share(s['share_end'])} ({s['conns_end'][r['params']['slow']]} of {sum(s['conns_end'])}) "
            f"| {fmt_share(s['share_second_half'])} | {fmt_share(s['req_share_second_half'])} "
            f"| {' / '.join(str(x) for x in s['mean_conns_second_half'])} "
            f"| {r['p50_ms']:.1f} | {fmt_ms(r.get('p90_ms'))} | {r['p99_ms']:.1f} | {fmt_ms(r.get('mean_ms'))} "
            f"| {r['p50_ms_second_half']:.1f} / {r['p99_ms_second_half']:.1f} "
            f"| {r['stats']['opened']} | {sum(x or 0 for x in r['samples'][-1]['closed_max_age'])} | {r['stats']['retried']} "
            f"| {r['stats']['errors']} |"
        )
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="run one simulation against running redcar instances")
    r.add_argument("--instances", required=True, help="redcar client addresses, H:P,H:P,...")
    r.add_argument("--admins", required=True, help="their admin addresses, same order")
    r.add_argument("--slow", type=int, default=0, help="index of the slow instance (default 0)")
    r.add_argument("--delay", type=float, default=0.2, help="injected delay, seconds (default 0.2)")
    r.add_argument("--duration", type=float, default=80, help="seconds (default 80)")
    r.add_argument("--base", type=int, default=100, help="base rate, req/s (default 100)")
    r.add_argument("--peak", type=int, default=150, help="peak rate, req/s (default 150)")
    r.add_argument("--base-len", type=float, default=10, help="seconds of base load before each peak (default 10)")
    r.add_argument("--peak-len", type=float, default=10, help="seconds each peak lasts (default 10)")
    r.add_argument("--pools", type=int, default=4, help="app servers, each with its own LIFO pool (default 4)")
    r.add_argument("--idle-evict", type=float, default=3,
                   help="close pool connections idle this long, s; 0 = never shrink (default 3)")
    r.add_argument("--evict-every", type=float, default=1, help="evictor period, s (default 1)")
    r.add_argument("--evenly", dest="poisson", action="store_false", help="evenly spaced arrivals, not Poisson")
    r.add_argument("--timeout", type=float, default=5, help="per-request timeout, s (default 5)")
    r.add_argument("--seed", type=int, default=1)
    r.add_argument("--max-age", default="0s", help="redcar's client.max_age in this run (recorded only)")
    r.add_argument("--label", default="run")
    r.add_argument("--out", required=True)
    r.add_argument("-v", "--verbose", action="store_true", help="print every sample")
    p = sub.add_parser("plot", help="draw the PNGs and print the summary table")
    p.add_argument("--without", required=True)
    p.add_argument("--with", dest="with_", required=True)
    p.add_argument("--img-dir", required=True)
    p.add_argument("--dpi", type=int, default=80)
    a = ap.parse_args()
    if a.cmd == "run":
        return asyncio.run(run(a))
    return plot(a)


if __name__ == "__main__":
    sys.exit(main())
