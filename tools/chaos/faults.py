"""The seeded fault schedule and the faults themselves, injected into processes the soak owns.

Each fault returns a record: what was done to which node, when it started and ended (ended =
the cluster settled again and redcar ready), the slots it affected (for "other shards" latency)
and the windows in which clients may see errors (for the error-contract check):
  allow: [(from, to, scope, pattern)] - scope "shard" (ops on the affected slots, a WAIT covering
  a write there, keyless ops), "shard-writes" (the same, but not reads) or "all"; pattern None
  (any error) or a substring the error must contain (e.g. CLUSTERDOWN).
"""

import random
import signal
import threading
import time

from cluster import HarnessError, View
from resp import Conn, ConnError, ReplyError, call_once, key_slot
from workload import group_keys

ALL = ("replica-kill", "primary-stop", "failover", "migrate", "primary-kill", "redcar-restart",
       "upgrade")
# redcar's op_timeout (1 s) plus a margin: an op started inside a window may end this late.
SLACK = 1.5
# How long a slot migration takes, spread over its keys (the workload keeps ~12 per slot).
MIGRATE_SPREAD = 0.6
# How long redcar surely keeps retrying a TRYAGAIN: op_timeout (1 s) less its longest backoff
# pause (160 ms) and a margin.
SPLIT_RETRIED = 0.75
# How long a fault's window runs on after the cluster settled (its aftermath).
TAIL = 1.5
# Redis lets a replica start another election only 4 x cluster-node-timeout (2 s here) after
# its last one; a CLUSTER FAILOVER asked sooner stalls, holding its primary's clients paused.
# A failover therefore waits until its replica is past that (plus a margin): the cluster's
# rule, not something redcar should paper over.
ELECTION_GAP = 4 * 2.0 + 1.0


def _topology(cluster):
    """{primary_port: {"replicas": [ports], "slots": set}} from the cluster's own view."""
    view = View(cluster.addrs)
    owner = view.owner_map()
    roles = cluster.roles()
    anyport = next(iter(roles))
    nodes = view.nodes("127.0.0.1", anyport)
    ids = {n["id"]: int(a.rsplit(":", 1)[1]) for a, n in nodes.items()}
    topo = {}
    for addr, n in nodes.items():
        if n["role"] == "primary" and "fail" not in n["flags"] and "fail?" not in n["flags"]:
            topo[int(addr.rsplit(":", 1)[1])] = {"replicas": [], "slots": set()}
    for addr, n in nodes.items():
        if n["role"] == "replica" and ids.get(n["master"]) in topo:
            topo[ids[n["master"]]]["replicas"].append(int(addr.rsplit(":", 1)[1]))
    for slot, addr in enumerate(owner):
        port = int(addr.rsplit(":", 1)[1])
        if port in topo:
            topo[port]["slots"].add(slot)
    return topo


def _by_shard(topo):
    """Primaries in slot order (not port order, which is random): a seed picks the same shard."""
    return sorted(topo, key=lambda p: min(topo[p]["slots"], default=16384))


class DownWatch(threading.Thread):
    """Notes when any running node reports cluster_state:fail (first and last time seen)."""

    def __init__(self, cluster):
        super().__init__(daemon=True)
        self.cluster, self.first, self.last = cluster, None, None
        self.done = threading.Event()
        self.conns = {}

    def run(self):
        while not self.done.wait(0.05):
            for p in self.cluster.ports:
                if p in self.cluster.stopped or self.cluster.pid(p) is None:
                    self.conns.pop(p, None)
                    continue
                c = self.conns.setdefault(p, Conn("127.0.0.1", p, timeout=0.3, connect_timeout=0.3))
                try:
                    info = c.call("CLUSTER", "INFO")
                except (ConnError, ReplyError):
                    continue
                if "cluster_state:fail" in info:
                    now = time.monotonic()
                    self.first = self.first or now
                    self.last = now

    def stop(self):
        self.done.set()
        self.join()
        for c in self.conns.values():
            c.close()


class Injector:
    def __init__(self, cluster, redcar, cfg, rng, log):
        self.cluster, self.redcar, self.cfg, self.rng, self.log = cluster, redcar, cfg, rng, log
        self.elected = {}  # port -> when it last won an election (time.monotonic())

    def run(self, kind):
        topo = _topology(self.cluster)
        rec = {"fault": kind, "allow": [], "notes": []}
        watch = DownWatch(self.cluster)
        watch.start()
        try:
            getattr(self, kind.replace("-", "_"))(topo, rec)
            self.cluster.wait_settled()
        finally:
            watch.stop()
        if watch.first is not None:
            # While any node says cluster_state:fail, Redis refuses every slot: errors anywhere
            # are the cluster's doing (redcar may report them as a timeout after retrying).
            rec["notes"].append(f"cluster_state:fail seen from {watch.first - rec['t_start']:.2f}"
                                f" to {watch.last - rec['t_start']:.2f} s")
            rec["allow"].append((watch.first, watch.last + SLACK, "all", None))
        rec["t_settled"] = time.monotonic()
        # The window runs on for a second after the cluster settled: errors in a fault's
        # aftermath (a stale map adopted, a replica back too early) belong to that fault.
        # The next fault starts no sooner (calm periods are >= TAIL).
        rec["t_end"] = max([rec["t_settled"] + TAIL] + [a[1] for a in rec["allow"]])
        rec["affected"] = sorted(rec["affected"])
        return rec

    def _start(self, rec, what):
        rec["what"] = what
        rec["t_start"] = time.monotonic()
        self.log(f"fault {rec['fault']}: {what}")

    def replica_kill(self, topo, rec):
        primary = self.rng.choice(_by_shard(topo))
        replica = self.rng.choice(topo[primary]["replicas"])
        rec["affected"] = topo[primary]["slots"]
        down = self.rng.uniform(1.0, 3.0)
        self._start(rec, f"SIGKILL replica {replica} (of {primary}), restart after {down:.1f} s")
        self.cluster.signal(replica, signal.SIGKILL)
        time.sleep(down)
        self.cluster.restart(replica)
        # Nothing may fail: reads go elsewhere, and a subscription on that node is made again
        # elsewhere by redcar (the subscriber keeps its connection).

    def primary_stop(self, topo, rec):
        primary = self.rng.choice(_by_shard(topo))
        rec["affected"] = topo[primary]["slots"]
        self._start(rec, f"SIGSTOP primary {primary} for 2 s, then SIGCONT")
        self.cluster.signal(primary, signal.SIGSTOP)
        time.sleep(2.0)
        self.cluster.signal(primary, signal.SIGCONT)
        t_cont = time.monotonic()
        # Writes (and WAIT, EXEC) for the frozen shard time out; reads have replicas to go to.
        rec["allow"].append((rec["t_start"], t_cont + SLACK, "shard-writes", None))
        # If other nodes flag the frozen primary failed, Redis answers CLUSTERDOWN everywhere.
        rec["allow"].append((rec["t_start"], t_cont + SLACK, "all", "CLUSTERDOWN"))
        self.cluster.wait_settled()
        if self.cluster.roles().get(primary) == "replica":
            # The freeze outlasted cluster-node-timeout and the cluster failed it over: then
            # it is a primary loss, and costs what primary-kill may cost.
            rec["notes"].append("the cluster failed the frozen primary over")
            t = time.monotonic()
            rec["allow"].append((rec["t_start"], t + SLACK, "shard", None))
            rec["allow"].append((rec["t_start"], t + SLACK, "all", "CLUSTERDOWN"))

    def failover(self, topo, rec):
        primary = self.rng.choice(_by_shard(topo))
        replica = self.rng.choice(topo[primary]["replicas"])
        rec["affected"] = topo[primary]["slots"]
        wait = self.elected.get(replica, float("-inf")) + ELECTION_GAP - time.monotonic()
        if wait > 0:
            self.log(f"fault failover: replica {replica} won an election recently; "
                     f"waiting {wait:.1f} s (Redis's election gap)")
            time.sleep(wait)
        self._start(rec, f"CLUSTER FAILOVER on replica {replica} (of {primary})")
        call_once("127.0.0.1", replica, "CLUSTER", "FAILOVER")
        deadline = time.monotonic() + 15
        while self.cluster.roles().get(replica) != "primary":
            if time.monotonic() > deadline:
                raise HarnessError(f"replica {replica} not promoted 15 s after CLUSTER FAILOVER")
            time.sleep(0.05)
        self.elected[replica] = time.monotonic()
        rec["notes"].append(f"promoted after {time.monotonic() - rec['t_start']:.2f} s")

    def migrate(self, topo, rec):
        tag = self.rng.choice(self.cfg["groups"])
        slot = key_slot("{%s}" % tag)
        src = next(p for p, t in topo.items() if slot in t["slots"])
        dst = self.rng.choice([p for p in _by_shard(topo) if p != src])
        rec["affected"] = topo[src]["slots"] | topo[dst]["slots"]
        rec["slot"] = slot
        self._start(rec, f"migrate slot {slot} (group {tag}) with its keys from {src} to {dst}")
        src_id, dst_id = self.cluster.node_id(src), self.cluster.node_id(dst)
        call_once("127.0.0.1", dst, "CLUSTER", "SETSLOT", slot, "IMPORTING", src_id)
        call_once("127.0.0.1", src, "CLUSTER", "SETSLOT", slot, "MIGRATING", dst_id)
        moved, moved_at = 0, {}
        # One key per MIGRATE with pauses, so the slot spends most of a second half-moved
        # (the window in which ASK, TRYAGAIN and replica reads of moved keys happen), but less
        # than redcar's op_timeout: a transaction over two keys the migration has split gets
        # TRYAGAIN until both are across, and redcar retries it for op_timeout.
        count = call_once("127.0.0.1", src, "CLUSTER", "COUNTKEYSINSLOT", slot)
        pause = min(0.15, MIGRATE_SPREAD / max(count, 1))
        while True:
            keys = call_once("127.0.0.1", src, "CLUSTER", "GETKEYSINSLOT", slot, 1)
            if not keys:
                break
            call_once("127.0.0.1", src, "MIGRATE", "127.0.0.1", dst, "", 0, 5000, "KEYS", *keys,
                      timeout=6.0)
            moved += len(keys)
            moved_at.update((k, time.monotonic()) for k in keys)
            time.sleep(pause)
        for port in [dst, src] + [p for p in topo if p not in (src, dst)]:
            call_once("127.0.0.1", port, "CLUSTER", "SETSLOT", slot, "NODE", dst_id)
        rec["notes"].append(f"{moved} keys moved")
        self._allow_split_transaction(rec, tag, moved_at)

    def _allow_split_transaction(self, rec, tag, moved_at):
        """When a loaded host stretched the migration so that the transaction's two keys were
        split for longer than redcar retries (op_timeout less its last backoff pause), Redis's
        TRYAGAIN is the only true answer: allowed then, for those keys, and only then."""
        keys = group_keys(self.cfg["prefix"], tag)
        times = [moved_at.get(keys["txa"]), moved_at.get(keys["txb"])]
        if None in times:
            return
        first, last = min(times), max(times)
        if last - first > SPLIT_RETRIED:
            rec["notes"].append(f"transaction keys split for {last - first:.2f} s")
            rec["allow"].append((first, last + SLACK, "shard", "TRYAGAIN"))

    def primary_kill(self, topo, rec):
        primary = self.rng.choice(_by_shard(topo))
        replicas = topo[primary]["replicas"]
        rec["affected"] = topo[primary]["slots"]
        self._start(rec, f"SIGKILL primary {primary}; restart it once a replica is promoted")
        self.cluster.signal(primary, signal.SIGKILL)
        deadline = time.monotonic() + 30
        while True:
            roles = self.cluster.roles()
            if any(roles.get(r) == "primary" for r in replicas) and self._ok_without(primary):
                break
            if time.monotonic() > deadline:
                raise HarnessError(f"no replica of {primary} promoted 30 s after its SIGKILL")
            time.sleep(0.05)
        t_promoted = time.monotonic()
        for r in replicas:
            if roles.get(r) == "primary":
                self.elected[r] = t_promoted
        rec["notes"].append(f"replica promoted after {t_promoted - rec['t_start']:.2f} s")
        # Until the promotion the shard has no primary; Redis itself answers CLUSTERDOWN for
        # every slot for a while once it flags the primary failed (full coverage lost).
        rec["allow"].append((rec["t_start"], t_promoted + SLACK, "shard", None))
        rec["allow"].append((rec["t_start"], t_promoted + SLACK, "all", "CLUSTERDOWN"))
        time.sleep(self.rng.uniform(0.5, 1.5))
        self.cluster.restart(primary)  # it rejoins as a replica of the promoted node

    @staticmethod
    def _drain_probe(conn, result):
        try:
            r = conn.read()
            result["reply"] = "nil" if r is None else repr(r)
        except (ConnError, ReplyError) as e:
            result["reply"] = f"error: {e}"
        finally:
            conn.close()

    def _ok_without(self, dead):
        for p in self.cluster.ports:
            if p == dead:
                continue
            try:
                info = call_once("127.0.0.1", p, "CLUSTER", "INFO", timeout=1.0)
            except Exception:
                return False
            if "cluster_state:ok" not in info:
                return False
        return True

    def redcar_restart(self, topo, rec):
        rec["affected"] = set(range(16384))
        # Besides whatever the clients have in flight, one request surely is: a BLPOP that
        # waits 0.5 s on an empty list. Draining must still answer it (nil) before exiting.
        probe = Conn("127.0.0.1", self.redcar.port, timeout=5.0)
        key = f"{self.cfg['prefix']}{{{self.cfg['groups'][0]}}}:drain"
        probe.send("BLPOP", key, "0.5")
        time.sleep(0.05)
        self._start(rec, "SIGTERM redcar with requests in flight (and a BLPOP 0.5 s), restart it")
        result = {}
        reader = threading.Thread(target=self._drain_probe, args=(probe, result))
        reader.start()
        rc, took = self.redcar.terminate()
        reader.join()
        rec["notes"].append(f"exited {rc} after {took * 1000:.0f} ms; BLPOP in flight got "
                            + result.get("reply", "no reply"))
        rec["redcar_exit"] = rc
        rec["drain_probe_ok"] = result.get("reply") == "nil"
        rec["t_sigterm"] = rec["t_start"]
        self.redcar.start()
        rec["allow"].append((rec["t_start"], time.monotonic() + 0.5, "all", None))

    def upgrade(self, topo, rec):
        rec["affected"] = set(range(16384))
        self._start(rec, "upgrade redcar in place (redcar upgrade --pid-file) under load")
        rc, took, out = self.redcar.upgrade()
        rec["notes"].append(f"redcar upgrade exited {rc} after {took * 1000:.0f} ms: {out}")
        rec["upgrade_exit"] = rc
        # No window allows an error: clients must not notice (docs/operations.md). A message
        # published while both processes are subscribed may reach the subscriber twice.


def schedule(kinds, seed):
    """An endless, seeded sequence of (calm seconds before, fault kind): every chosen kind once
    per round, in a shuffled order."""
    rng = random.Random(f"schedule:{seed}")
    while True:
        order = list(kinds)
        rng.shuffle(order)
        for k in order:
            yield rng.uniform(TAIL, 3.0), k
