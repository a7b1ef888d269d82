"""The checker: reads the final state straight from the cluster and judges the histories.

Each check collects violations; a violation carries the time of the operation it is about (when
there is one) so the report can say in which fault window it happened. Statistics (stale reads
by replica lag, unacknowledged writes lost, pub/sub messages missed) are reported, not judged.
"""

import collections

from resp import key_slot
from workload import absent_looking, group_keys, mono_key, read_value

CHECKS = ("no value duplicated", "no WAIT-acknowledged write lost",
          "no write with a definite error applied", "no value nobody wrote",
          "counters within bounds", "transactions all-or-nothing", "no wrong read",
          "pub/sub: no message duplicated or invented", "error contract (errors only where a fault allows them)",
          "redcar: no crash; on SIGTERM replies owed delivered, exit 0", "redcar: RSS bounded",
          "pub/sub: the subscriber keeps its connection (only a redcar restart may end it)",
          "pub/sub: messages lost in a row span under 1 s (outside redcar restarts, frozen "
          "primaries and host stalls)",
          "redcar: an upgrade in place succeeds")

# A subscription moved to another node loses at most what was published meanwhile: a run of
# lost messages this long (first to last PUBLISH) is a failure where the gap is redcar's.
GAP_LIMIT = 1.0
# Faults during which lost messages are not redcar's gap: the subscriber reconnects after a
# redcar restart; a frozen primary holding the subscription delivers late or loses what its
# cluster-bus links dropped; nothing runs on time in a host stall.
GAP_EXCUSED = ("redcar-restart", "primary-stop", "host-stall")


class Verdict:
    def __init__(self):
        self.violations = {c: [] for c in CHECKS}
        self.stats = collections.OrderedDict()
        self.skipped = set()  # checks that do not apply (drill mode)
        self.outside = set()  # (client, i) of errors no fault window allows

    def fail(self, check, msg, t=None):
        self.violations[check].append((t, msg))

    @property
    def passed(self):
        return not any(self.violations.values())


def by_client(hist):
    out = collections.defaultdict(list)
    for r in hist:
        out[r["c"]].append(r)
    for recs in out.values():
        recs.sort(key=lambda r: r["i"])
    return out


def acked_by_wait(recs):
    """ids (client, i) of ok writes followed at once by a WAIT that returned >= 1."""
    acked = set()
    for a, b in zip(recs, recs[1:]):
        if a["st"] == "ok" and b["op"] == "wait" and b["st"] == "ok" and b["r"] >= 1:
            acked.add((a["c"], a["i"]))
    return acked


def read_state(reader, cfg):
    """Every workload key's final value, read from the slot's primary."""
    state = {}
    for tag in cfg["groups"]:
        k = group_keys(cfg["prefix"], tag)
        state[k["list"]] = reader.call(k["list"], "LRANGE", k["list"], 0, -1)
        for name in ("ctr", "txa", "txb", "read"):
            state[k[name]] = reader.call(k[name], "GET", k[name])
        for c in cfg["readers"]:
            mk = mono_key(cfg["prefix"], tag, c)
            state[mk] = reader.call(mk, "GET", mk)
    return state


def check_lists(v, hist, clients, state, cfg):
    written = {}  # value -> the rpush record
    acked = set()
    for recs in clients.values():
        acked |= acked_by_wait(recs)
    for r in hist:
        if r["op"] == "rpush":
            written[r["v"]] = r
    lost_unacked = 0
    for tag in cfg["groups"]:
        key = group_keys(cfg["prefix"], tag)["list"]
        values = state[key] or []
        seen = collections.Counter(values)
        for val, n in seen.items():
            w = written.get(val)
            if n > 1:
                v.fail(CHECKS[0], f"{key}: {val!r} appears {n} times", w and w["t0"])
            if w is None:
                v.fail(CHECKS[3], f"{key}: {val!r} was never written")
            elif w["k"] != key:
                v.fail(CHECKS[3], f"{val!r} written to {w['k']} but found in {key}", w["t0"])
        for val, w in written.items():
            if w["k"] != key:
                continue
            present = val in seen
            if (w["c"], w["i"]) in acked and not present:
                v.fail(CHECKS[1], f"{key}: {val!r} (RPUSH ok, WAIT >= 1) is missing", w["t0"])
            if w["st"] == "err" and w["cls"] == "definite" and present:
                v.fail(CHECKS[2], f"{key}: {val!r} is present but its RPUSH got a definite "
                       f"error: {w['e']}", w["t0"])
            if w["st"] == "ok" and (w["c"], w["i"]) not in acked and not present:
                lost_unacked += 1
    v.stats["RPUSH ok / acknowledged by WAIT / errors"] = "%d / %d / %d" % (
        sum(1 for r in written.values() if r["st"] == "ok"),
        sum(1 for r in written.values() if (r["c"], r["i"]) in acked),
        sum(1 for r in written.values() if r["st"] == "err"))
    v.stats["unacknowledged RPUSH lost (allowed: async replication)"] = lost_unacked


def _bounds(v, check, key, final, recs, acked, op):
    ok = sum(1 for r in recs if r["op"] == op and r["st"] == "ok")
    indet = sum(1 for r in recs if r["op"] == op and r["st"] == "err" and r["cls"] == "indeterminate")
    low = sum(1 for r in recs if r["op"] == op and (r["c"], r["i"]) in acked)
    val = int(final or 0)
    if val < low:
        v.fail(check, f"{key} = {val}, below the {low} {op.upper()}s acknowledged by WAIT")
    if val > ok + indet:
        v.fail(check, f"{key} = {val}, above the {ok + indet} {op.upper()}s that may have run "
               f"({ok} ok + {indet} indeterminate; the rest failed definitely)")
    return val


def check_counters(v, hist, clients, state, cfg):
    acked = set()
    for recs in clients.values():
        acked |= acked_by_wait(recs)
    per_key = collections.defaultdict(list)
    for r in hist:
        if r["op"] in ("incr", "exec") and r["k"]:
            per_key[r["k"]].append(r)
    for tag in cfg["groups"]:
        k = group_keys(cfg["prefix"], tag)
        _bounds(v, CHECKS[4], k["ctr"], state[k["ctr"]], per_key[k["ctr"]], acked, "incr")
        a = _bounds(v, CHECKS[4], k["txa"], state[k["txa"]], per_key[k["txa"]], acked, "exec")
        b = int(state[k["txb"]] or 0)
        if a != b:
            v.fail(CHECKS[5], f"{k['txa']} = {a} but {k['txb']} = {b}")
        for c in cfg["readers"]:
            mk = mono_key(cfg["prefix"], tag, c)
            _bounds(v, CHECKS[4], mk, state[mk], per_key[mk], set(), "incr")


def check_collection_read(v, r):
    """A read of a collection setup created (workload.COLLECTIONS): the one right answer."""
    want = r["v"]
    got = r["r"]
    if want.get("sorted") and isinstance(got, list):
        got = sorted(got)
    if got == want["want"]:
        return
    why = " (as if the key did not exist)" if absent_looking(got) else ""
    v.fail(CHECKS[6], f"{want['cmd']} {r['k']} answered {got!r}{why}; the key holds "
           f"{want['want']!r} (slot {key_slot(r['k'])})", r["t0"])


def check_reads(v, clients, cfg):
    gets = nil = stale = creads = 0
    for recs in clients.values():
        last_incr = {}
        for r in recs:
            if r["op"] == "incr" and r["st"] == "ok" and ":mono:" in r["k"]:
                last_incr[r["k"]] = r["r"]
            if r["op"] == "cread" and r["st"] == "ok":
                creads += 1
                check_collection_read(v, r)
            if r["op"] != "get" or r["st"] != "ok":
                continue
            gets += 1
            key, val = r["k"], r["r"]
            if val is None:
                nil += 1
                v.fail(CHECKS[6], f"GET {key} answered nil; the key exists (slot "
                       f"{key_slot(key)})", r["t0"])
            elif ":mono:" in key:
                if int(val) < last_incr.get(key, 0):
                    stale += 1
            elif val != read_value(key):
                v.fail(CHECKS[6], f"GET {key} answered {val!r}", r["t0"])
    v.stats["GETs answered"] = gets
    v.stats["collection reads answered (LRANGE, SMEMBERS, HGETALL, ZRANGE, XRANGE, counts …)"] = creads
    v.stats["stale reads by replica lag (own counter read below own last INCR; allowed)"] = stale


def check_pubsub(v, hist, faults):
    published = {r["v"]: r for r in hist if r["op"] == "publish"}
    # While an upgrade moves the subscriber, both processes are subscribed for a moment: a
    # message published then may come twice on the same connection (docs/operations.md).
    upgrades = _windows(faults, ("upgrade",))
    twice_at_upgrade = 0
    received = collections.Counter()
    arrivals = collections.defaultdict(list)  # (subscription, message) -> when each copy came
    sessions = collections.defaultdict(set)  # message -> subscriptions that delivered it
    session = 0
    for r in sorted((r for r in hist if r["op"] in ("subscribe", "msg")), key=lambda r: (r["c"], r["i"])):
        if r["op"] == "subscribe":
            session += 1
        elif r["op"] == "msg":
            received[(session, r["v"])] += 1
            arrivals[(session, r["v"])].append(r["t1"])
            sessions[r["v"]].add(session)
    for (s, m), n in received.items():
        if n == 2 and m in published and _during(published[m]["t0"], published[m]["t1"], upgrades):
            twice_at_upgrade += 1
        elif n > 1:  # twice on one subscription: a real duplicate
            t0 = published.get(m, {}).get("t0")
            # When each copy came, after the PUBLISH was sent: what tells a late copy from the
            # cluster bus (milliseconds apart) from a copy written twice.
            came = ", ".join(f"{(t - t0) * 1000:.1f}" for t in arrivals[(s, m)]) if t0 else "?"
            v.fail(CHECKS[7], f"message {m!r} delivered {n} times on one subscription "
                   f"(copies received {came} ms after its PUBLISH was sent)", t0)
    if upgrades:
        v.stats["messages delivered twice while an upgrade moved the subscriber (allowed)"] = (
            twice_at_upgrade)
    for m in sessions:
        if m not in published:
            v.fail(CHECKS[7], f"message {m!r} received but never published")
    ok = sum(1 for r in published.values() if r["st"] == "ok")
    v.stats["PUBLISH ok / messages received / subscriber reconnects"] = "%d / %d / %d" % (
        ok, sum(received.values()), sum(1 for r in hist if r["op"] == "sublost"))
    # A new subscription on another node may still get a message the old one delivered (the
    # cluster bus carries PUBLISH to every node asynchronously): counted, not judged.
    v.stats["messages delivered again after a resubscribe (allowed)"] = sum(
        1 for s in sessions.values() if len(s) > 1)


def _windows(faults, kinds):
    return [(f["t_start"], f["t_end"], f["fault"]) for f in faults if f["fault"] in kinds]


def _during(t0, t1, windows):
    return next((w for w in windows if t1 >= w[0] and t0 <= w[1]), None)


def lost_runs(hist):
    """Runs of published messages (PUBLISH ok) the subscriber never received, in publish order:
    (first t0, last t1, count). Only messages published while the subscriber was listening
    count: after its first subscription, and not in the last half second of the load."""
    subs = [r["t1"] for r in hist if r["op"] == "subscribe" and r["st"] == "ok"]
    if not subs:
        return []
    start, end = min(subs), max(r["t1"] for r in hist) - 0.5
    got = {r["v"] for r in hist if r["op"] == "msg"}
    runs, cur = [], None
    for p in sorted((r for r in hist if r["op"] == "publish" and r["st"] == "ok"),
                    key=lambda r: r["t0"]):
        if p["t0"] < start or p["t1"] > end:
            continue
        if p["v"] in got:
            if cur:
                runs.append(tuple(cur))
            cur = None
        elif cur is None:
            cur = [p["t0"], p["t1"], 1]
        else:
            cur[1], cur[2] = p["t1"], cur[2] + 1
    if cur:
        runs.append(tuple(cur))
    return runs


def check_subscriber(v, hist, faults):
    """The subscriber's connection survives every fault but a redcar restart (redcar subscribes
    again itself when a node holding the subscription goes away), and what it misses while its
    subscription moves is a short run of messages."""
    restarts = _windows(faults, ("redcar-restart",))
    for r in hist:
        if r["op"] in ("sublost", "subscribe") and r["st"] == "err" and not _during(
                r["t0"], r["t1"], restarts):
            v.fail(CHECKS[11], f"the subscriber lost its subscription: {r['e']}", r["t1"])
    excused = _windows(faults, GAP_EXCUSED)
    longest = None
    for t0, t1, n in lost_runs(hist):
        w = _during(t0, t1, excused)
        if longest is None or t1 - t0 > longest[1] - longest[0]:
            longest = (t0, t1, n, w)
        if w is None and t1 - t0 >= GAP_LIMIT:
            v.fail(CHECKS[12], f"{n} messages in a row published over {(t1 - t0) * 1000:.0f} ms "
                   f"never reached the subscriber", t0)
    v.stats["longest run of messages lost (pub/sub gap)"] = "none" if longest is None else (
        f"{longest[2]} messages over {(longest[1] - longest[0]) * 1000:.0f} ms"
        + (f" (during {longest[3][2]}, not judged)" if longest[3] else ""))


def allowed(r, faults):
    """Is this error one a fault window permits (see faults.py for the scopes)?"""
    # A WAIT is about every unconfirmed write of its connection (workload.py records them).
    slots = {key_slot(k) for k in r.get("cover") or [r["k"]] if k}
    for f in faults:
        aff = f["_affected"]
        for t_from, t_to, scope, pattern in f["allow"]:
            if r["t1"] < t_from or r["t0"] > t_to:
                continue
            if pattern and pattern not in r.get("e", ""):
                continue
            if scope == "all":
                return True
            in_shard = not slots or bool(slots & aff)
            if scope == "shard" and in_shard:
                return True
            if scope == "shard-writes" and in_shard and r["op"] in (
                    "rpush", "incr", "exec", "wait", "publish", "subscribe", "sublost"):
                return True
    return False


def check_errors(v, hist, faults):
    for f in faults:
        f["_affected"] = set(f["affected"])
    for r in hist:
        if r["st"] == "err" and not allowed(r, faults):
            v.outside.add((r["c"], r["i"]))
            v.fail(CHECKS[8], f"{r['op'].upper()} {r['k'] or ''}: {r['e']}", r["t1"])


def owed_replies_lost(hist, faults):
    """Operations sent well before a SIGTERM (so redcar had read them) whose connection closed
    without a reply: draining must answer them. Later ones raced the close and are allowed."""
    lost = []
    for f in faults:
        t = f.get("t_sigterm")
        if t is None:
            continue
        if not f.get("drain_probe_ok", True):
            lost.append((t, "the BLPOP in flight at SIGTERM got no reply: " + "; ".join(f["notes"])))
        for r in hist:
            if (r["st"] == "err" and r["cls"] == "indeterminate" and r["t0"] < t - 0.05
                    and r["t1"] > t and "redcar" not in r["e"]):
                lost.append((r["t0"], f"{r['op'].upper()} sent {(t - r['t0']) * 1000:.0f} ms "
                                      f"before SIGTERM got no reply: {r['e']}"))
    return lost


def check_redcar(v, redcar, faults, rss_limit_mb, hist):
    if redcar is None:  # a drill: redcar is not ours to watch
        v.skipped.update((CHECKS[9], CHECKS[10], CHECKS[13]))
        return
    for t, msg in owed_replies_lost(hist, faults):
        v.fail(CHECKS[9], msg, t)
    for t, rc, expected, pid in redcar.exits:
        if not expected:
            v.fail(CHECKS[9], f"redcar (pid {pid}) exited unexpectedly with status {rc}", t)
        elif rc != 0:
            v.fail(CHECKS[9], f"redcar (pid {pid}) exited with status {rc} after SIGTERM", t)
    if not any(f["fault"] == "upgrade" for f in faults):
        v.skipped.add(CHECKS[13])
    for f in faults:
        if f.get("upgrade_exit", 0) != 0:
            v.fail(CHECKS[13], "; ".join(f["notes"]), f["t_start"])
    v.stats["redcar max RSS (MB)"] = round(redcar.rss_max_kb / 1024, 1)
    resub = list(getattr(redcar, "resubscribes", {}).values())
    if resub:
        n = sum(r[0] for r in resub)
        v.stats["redcar's pub/sub re-subscriptions / their gaps summed / the longest (bucket)"] = (
            "%d / %.3f s / <= %.3g s" % (n, sum(r[1] for r in resub), max(r[2] for r in resub)))
        # Messages a re-subscription's new node delivered again, which redcar dropped
        # (docs/resilience.md, "Pub/sub through node loss").
        v.stats["redcar's pub/sub echoes dropped after a re-subscription"] = int(
            sum(r[3] for r in resub))
    hits = getattr(redcar, "near_cache_hits", None)  # only a redcar with the near cache on
    if hits:
        v.stats["reads answered by the near cache"] = int(sum(hits.values()))
    if redcar.rss_max_kb > rss_limit_mb * 1024:
        v.fail(CHECKS[10], f"redcar RSS reached {redcar.rss_max_kb / 1024:.0f} MB "
               f"(limit {rss_limit_mb} MB)")


def judge(hist, state, cfg, faults, redcar, rss_limit_mb):
    v = Verdict()
    clients = by_client(hist)
    check_lists(v, hist, clients, state, cfg)
    check_counters(v, hist, clients, state, cfg)
    check_reads(v, clients, cfg)
    check_pubsub(v, hist, faults)
    check_subscriber(v, hist, faults)
    check_errors(v, hist, faults)
    check_redcar(v, redcar, faults, rss_limit_mb, hist)
    v.stats["operations"] = sum(1 for r in hist if r["op"] != "msg")
    return v
