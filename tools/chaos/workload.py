"""The client processes: each runs one role against redcar and logs every operation it tries.

Run as `python workload.py CONFIG.json NAME ROLE` by soak.py (one process, one connection each,
one command at a time). Every operation becomes one JSON line in hist/NAME.jsonl:
  {"c": client, "i": n, "op": ..., "k": key, "v": value, "t0": start, "t1": end,
   "st": "ok"|"err", "r": reply, "e": error, "cls": "definite"|"indeterminate"}
Times are time.monotonic(), which is CLOCK_MONOTONIC on Linux and so comparable across
processes. SIGTERM ends the loop after the operation in progress.
"""

import json
import os
import random
import signal
import socket
import sys
import time

from resp import Conn, ConnError, ReplyError

EXPECT = {"rpush": int, "incr": int, "wait": int, "publish": int, "get": (str, type(None))}


def classify(exc):
    """definite: the command did not run; indeterminate: it may have run."""
    if isinstance(exc, ConnError):
        return "indeterminate" if exc.sent else "definite"
    msg = str(exc)
    if "may have been applied" in msg or "may have run" in msg or "timed out" in msg:
        return "indeterminate"
    return "definite"


def group_keys(prefix, tag):
    """The keys of one hash-tag group; every workload key lives in one such group (one slot)."""
    base = f"{prefix}{{{tag}}}"
    keys = {"list": base + ":list", "ctr": base + ":ctr", "txa": base + ":tx:a",
            "txb": base + ":tx:b", "read": base + ":r"}
    keys.update((kind, f"{base}:{kind}") for kind in COLLECTIONS)
    return keys


# Collections readers read (issue 47): each created by setup before the load and never written,
# so every read has one right answer, and an empty list/set/hash, 0, -2 or "none" (what a
# replica answers for a key a migration already moved) is a wrong read. Per kind: the setup
# command (after the key) and the reads, each (command, arguments after the key, right answer,
# whether the reply's order is undefined and it is compared sorted).
COLLECTIONS = {
    "rl": (("RPUSH", "a", "b", "c"), [
        ("LRANGE", (0, -1), ["a", "b", "c"], False), ("LLEN", (), 3, False),
        ("LINDEX", (1,), "b", False), ("TYPE", (), "list", False)]),
    "rs": (("SADD", "a", "b", "c"), [
        ("SMEMBERS", (), ["a", "b", "c"], True), ("SCARD", (), 3, False),
        ("SISMEMBER", ("b",), 1, False), ("EXISTS", (), 1, False)]),
    "rh": (("HSET", "f1", "v1", "f2", "v2"), [
        ("HGETALL", (), ["f1", "f2", "v1", "v2"], True), ("HLEN", (), 2, False),
        ("HGET", ("f2",), "v2", False), ("HSTRLEN", ("f1",), 2, False)]),
    "rz": (("ZADD", 1, "a", 2, "b"), [
        ("ZRANGE", (0, -1, "WITHSCORES"), ["a", "1", "b", "2"], False), ("ZCARD", (), 2, False),
        ("ZSCORE", ("b",), "2", False), ("TTL", (), -1, False)]),
    "rx": (("XADD", "1-1", "f", "v"), [
        ("XRANGE", ("-", "+"), [["1-1", ["f", "v"]]], False), ("XLEN", (), 1, False)]),
}


def absent_looking(reply):
    """What a read of a key that does not exist answers (nil, empty, 0, -2, none)."""
    return reply in (None, [], 0, -2, "none", "")


def mono_key(prefix, tag, client):
    return f"{prefix}{{{tag}}}:mono:{client}"


def read_value(key):
    """What setup stores in each read key (a reader checks it gets exactly this)."""
    return "v:" + key


def plain(r):
    """A reply as JSON can hold it (an error inside an array becomes "-ERR ...")."""
    if isinstance(r, list):
        return [plain(x) for x in r]
    if isinstance(r, Exception):
        return "-" + str(r)
    return r


class Client:
    def __init__(self, cfg, name):
        self.cfg, self.name = cfg, name
        self.conn = Conn("127.0.0.1", cfg["port"], timeout=cfg["client_timeout"])
        if cfg.get("host"):
            self.conn.addr = (cfg["host"], cfg["port"])
        self.out = open(os.path.join(cfg["dir"], "hist", name + ".jsonl"), "w", buffering=1 << 16)
        self.n = 0
        self.pending = set()  # keys written since the last WAIT that confirmed (see WAIT)
        self.stop = False
        self.rng = random.Random(f"{cfg['seed']}:{name}")

    def record(self, op, key, t0, t1, ok, r=None, exc=None, v=None, cover=None):
        rec = {"c": self.name, "i": self.n, "op": op, "k": key, "t0": round(t0, 6),
               "t1": round(t1, 6), "st": "ok" if ok else "err"}
        if v is not None:
            rec["v"] = v
        if cover and cover != [key]:
            rec["cover"] = cover
        if ok:
            rec["r"] = plain(r)
        else:
            rec["e"] = str(exc)[:300]
            rec["cls"] = classify(exc)
        self.out.write(json.dumps(rec) + "\n")
        self.n += 1
        return rec

    def do(self, op, key, *args, v=None, cover=None):
        if self.conn.sock is None:
            self.pending = set()  # a new connection: its WAIT covers none of the old writes
        t0 = time.monotonic()
        try:
            r = self.conn.call(*args)
        except (ReplyError, ConnError) as e:
            return self.record(op, key, t0, time.monotonic(), False, exc=e, v=v, cover=cover)
        want = EXPECT.get(op)
        if want and not isinstance(r, want):
            # A reply of the wrong type is a protocol bug; logged as an error the client saw
            # (indeterminate: whatever produced it may have run the command).
            e = ConnError(f"{args[0]} answered {plain(r)!r}", sent=True)
            return self.record(op, key, t0, time.monotonic(), False, exc=e, v=v, cover=cover)
        return self.record(op, key, t0, time.monotonic(), True, r=r, v=v, cover=cover)

    def pace(self, t_start, failed):
        # Paced so ten Python clients cannot starve six redis-servers and redcar of CPU (which
        # would cause failovers of its own); after an error wait a little so a down redcar is
        # not hammered with reconnects.
        gap = 1.0 / self.cfg["rate"] + (0.02 if failed else 0.0)
        left = t_start + gap - time.monotonic()
        if left > 0:
            time.sleep(left)

    def pick(self):
        return self.rng.choice(self.cfg["groups"])

    def run(self, role):
        signal.signal(signal.SIGTERM, lambda *_: setattr(self, "stop", True))
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # the soak stops us on Ctrl-C
        step = getattr(self, "step_" + role)
        seq = 0
        while not self.stop:
            t = time.monotonic()
            failed = step(seq)
            seq += 1
            self.pace(t, failed)
        self.conn.close()
        self.out.close()

    def write_then_wait(self, rec):
        """WAIT 1 100 right after a write: a reply >= 1 means a replica has it.

        A WAIT covers every write on this connection that no WAIT confirmed yet (Redis's
        semantics), so its record lists their keys: the checker excuses a WAIT error during a
        fault when one of them is on the faulty shard, not only the write just before it."""
        if rec["st"] != "ok":
            return True
        self.pending.add(rec["k"])
        cover = sorted(self.pending)
        w = self.do("wait", rec["k"], "WAIT", 1, 100, cover=cover)
        if w["st"] == "ok" and w["r"] >= 1:
            self.pending = set()
        return w["st"] != "ok"

    def step_list(self, seq):
        key = group_keys(self.cfg["prefix"], self.pick())["list"]
        value = f"{self.name}:{seq}"
        return self.write_then_wait(self.do("rpush", key, "RPUSH", key, value, v=value))

    def step_counter(self, seq):
        key = group_keys(self.cfg["prefix"], self.pick())["ctr"]
        return self.write_then_wait(self.do("incr", key, "INCR", key))

    def step_tx(self, seq):
        keys = group_keys(self.cfg["prefix"], self.pick())
        a, b = keys["txa"], keys["txb"]
        if self.conn.sock is None:
            self.pending = set()
        t0 = time.monotonic()
        exec_sent = False
        try:
            for args in (("MULTI",), ("INCR", a), ("INCR", b)):
                self.conn.call(*args)
            exec_sent = True
            r = self.conn.call("EXEC")
        except (ReplyError, ConnError) as e:
            if isinstance(e, ConnError) and not exec_sent:
                e.sent = False  # a transaction never EXECed never ran
            # Start the next transaction on a fresh connection: no MULTI state left behind.
            self.conn.close()
            if not exec_sent and isinstance(e, ReplyError):
                e = ReplyError(f"(queueing) {e}")
            self.record("exec", a, t0, time.monotonic(), False, exc=e)
            return True
        if r is None or not isinstance(r, list) or any(isinstance(x, Exception) for x in r):
            self.record("exec", a, t0, time.monotonic(), False,
                        exc=ReplyError(f"EXEC answered {r!r}"))
            return True
        rec = self.record("exec", a, t0, time.monotonic(), True, r=r)
        return self.write_then_wait(rec)

    def step_reader(self, seq):
        tag = self.pick()
        dice = self.rng.random()
        if dice < 0.5:
            key = group_keys(self.cfg["prefix"], tag)["read"]
            rec = self.do("get", key, "GET", key)
            return rec["st"] != "ok"
        if dice < 0.75:
            kind = self.rng.choice(sorted(COLLECTIONS))
            key = group_keys(self.cfg["prefix"], tag)[kind]
            command, args, right, unordered = self.rng.choice(COLLECTIONS[kind][1])
            # v: the right answer; the checker sorts the reply first where order is not defined.
            want = {"cmd": command, "want": right, "sorted": unordered}
            rec = self.do("cread", key, command, key, *args, v=want)
            return rec["st"] != "ok"
        key = mono_key(self.cfg["prefix"], tag, self.name)
        # INCR then GET of a counter only this client writes: the GET may lag (a replica), so a
        # lower value is a statistic; nil is wrong (setup created it).
        if self.do("incr", key, "INCR", key)["st"] != "ok":
            return True
        return self.do("get", key, "GET", key)["st"] != "ok"

    def step_publisher(self, seq):
        msg = f"{self.name}:{seq}"
        return self.do("publish", None, "PUBLISH", self.cfg["channel"], msg, v=msg)["st"] != "ok"

    def step_subscriber(self, seq):
        if self.conn.sock is None:
            rec = self.do("subscribe", None, "SUBSCRIBE", self.cfg["channel"])
            if rec["st"] != "ok":
                self.conn.close()  # not subscribed: start over on a fresh connection
            return rec["st"] != "ok"
        t0 = time.monotonic()
        try:
            m = self.conn.read(timeout=0.2)
        except socket.timeout:
            return False
        except (ConnError, ReplyError) as e:
            self.conn.close()
            self.record("sublost", None, t0, time.monotonic(), False, exc=e)
            return True
        if isinstance(m, list) and len(m) == 3 and m[0] == "message":
            self.record("msg", None, t0, time.monotonic(), True, v=m[2])
        return False


def main():
    cfg_path, name, role = sys.argv[1:4]
    with open(cfg_path) as f:
        cfg = json.load(f)
    c = Client(cfg, name)
    if role == "subscriber":
        c.cfg = dict(cfg, rate=1000.0)  # it only waits for messages; pacing would drop none
    c.run(role)


if __name__ == "__main__":
    main()
