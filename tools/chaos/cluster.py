"""The processes the soak owns: a 3+3 Redis Cluster (via scripts/cluster.sh) and redcar.

Also the cluster's view of itself (who is primary, which slots it owns, is it settled) and a
direct, cluster-aware reader that the checker uses so that nothing it judges comes through redcar.
"""

import ctypes
import os
import signal
import subprocess
import threading
import time
import urllib.request

from resp import Conn, ConnError, ReplyError, call_once, key_slot

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
CLUSTER_SH = os.path.join(ROOT, "scripts", "cluster.sh")


class HarnessError(Exception):
    """The harness could not do its job (exit 2): not a verdict on redcar."""


def parse_addr(s):
    host, port = s.rsplit(":", 1)
    return host, int(port)


def pid_alive(pid):
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    try:  # a zombie is dead for our purposes
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def cmdline_has(pid, word):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return word.encode() in f.read()
    except OSError:
        return False


class View:
    """Who owns what, read from the nodes: primaries by node id, slot -> primary address."""

    def __init__(self, addrs):
        self.addrs = addrs  # the seeds, e.g. [("127.0.0.1", 7000), ...]

    def slots(self):
        """[(start, end, "host:port"), ...] from the first node that answers CLUSTER SLOTS."""
        last = None
        for host, port in self.addrs:
            try:
                rows = call_once(host, port, "CLUSTER", "SLOTS", timeout=1.0)
                return [(r[0], r[1], f"{r[2][0] or host}:{r[2][1]}") for r in rows]
            except (ConnError, ReplyError) as e:
                last = e
        raise HarnessError(f"no node answered CLUSTER SLOTS: {last}")

    def owner_map(self):
        m = [None] * 16384
        for s, e, addr in self.slots():
            for i in range(s, e + 1):
                m[i] = addr
        return m

    def nodes(self, host, port):
        """CLUSTER NODES of one node: {addr: {"id", "role", "master", "flags"}}."""
        out = {}
        for line in call_once(host, port, "CLUSTER", "NODES", timeout=1.0).splitlines():
            f = line.split()
            addr = f[1].split("@")[0]
            flags = f[2].split(",")
            out[addr] = {"id": f[0], "flags": flags, "master": f[3],
                         "role": "primary" if "master" in flags else "replica",
                         "slots": f[8:]}
        return out


def node_settled(host, port):
    """cluster_state:ok with every slot covered, and a replica's link to its primary is up."""
    info = call_once(host, port, "CLUSTER", "INFO", timeout=1.0)
    if "cluster_state:ok" not in info or "cluster_slots_ok:16384" not in info:
        return False
    repl = call_once(host, port, "INFO", "replication", timeout=1.0)
    if "role:slave" in repl and "master_link_status:up" not in repl:
        return False
    if "role:slave" in repl and "master_sync_in_progress:1" in repl:
        return False
    return True


class Cluster:
    """A cluster started by scripts/cluster.sh in DIR; nodes are addressed by port."""

    def __init__(self, dirpath, log):
        self.dir = dirpath
        self.log = log
        self.ports = []
        self.stopped = set()  # ports we SIGSTOPped (SIGCONT them before anything else)

    def start(self):
        env = dict(os.environ)
        env.setdefault("CLUSTER_NODE_TIMEOUT", "2000")
        with open(os.path.join(self.dir, "cluster-start.log"), "w") as out:
            rc = subprocess.call([CLUSTER_SH, "start", os.path.join(self.dir, "cluster"), "0"],
                                 stdout=out, stderr=subprocess.STDOUT, env=env)
        # Even a failed start may have written pid files: stop() will use them.
        if rc != 0:
            raise HarnessError(f"scripts/cluster.sh start failed (see {self.dir}/cluster-start.log)")
        with open(os.path.join(self.dir, "cluster", "ports")) as f:
            self.ports = [int(p) for p in f.read().split()]

    @property
    def addrs(self):
        return [("127.0.0.1", p) for p in self.ports]

    def seeds(self):
        return ",".join(f"127.0.0.1:{p}" for p in self.ports)

    def pid(self, port):
        try:
            with open(os.path.join(self.dir, "cluster", f"node-{port}", "pid")) as f:
                pid = int(f.read().strip())
        except (OSError, ValueError):
            return None
        # Never signal a recycled PID: it must still be a redis-server on this port.
        if pid_alive(pid) and cmdline_has(pid, f":{port}"):
            return pid
        return None

    def signal(self, port, sig):
        pid = self.pid(port)
        if pid is None:
            raise HarnessError(f"node {port} is not running")
        os.kill(pid, sig)
        if sig == signal.SIGSTOP:
            self.stopped.add(port)
        elif sig == signal.SIGCONT:
            self.stopped.discard(port)
        elif sig == signal.SIGKILL:
            self.stopped.discard(port)
            for _ in range(50):
                if not pid_alive(pid):
                    break
                time.sleep(0.02)
            os.remove(os.path.join(self.dir, "cluster", f"node-{port}", "pid"))

    def restart(self, port):
        """Start a killed node again from its nodes.conf (same id, same port)."""
        rc = subprocess.call([CLUSTER_SH, "restart", os.path.join(self.dir, "cluster"), str(port)],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if rc != 0:
            raise HarnessError(f"scripts/cluster.sh restart of node {port} failed")

    def roles(self):
        """{port: "primary"|"replica"} as each live node says of itself."""
        out = {}
        for p in self.ports:
            if self.pid(p) is None or p in self.stopped:
                continue
            try:
                repl = call_once("127.0.0.1", p, "INFO", "replication", timeout=1.0)
            except (ConnError, ReplyError):
                continue
            out[p] = "replica" if "role:slave" in repl else "primary"
        return out

    def node_id(self, port):
        return call_once("127.0.0.1", port, "CLUSTER", "MYID", timeout=1.0)

    def settled(self):
        """Every node running, all agree on cluster_state:ok, every replica synced, every slot
        owned by the same primary in every node's view, and 3 primaries with one replica each."""
        if any(self.pid(p) is None for p in self.ports) or self.stopped:
            return False
        try:
            if not all(node_settled("127.0.0.1", p) for p in self.ports):
                return False
            views = [tuple(sorted((r[0], r[1], r[2][1]) for r in
                                  call_once("127.0.0.1", p, "CLUSTER", "SLOTS", timeout=1.0)))
                     for p in self.ports]
        except (ConnError, ReplyError):
            return False
        if len(set(views)) != 1:
            return False
        roles = self.roles()
        return sorted(roles.values()) == ["primary"] * 3 + ["replica"] * 3

    def wait_settled(self, timeout=45.0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.settled():
                return
            time.sleep(0.1)
        raise HarnessError(f"cluster did not settle within {timeout:.0f} s")

    def stop(self):
        for p in list(self.stopped):  # a stopped node would ignore SIGTERM until SIGCONT
            pid = self.pid(p)
            if pid:
                os.kill(pid, signal.SIGCONT)
        self.stopped.clear()
        subprocess.call([CLUSTER_SH, "stop", os.path.join(self.dir, "cluster")],
                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def become_subreaper():
    """Makes this process the reaper of its orphaned descendants (Linux prctl
    PR_SET_CHILD_SUBREAPER): a redcar that an upgrade in place started is the old redcar's child,
    and becomes ours when that one exits, so its exit status can still be read."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(36, 1, 0, 0, 0) != 0:
        raise HarnessError(f"prctl(PR_SET_CHILD_SUBREAPER): errno {ctypes.get_errno()}")


class Adopted:
    """A redcar that an upgrade in place started, watched as Popen watches its own child: the
    old redcar's child at first, the soak's once the old one exits (see become_subreaper)."""

    def __init__(self, pid):
        self.pid, self.returncode = pid, None

    def poll(self):
        if self.returncode is not None:
            return self.returncode
        try:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
        except ChildProcessError:
            # Not ours yet (its parent, the old redcar, still runs): alive while /proc has it.
            if pid_alive(self.pid):
                return None
            self.returncode = -1  # gone before it was ours: its status is unknown
            return self.returncode
        if pid == 0:
            return None
        self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self, timeout=None):
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(str(self.pid), timeout)
            time.sleep(0.02)
        return self.returncode

    def send_signal(self, sig):
        os.kill(self.pid, sig)

    def kill(self):
        self.send_signal(signal.SIGKILL)


class Redcar:
    """redcar in front of the cluster, with an admin port; RSS sampled every second."""

    def __init__(self, binary, listen_port, admin_port, seeds, dirpath, log, extra_args=()):
        become_subreaper()
        self.extra_args = list(extra_args)
        self.near_cache_hits = {}  # pid -> hits seen last (extra_args turn the near cache on)
        # pid -> (re-subscriptions, gap seconds summed, upper bound of the longest gap, echoes
        # dropped) seen last
        self.resubscribes = {}
        self.binary, self.port, self.admin = binary, listen_port, admin_port
        self.seeds, self.dir, self.log = seeds, dirpath, log
        self.pid_file = os.path.join(dirpath, "redcar.pid")
        self.proc = None
        self.starts = 0
        self.expected_exit = False
        self.exits = []  # (monotonic time, returncode, expected?, pid)
        self.rss_max_kb = 0
        self.rss_samples = []
        self._sampler = None
        self._stop = threading.Event()

    def start(self, timeout=30.0):
        self.starts += 1
        logf = open(os.path.join(self.dir, f"redcar.{self.starts}.log"), "w")
        self.proc = subprocess.Popen(
            [self.binary, "--listen", f"127.0.0.1:{self.port}", "--admin", f"127.0.0.1:{self.admin}",
             "--cluster", self.seeds, "--read-policy", "prefer-replica",
             "--pid-file", self.pid_file, *self.extra_args],
            stdin=subprocess.DEVNULL, stdout=logf, stderr=subprocess.STDOUT)
        logf.close()
        self.expected_exit = False
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise HarnessError(f"redcar exited at start ({self.proc.returncode}); "
                                   f"see {self.dir}/redcar.{self.starts}.log")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.admin}/readyz", timeout=1) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            time.sleep(0.05)
        else:
            raise HarnessError("redcar not ready within 30 s")
        if self._sampler is None:
            self._sampler = threading.Thread(target=self._sample, daemon=True)
            self._sampler.start()

    def note_exit(self):
        """Record an exit nobody asked for (a crash; the checker fails the run on it)."""
        p = self.proc
        if p is not None and p.poll() is not None and not self.expected_exit and not any(
                e[3] == p.pid for e in self.exits):
            self.exits.append((time.monotonic(), p.returncode, False, p.pid))
            self.log(f"redcar exited unexpectedly with status {p.returncode}")
        return p is None or p.poll() is not None

    def _sample(self):
        while not self._stop.wait(1.0):
            p = self.proc
            if p is None or self.note_exit():
                continue
            try:
                with open(f"/proc/{p.pid}/status") as f:
                    for line in f:
                        if line.startswith("VmRSS:"):
                            kb = int(line.split()[1])
                            self.rss_max_kb = max(self.rss_max_kb, kb)
                            self.rss_samples.append((time.monotonic(), kb))
            except OSError:
                pass
            self._sample_metrics(p.pid)

    def _sample_metrics(self, pid):
        """The near cache's hits and the pub/sub re-subscriptions (and the echoes their new nodes
        delivered, dropped) so far, per redcar process (a restart starts from 0)."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.admin}/metrics", timeout=1) as r:
                lines = r.read().decode().splitlines()
        except (OSError, ValueError):
            return
        resub, gap_sum, buckets, echoes = 0.0, 0.0, [], 0.0
        for line in lines:
            name, _, value = line.rpartition(" ")
            try:
                value = float(value)
            except ValueError:
                continue
            if name == "redcar_near_cache_hits_total" and self.extra_args:
                self.near_cache_hits[pid] = value
            elif name.startswith("redcar_pubsub_resubscribes_total{"):
                resub += value
            elif name == "redcar_pubsub_resubscribe_gap_seconds_sum":
                gap_sum = value
            elif name == "redcar_pubsub_echoes_dropped_total":
                echoes = value
            elif name.startswith('redcar_pubsub_resubscribe_gap_seconds_bucket{le="'):
                buckets.append((float(name.split('"')[1]), value))
        total = max((n for _, n in buckets), default=0.0)
        longest = min((le for le, n in buckets if n >= total), default=0.0) if total else 0.0
        self.resubscribes[pid] = (resub, gap_sum, longest, echoes)

    def terminate(self, timeout=15.0):
        """SIGTERM (requests in flight are drained); returns (exit code, seconds to exit)."""
        p = self.proc
        self.expected_exit = True
        t0 = time.monotonic()
        p.send_signal(signal.SIGTERM)
        try:
            rc = p.wait(timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            rc = p.wait()
            self.exits.append((time.monotonic(), rc, False, p.pid))
            raise HarnessError(f"redcar did not exit within {timeout:.0f} s of SIGTERM") from None
        self.exits.append((time.monotonic(), rc, True, p.pid))
        return rc, time.monotonic() - t0

    def upgrade(self):
        """An upgrade in place (`redcar upgrade --pid-file`, docs/operations.md): returns (exit
        status of the command, seconds it took, its output). On success the new process is
        watched from then on, and the old one's exit (once its clients moved) is recorded."""
        old = self.proc
        t0 = time.monotonic()
        # The old process exits on its own once it handed its clients over: expected.
        self.expected_exit = True
        done = subprocess.run([self.binary, "upgrade", "--pid-file", self.pid_file,
                               "--timeout", "60s"], capture_output=True, text=True, timeout=90)
        took = time.monotonic() - t0
        out = (done.stdout + done.stderr).strip()
        if done.returncode != 0:
            self.expected_exit = False
            return done.returncode, took, out
        with open(self.pid_file) as f:
            self.proc = Adopted(int(f.read().strip()))
        try:
            rc = old.wait(30)
        except subprocess.TimeoutExpired:
            old.kill()
            rc = old.wait()
            self.exits.append((time.monotonic(), rc, False, old.pid))
            raise HarnessError("the old redcar did not exit within 30 s of an upgrade") from None
        self.exits.append((time.monotonic(), rc, True, old.pid))
        self.expected_exit = False
        return 0, took, out

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def stop(self):
        self._stop.set()
        if self.alive():
            self.expected_exit = True
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


class DirectReader:
    """Reads straight from the cluster's primaries (never through redcar), following MOVED/ASK."""

    def __init__(self, addrs):
        self.view = View(addrs)
        self.conns = {}
        self.owner = self.view.owner_map()

    def _conn(self, addr):
        if addr not in self.conns:
            host, port = parse_addr(addr)
            self.conns[addr] = Conn(host, port, timeout=5.0)
        return self.conns[addr]

    def call(self, key, *args):
        addr = self.owner[key_slot(key)]
        asking = False
        for _ in range(5):
            c = self._conn(addr)
            try:
                if asking:
                    c.call("ASKING")
                return c.call(*args)
            except ReplyError as e:
                msg = str(e)
                if msg.startswith("MOVED "):
                    addr, asking = msg.split()[2], False
                    self.owner = self.view.owner_map()
                elif msg.startswith("ASK "):
                    addr, asking = msg.split()[2], True
                else:
                    raise
        raise HarnessError(f"too many redirects reading {key}")

    def close(self):
        for c in self.conns.values():
            c.close()
