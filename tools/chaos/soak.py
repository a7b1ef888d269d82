#!/usr/bin/env python3
"""Entry point of the chaos soak (issue 30): sets up, runs load and faults, checks, reports.

    tools/chaos/soak.py [--seconds 60] [--seed N] [--faults a,b,...] [--redcar PATH]
    tools/chaos/soak.py --target HOST:PORT --cluster HOST:PORT[,...]    (an operator's drill)

By default it starts its own 3+3 Redis Cluster (scripts/cluster.sh, free loopback ports, a temp
dir) and redcar in front of it with --read-policy prefer-replica, runs ~10 client processes
against redcar while injecting a seeded schedule of faults, then reads every key straight from
the cluster and judges the clients' histories (tools/chaos/checker.py). Exit 0: every check
passed; 1: a check failed (the temp dir with every log and history is kept); 2: harness error.
"""

import argparse
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from checker import judge, read_state  # noqa: E402
from cluster import ROOT, Cluster, DirectReader, HarnessError, Redcar, View, parse_addr  # noqa: E402
from faults import ALL, SLACK, TAIL, Injector, schedule  # noqa: E402
from report import render  # noqa: E402
from resp import key_slot  # noqa: E402
from workload import COLLECTIONS, group_keys, mono_key, read_value  # noqa: E402

# A wake-up of the stall watcher this late means the host, not redcar, stopped (stallwatch.py).
STALL_THRESHOLD = 0.5

ROLES = ["list"] * 3 + ["counter"] * 2 + ["tx"] + ["reader"] * 2 + ["publisher", "subscriber"]


def log(msg):
    print(f"{time.strftime('%H:%M:%S')} chaos: {msg}", file=sys.stderr, flush=True)


def parse_args():
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog="Faults are injected only into processes the soak started itself: with --target "
               "and --cluster it runs the workload and the checker against an existing redcar "
               "and cluster and injects no fault (an operator's drill; keys are under --prefix "
               "and deleted at the end; any client error fails a drill). Exit status: 0 every "
               "check passed, 1 a check failed (the temp dir is kept and printed), 2 harness "
               "error or interrupted.")
    ap.add_argument("--seconds", type=float, default=60, help="load duration (default 60)")
    ap.add_argument("--seed", type=int, help="seed of the fault schedule and workload (default random)")
    ap.add_argument("--faults", default=",".join(ALL),
                    help="comma-separated subset of: " + ", ".join(ALL) + " (default all)")
    ap.add_argument("--redcar", default=os.path.join(ROOT, "target", "release", "redcar"),
                    help="redcar binary (default target/release/redcar)")
    ap.add_argument("--target", help="HOST:PORT of an existing redcar (drill mode)")
    ap.add_argument("--cluster", help="HOST:PORT[,...] of the cluster behind --target")
    ap.add_argument("--prefix", help="key prefix (default chaos:<runid>:)")
    ap.add_argument("--rate", type=float, default=150, help="operations/s per client (default 150)")
    ap.add_argument("--rss-limit-mb", type=int, default=512, help="redcar RSS limit (default 512)")
    ap.add_argument("--keep", action="store_true", help="keep the temp dir even when all pass")
    ap.add_argument("--near-cache", action="store_true",
                    help="run redcar with the near cache on for every key (docs/near-cache.md)")
    a = ap.parse_args()
    if bool(a.target) != bool(a.cluster):
        ap.error("--target and --cluster go together")
    a.faults = [f for f in a.faults.split(",") if f] if not a.target else []
    bad = [f for f in a.faults if f not in ALL]
    if bad:
        ap.error(f"unknown fault(s): {', '.join(bad)}")
    if a.prefix and "{" in a.prefix:
        ap.error("--prefix must not contain '{' (the soak puts its own hash tags after it)")
    return a


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def pick_groups(runid, owner, per_owner=4):
    """Hash tags spread evenly over the primaries (so every shard carries every kind of op)."""
    counts, groups = {}, []
    owners = set(owner)
    for i in range(10000):
        tag = f"{runid}.g{i}"
        o = owner[key_slot("{%s}" % tag)]
        if counts.get(o, 0) < per_owner:
            counts[o] = counts.get(o, 0) + 1
            groups.append(tag)
        if len(groups) == per_owner * len(owners):
            break
    return groups


def all_keys(cfg):
    for tag in cfg["groups"]:
        yield from group_keys(cfg["prefix"], tag).values()
        for c in cfg["readers"]:
            yield mono_key(cfg["prefix"], tag, c)


def setup_keys(reader, cfg, need_replica):
    """The keys readers read exist before the load starts, acknowledged by a replica."""
    for tag in cfg["groups"]:
        keys = group_keys(cfg["prefix"], tag)
        k = keys["read"]
        reader.call(k, "SET", k, read_value(k))
        for kind, (setup, _) in COLLECTIONS.items():
            reader.call(keys[kind], "DEL", keys[kind])
            reader.call(keys[kind], setup[0], keys[kind], *setup[1:])
        for c in cfg["readers"]:
            mk = mono_key(cfg["prefix"], tag, c)
            reader.call(mk, "SET", mk, 0)
    for addr, conn in reader.conns.items():
        n = conn.call("WAIT", 1, 2000)
        if need_replica and n < 1:
            raise HarnessError(f"setup writes on {addr} not acknowledged by a replica")


class Run:
    def __init__(self, args):
        self.a = args
        self.seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1 << 31)
        self.runid = os.urandom(3).hex()
        self.dir = tempfile.mkdtemp(prefix="redcar-chaos.")
        self.cluster = self.redcar = None
        self.clients = []
        self.watcher = None
        self.faults = []
        self.cfg = None

    def start_processes(self):
        if self.a.target:
            host, port = parse_addr(self.a.target)
            self.addrs = [parse_addr(s) for s in self.a.cluster.split(",")]
            return host, port
        if not os.access(self.a.redcar, os.X_OK):
            raise HarnessError(f"{self.a.redcar} not found: build it (cargo build --release)")
        log(f"starting a 3+3 cluster in {self.dir}/cluster")
        self.cluster = Cluster(self.dir, log)
        self.cluster.start()
        self.addrs = self.cluster.addrs
        extra = []
        if self.a.near_cache:
            path = os.path.join(self.dir, "near-cache.yaml")
            # Even seeds: a prefix rule (BCAST near lanes, NOLOOP, write-through); odd seeds: a
            # pattern (default tracking on the tracked lanes). Both cover every workload key.
            if self.seed % 2 == 0:
                prefix = self.a.prefix or "chaos:"
                rule, how = f"prefix: \"{prefix}\"", "a prefix rule (BCAST lanes)"
            else:
                rule, how = "pattern: \"*\"", "a pattern (tracked lanes)"
            with open(path, "w") as f:
                f.write(f"near_cache:\n  enabled: true\n  keys:\n    - {rule}\n")
            extra = ["--config", path]
            log(f"near cache on for every key, by {how}")
        self.redcar = Redcar(self.a.redcar, free_port(), free_port(), self.cluster.seeds(),
                             self.dir, log, extra)
        self.redcar.start()
        log(f"redcar on 127.0.0.1:{self.redcar.port}, admin 127.0.0.1:{self.redcar.admin}")
        return "127.0.0.1", self.redcar.port

    def start_clients(self, host, port):
        os.makedirs(os.path.join(self.dir, "hist"))
        names = [f"{role}{i}" for i, role in enumerate(ROLES)]
        self.cfg = {"host": host, "port": port, "dir": self.dir, "seed": self.seed,
                    "prefix": self.a.prefix or f"chaos:{self.runid}:", "rate": self.a.rate,
                    "client_timeout": 3.0, "channel": None, "groups": None,
                    "readers": [n for n, r in zip(names, ROLES) if r == "reader"]}
        self.cfg["channel"] = self.cfg["prefix"] + "chan"
        # Hash tags follow the seed (so do the slots a rerun migrates); the prefix is per run.
        self.cfg["groups"] = pick_groups(f"s{self.seed}", View(self.addrs).owner_map())
        reader = DirectReader(self.addrs)
        try:
            setup_keys(reader, self.cfg, need_replica=self.cluster is not None)
        finally:
            reader.close()
        path = os.path.join(self.dir, "config.json")
        with open(path, "w") as f:
            json.dump(self.cfg, f)
        here = os.path.dirname(os.path.abspath(__file__))
        self.watcher = subprocess.Popen(
            [sys.executable, os.path.join(here, "stallwatch.py"), self.stalls_path(),
             str(STALL_THRESHOLD)], stdin=subprocess.DEVNULL)
        wl = os.path.join(here, "workload.py")
        self.t0 = time.monotonic()
        for name, role in zip(names, ROLES):
            p = subprocess.Popen([sys.executable, wl, path, name, role], stdin=subprocess.DEVNULL)
            self.clients.append(p)

    def stalls_path(self):
        return os.path.join(self.dir, "stalls.jsonl")

    def stop_clients(self):
        if self.watcher is not None:
            self.watcher.terminate()
            self.watcher.wait()
            self.watcher = None
        for p in self.clients:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 8
        for p in self.clients:
            try:
                p.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        bad = [p.returncode for p in self.clients if p.returncode not in (0, -signal.SIGTERM)]
        self.clients = []
        if bad:
            raise HarnessError(f"client process(es) failed: exit {bad}")

    def inject(self, t_load_start):
        inj = Injector(self.cluster, self.redcar, self.cfg, random.Random(f"faults:{self.seed}"), log)
        end = t_load_start + self.a.seconds
        for calm, kind in schedule(self.a.faults, self.seed):
            if time.monotonic() + calm >= end - 1.0:
                break
            time.sleep(calm)
            if self.redcar.note_exit():
                log("redcar is gone: no more faults, on to the checks")
                break
            self.faults.append(inj.run(kind))
        left = end - time.monotonic()
        time.sleep(max(left, TAIL))  # calm at the end: the last fault's aftermath is measured

    def load_history(self):
        hist = []
        for name in sorted(os.listdir(os.path.join(self.dir, "hist"))):
            with open(os.path.join(self.dir, "hist", name)) as f:
                for line in f:
                    if line.strip():
                        hist.append(json.loads(line))
        return hist

    def check(self, t0, t_end):
        hist = self.load_history()
        reader = DirectReader(self.addrs)
        try:
            state = read_state(reader, self.cfg)
        finally:
            reader.close()
        if self.redcar:
            self.redcar.note_exit()
        self.faults = sorted(self.faults + host_stalls(self.stalls_path()), key=lambda f: f["t_start"])
        verdict = judge(hist, state, self.cfg, self.faults, self.redcar, self.a.rss_limit_mb)
        meta = {"seed": self.seed, "seconds": t_end - t0, "clients": len(ROLES),
                "command": " ".join(sys.argv)}
        text = render(hist, self.faults, verdict, t0, meta)
        print(text, flush=True)
        # Kept with the histories on failure: the report and the fault records behind it.
        with open(os.path.join(self.dir, "report.txt"), "w") as f:
            f.write(text + "\n")
        with open(os.path.join(self.dir, "faults.json"), "w") as f:
            json.dump([{k: v for k, v in x.items() if not k.startswith("_")}
                       for x in self.faults], f, indent=1)
        return verdict

    def delete_keys(self):
        reader = DirectReader(self.addrs)
        try:
            for k in list(all_keys(self.cfg)):
                reader.call(k, "DEL", k)
        finally:
            reader.close()

    def cleanup(self):
        try:
            self.stop_clients()
        except HarnessError:
            pass
        if self.redcar:
            self.redcar.stop()
        if self.cluster:
            self.cluster.stop()


def host_stalls(path):
    """The host's stalls seen by stallwatch.py, as fault records whose window allows any error:
    while nothing ran, clients time out whatever redcar does. They are listed in the report."""
    if not os.path.exists(path):
        return []
    records = []
    with open(path) as f:
        for line in f:
            s = json.loads(line)
            records.append({
                "fault": "host-stall", "t_start": s["from"], "t_settled": s["to"],
                "t_end": s["to"] + SLACK, "affected": [],
                "allow": [(s["from"], s["to"] + SLACK, "all", None)],
                "what": f"the host stalled: the soak's watcher woke {s['to'] - s['from']:.2f} s late",
                "notes": ["not injected; nothing on the machine ran on time, so errors are allowed"]})
    return records


def main():
    args = parse_args()
    run = Run(args)
    log(f"seed {run.seed} (rerun with --seed {run.seed}); faults: "
        f"{', '.join(args.faults) or 'none (drill: the soak does not own the processes)'}")
    # SIGTERM ends the run like Ctrl-C: through the finally below, which stops what we started.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    # Also when started with SIGINT ignored (a background job of a script): Ctrl-C must clean up.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    rc, t_start = 2, time.monotonic()
    try:
        host, port = run.start_processes()
        run.start_clients(host, port)
        t0 = run.t0
        log(f"load started: {len(ROLES)} clients for {args.seconds:.0f} s")
        if run.cluster:
            run.inject(t0)
        else:
            time.sleep(args.seconds)
        run.stop_clients()
        t_end = time.monotonic()
        if run.cluster:
            run.cluster.wait_settled()
        verdict = run.check(t0, t_end)
        rc = 0 if verdict.passed else 1
        if not run.cluster:
            run.delete_keys()
    except HarnessError as e:
        log(f"harness error: {e}")
    except KeyboardInterrupt:
        log("interrupted")
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not skip cleanup
        run.cleanup()
    took = time.monotonic() - t_start
    if rc == 2 and not os.listdir(run.dir):  # failed before writing anything: nothing to keep
        os.rmdir(run.dir)
        log(f"HARNESS ERROR: seed {run.seed}")
        return rc
    if rc == 0 and not args.keep:
        shutil.rmtree(run.dir, ignore_errors=True)
        log(f"PASS (seed {run.seed}, {took:.0f} s end to end)")
    else:
        verdict_word = {0: "PASS", 1: "FAIL", 2: "HARNESS ERROR"}[rc]
        log(f"{verdict_word}: seed {run.seed} (rerun: --seed {run.seed}); logs, histories and "
            f"config kept in {run.dir} ({took:.0f} s end to end)")
    return rc


if __name__ == "__main__":
    sys.exit(main())
