#!/usr/bin/env python3
"""Proves every check of checker.py can fail: synthetic histories, each with one planted fault.

    tools/chaos/selftest.py        (no cluster, no redcar; a second or so)

A clean history must pass every check, and each planted anomaly must fail exactly the check
meant to catch it; the harmless look-alikes (a lost write that WAIT never confirmed, an
indeterminate INCR that did run, a stale read by replica lag) must not fail anything.
"""

import copy
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from checker import CHECKS, judge  # noqa: E402
from workload import group_keys, mono_key, read_value  # noqa: E402

CFG = {"prefix": "t:", "groups": ["g0"], "readers": ["reader6"]}
K = group_keys("t:", "g0")
MONO = mono_key("t:", "g0", "reader6")


class FakeRedcar:
    def __init__(self, exits=(), rss_kb=10000):
        self.exits, self.rss_max_kb = list(exits), rss_kb


def rec(c, i, op, k, t, ok=True, r=None, e=None, cls=None, v=None):
    out = {"c": c, "i": i, "op": op, "k": k, "t0": t, "t1": t + 0.001, "st": "ok" if ok else "err"}
    if v is not None:
        out["v"] = v
    if ok:
        out["r"] = r
    else:
        out.update(e=e, cls=cls)
    return out


def clean():
    h = [rec("list0", 0, "rpush", K["list"], 1.0, r=1, v="list0:0"),
         rec("list0", 1, "wait", K["list"], 1.1, r=1),
         rec("list0", 2, "rpush", K["list"], 1.2, r=2, v="list0:1"),
         rec("list0", 3, "wait", K["list"], 1.3, r=0),  # not confirmed: may be lost
         rec("list0", 4, "rpush", K["list"], 1.4, ok=False, e="ERR x", cls="definite", v="list0:2"),
         rec("counter3", 0, "incr", K["ctr"], 1.0, r=1),
         rec("counter3", 1, "wait", K["ctr"], 1.1, r=1),
         rec("counter3", 2, "incr", K["ctr"], 1.2, ok=False, e="closed by peer", cls="indeterminate"),
         rec("tx5", 0, "exec", K["txa"], 1.0, r=[1, 1]),
         rec("tx5", 1, "wait", K["txa"], 1.1, r=1),
         rec("reader6", 0, "get", K["read"], 1.0, r=read_value(K["read"])),
         rec("reader6", 1, "incr", MONO, 1.1, r=1),
         rec("reader6", 2, "get", MONO, 1.2, r="0"),  # stale by lag: a statistic only
         rec("reader6", 3, "cread", K["rs"], 1.3, r=["c", "a", "b"],
             v={"cmd": "SMEMBERS", "want": ["a", "b", "c"], "sorted": True}),
         rec("reader6", 4, "cread", K["rl"], 1.3, r=3, v={"cmd": "LLEN", "want": 3, "sorted": False}),
         rec("publisher8", 0, "publish", None, 1.0, r=1, v="publisher8:0"),
         rec("subscriber9", 0, "subscribe", None, 0.9, r=["subscribe", "c", 1]),
         rec("subscriber9", 1, "msg", None, 1.0, v="publisher8:0")]
    # The indeterminate INCR did run (2), the unconfirmed RPUSH was lost.
    state = {K["list"]: ["list0:0"], K["ctr"]: "2", K["txa"]: "1", K["txb"]: "1",
             K["read"]: read_value(K["read"]), MONO: "1"}
    return h, state


# The clean history's two errors fall in a window that allows any error (as redcar-restart's);
# the planted ones at 6.0 in a window that allows only CLUSTERDOWN (as primary-kill's).
FAULT = {"fault": "primary-kill", "t_start": 1.1, "t_end": 9.0, "t_settled": 8.0, "affected": [],
         "allow": [(1.1, 1.5, "all", None), (5.0, 8.0, "all", "CLUSTERDOWN")], "notes": []}


FAULTS = []  # the faults of the case being run (a mutation may adjust them)


def run(h, state, faults=(), redcar=None):
    v = judge(h, state, CFG, copy.deepcopy(list(faults)), redcar or FakeRedcar(), 512)
    return {c for c in CHECKS if v.violations[c]}


def planted():
    """(name, mutate(h, state) -> (h, state, faults, redcar), the check that must fail)."""
    def dup(h, s):
        s[K["list"]] = ["list0:0", "list0:0"]
    def lost(h, s):
        s[K["list"]] = []
    def applied(h, s):
        s[K["list"]] = ["list0:0", "list0:2"]
    def phantom(h, s):
        s[K["list"]] = ["list0:0", "nobody:1"]
    def ctr_low(h, s):
        s[K["ctr"]] = "0"
    def ctr_high(h, s):
        s[K["ctr"]] = "3"
    def tx_half(h, s):
        s[K["txb"]] = "0"
    def nil_read(h, s):
        h.append(rec("reader6", 3, "get", K["read"], 1.3, r=None))
    def wrong_value(h, s):
        h.append(rec("reader6", 3, "get", K["read"], 1.3, r="other"))
    def empty_collection(h, s):
        h.append(rec("reader6", 5, "cread", K["rl"], 1.3, r=[],
                     v={"cmd": "LRANGE", "want": ["a", "b", "c"], "sorted": False}))
    def zero_count(h, s):
        h.append(rec("reader6", 5, "cread", K["rs"], 1.3, r=0,
                     v={"cmd": "SCARD", "want": 3, "sorted": False}))
    def msg_dup(h, s):
        h.append(rec("subscriber9", 2, "msg", None, 1.1, v="publisher8:0"))
    def msg_again(h, s):  # again on a new subscription: allowed (cluster bus lag)
        h.append(rec("subscriber9", 2, "subscribe", None, 1.05, r=["subscribe", "c", 1]))
        h.append(rec("subscriber9", 3, "msg", None, 1.1, v="publisher8:0"))
    def msg_twice_at_upgrade(h, s):  # both processes subscribed for a moment: allowed
        FAULTS.append({**copy.deepcopy(FAULT), "fault": "upgrade", "t_start": 0.95,
                       "t_end": 1.05, "allow": []})
        msg_dup(h, s)
    def upgrade_failed(h, s):
        FAULTS.append({**copy.deepcopy(FAULT), "fault": "upgrade", "t_start": 3.0, "t_end": 4.0,
                       "allow": [], "upgrade_exit": 1,
                       "notes": ["redcar upgrade exited 1: the new process was not ready"]})
    def msg_invented(h, s):
        h.append(rec("subscriber9", 2, "msg", None, 1.1, v="publisher8:99"))
    def sub_lost(h, s, t=1.2):  # told to reconnect in a primary-kill (whose window allows it)
        h.append(rec("subscriber9", 2, "sublost", None, t, ok=False,
                     e="ERR redcar: subscription connection to x lost", cls="definite"))
    def sub_lost_restart(h, s):  # redcar itself restarted: allowed
        FAULTS.append({**copy.deepcopy(FAULT), "fault": "redcar-restart", "t_start": 2.5,
                       "t_end": 3.5, "allow": [(2.5, 3.5, "all", None)]})
        sub_lost(h, s, 3.0)
    def gap(h, s):  # 1.5 s of messages published, none heard
        for n in range(1, 16):
            h.append(rec("publisher8", n, "publish", None, 2.0 + n * 0.1, r=1, v=f"publisher8:{n}"))
        h.append(rec("publisher8", 16, "publish", None, 4.0, r=1, v="publisher8:16"))
        h.append(rec("subscriber9", 2, "msg", None, 4.0, v="publisher8:16"))
        h.append(rec("list0", 9, "wait", K["list"], 5.0, r=1))
    def gap_frozen(h, s):  # the same while the primary holding it was frozen: not judged
        FAULTS.append({**copy.deepcopy(FAULT), "fault": "primary-stop", "t_start": 2.0,
                       "t_end": 4.0, "allow": []})
        gap(h, s)
    def err_outside(h, s):
        h.append(rec("reader6", 3, "get", K["read"], 3.0, ok=False, e="ERR boom", cls="definite"))
    def err_wrong_kind(h, s):  # inside a window, but not an error that window allows
        h.append(rec("reader6", 3, "get", K["read"], 6.0, ok=False, e="ERR boom", cls="definite"))
    def crash(h, s):
        return FakeRedcar(exits=[(2.0, -11, False, 1)])
    def bad_exit(h, s):
        return FakeRedcar(exits=[(2.0, 1, True, 1)])
    def owed(h, s):  # sent 200 ms before SIGTERM, the connection closed with no reply
        FAULTS[0]["t_sigterm"] = 1.5
        h.append({**rec("list0", 5, "rpush", K["list"], 1.3, ok=False, e="closed by peer",
                        cls="indeterminate", v="list0:5"), "t1": 1.6})
    def rss(h, s):
        return FakeRedcar(rss_kb=600 * 1024)
    return [("duplicate value", dup, CHECKS[0]), ("acknowledged write lost", lost, CHECKS[1]),
            ("definite error applied", applied, CHECKS[2]), ("value nobody wrote", phantom, CHECKS[3]),
            ("counter below acknowledged", ctr_low, CHECKS[4]),
            ("counter above attempted", ctr_high, CHECKS[4]),
            ("half a transaction", tx_half, CHECKS[5]), ("nil read", nil_read, CHECKS[6]),
            ("wrong value", wrong_value, CHECKS[6]),
            ("an empty list read for a list that exists", empty_collection, CHECKS[6]),
            ("a set's count read as 0", zero_count, CHECKS[6]),
            ("message twice", msg_dup, CHECKS[7]),
            ("message invented", msg_invented, CHECKS[7]),
            ("message again after a resubscribe (allowed)", msg_again, None),
            ("message twice while an upgrade moved the subscriber (allowed)",
             msg_twice_at_upgrade, None),
            ("an upgrade in place failed", upgrade_failed, CHECKS[13]),
            ("error between faults", err_outside, CHECKS[8]),
            ("error a window does not allow", err_wrong_kind, CHECKS[8]),
            ("redcar crashed", crash, CHECKS[9]), ("exit 1 on SIGTERM", bad_exit, CHECKS[9]),
            ("a reply owed at SIGTERM not delivered", owed, CHECKS[9]),
            ("RSS over the limit", rss, CHECKS[10]),
            ("the subscriber lost its connection in a node's fault", sub_lost, CHECKS[11]),
            ("the subscriber lost its connection in a redcar restart (allowed)",
             sub_lost_restart, None),
            ("1.5 s of messages lost in a row", gap, CHECKS[12]),
            ("the same while the primary was frozen (not judged)", gap_frozen, None)]


def main():
    failures = 0
    h, s = clean()
    got = run(h, s, [FAULT])
    print(("ok  " if not got else "BAD ") + f"clean history: failed {sorted(got) or 'nothing'}")
    failures += bool(got)
    allowed = clean()
    allowed[0].append(rec("reader6", 3, "get", K["read"], 6.0, ok=False, e="CLUSTERDOWN x",
                          cls="definite"))
    got = run(*allowed, [FAULT])
    print(("ok  " if not got else "BAD ") + "an error the window allows: failed "
          f"{sorted(got) or 'nothing'}")
    failures += bool(got)
    for name, mutate, want in planted():
        h, s = clean()
        FAULTS[:] = [copy.deepcopy(FAULT)]
        redcar = mutate(h, s)
        got = run(h, s, FAULTS, redcar)
        good = got == ({want} if want else set())
        failures += not good
        print(("ok  " if good else "BAD ") + f"{name}: failed {sorted(got) or 'nothing'}")
    print("selftest:", "PASS" if not failures else f"FAIL ({failures})")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
