#!/usr/bin/env python3
"""An upgrade in place against a plain restart, under load (bench/upgrade.sh; docs/operations.md).

Starts redcar (--redcar) in front of the cluster at --seeds, runs a load, and --rounds times
either upgrades it in place (`redcar upgrade --pid-file`) or restarts it (SIGTERM, wait for the
exit, start again, as `systemctl restart` does). The load: --connectors threads that connect
per request (connect, INCR, close: a PHP worker) and --persistent threads with one connection
each sending INCR one at a time (a pooled client that reconnects when its connection is closed).
Prints one line of JSON: refused connects, command errors, persistent connections closed under
the client, and connect / command latency (p50, p99, max, ms) over the whole run.
Standard library only.
"""

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time


def percentile(values, q):
    if not values:
        return 0.0
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def ms(values):
    return {
        "n": len(values),
        "p50": round(percentile(values, 0.50) * 1000, 2),
        "p99": round(percentile(values, 0.99) * 1000, 2),
        "max": round(max(values) * 1000, 2) if values else 0.0,
    }


def read_reply(sock, buf):
    """One simple RESP reply line (`:n`, `+OK`, `-ERR`); returns (line, rest)."""
    while b"\r\n" not in buf:
        chunk = sock.recv(4096)
        if not chunk:
            raise ConnectionError("closed by redcar")
        buf += chunk
    line, rest = buf.split(b"\r\n", 1)
    return line, rest


class Tally:
    def __init__(self):
        self.lock = threading.Lock()
        self.refused = 0
        self.errors = 0
        self.closed = 0
        self.commands = 0
        self.connect = []
        self.command = []
        self.first_error = None

    def error(self, what, kind="errors"):
        with self.lock:
            setattr(self, kind, getattr(self, kind) + 1)
            if self.first_error is None:
                self.first_error = what


def incr(sock, key):
    sock.sendall(b"*2\r\n$4\r\nINCR\r\n$%d\r\n%s\r\n" % (len(key), key))


def connector(port, stop, tally, key):
    while not stop.is_set():
        t0 = time.monotonic()
        try:
            sock = socket.create_connection(("127.0.0.1", port), timeout=5)
        except OSError as e:
            tally.error(f"connect: {e}", "refused")
            time.sleep(0.01)
            continue
        t1 = time.monotonic()
        try:
            incr(sock, key)
            line, _ = read_reply(sock, b"")
            t2 = time.monotonic()
            with tally.lock:
                tally.connect.append(t1 - t0)
                tally.command.append(t2 - t1)
                tally.commands += 1
            if not line.startswith(b":"):
                tally.error(f"per request: {line!r}")
        except OSError as e:
            tally.error(f"per request: {e}")
        finally:
            sock.close()


def persistent(port, stop, tally, key):
    sock = None
    while not stop.is_set():
        if sock is None:
            try:
                sock = socket.create_connection(("127.0.0.1", port), timeout=5)
            except OSError as e:
                tally.error(f"persistent connect: {e}", "refused")
                time.sleep(0.01)
                continue
        t0 = time.monotonic()
        try:
            incr(sock, key)
            line, _ = read_reply(sock, b"")
        except OSError as e:
            # A pooled client sees this as a failed command, then reconnects.
            tally.error(f"persistent: {e}", "closed")
            sock.close()
            sock = None
            continue
        with tally.lock:
            tally.command.append(time.monotonic() - t0)
            tally.commands += 1
        if not line.startswith(b":"):
            tally.error(f"persistent: {line!r}")
    if sock is not None:
        sock.close()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_serving(port, deadline):
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
                incr(s, b"bench:upgrade:ready")
                line, _ = read_reply(s, b"")
                if line.startswith(b":"):
                    return True
        except OSError:
            pass
        time.sleep(0.05)
    return False


def read_pid(path):
    try:
        with open(path) as f:
            return int(f.read().strip())
    except (OSError, ValueError):
        return None


def gone(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(") ", 1)[1].startswith("Z")
    except OSError:
        return True


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--redcar", required=True)
    ap.add_argument("--seeds", required=True)
    ap.add_argument("--mode", choices=["upgrade", "restart"], required=True)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--connectors", type=int, default=4)
    ap.add_argument("--persistent", type=int, default=4)
    ap.add_argument("--settle", type=float, default=2.0, help="seconds of load between rounds")
    args = ap.parse_args()

    work = tempfile.mkdtemp(prefix="redcar-bench-upgrade-")
    pid_file = os.path.join(work, "redcar.pid")
    log = open(os.path.join(work, "redcar.log"), "ab")
    port = free_port()
    cmd = [args.redcar, "--listen", f"127.0.0.1:{port}", "--cluster", args.seeds,
           "--pid-file", pid_file]

    def start():
        p = subprocess.Popen(cmd, stdout=log, stderr=log, stdin=subprocess.DEVNULL)
        if not wait_serving(port, time.monotonic() + 30):
            sys.exit(f"redcar did not serve; log in {work}")
        return p

    first = start()
    stop, tally = threading.Event(), Tally()
    threads = [threading.Thread(target=connector, args=(port, stop, tally, b"bench:pr:%d" % i))
               for i in range(args.connectors)]
    threads += [threading.Thread(target=persistent, args=(port, stop, tally, b"bench:p:%d" % i))
                for i in range(args.persistent)]
    for t in threads:
        t.start()
    time.sleep(args.settle)
    took = []
    for _ in range(args.rounds):
        old = read_pid(pid_file)
        t0 = time.monotonic()
        if args.mode == "upgrade":
            out = subprocess.run([args.redcar, "upgrade", "--pid-file", pid_file],
                                 capture_output=True, text=True)
            if out.returncode != 0:
                sys.exit(f"upgrade failed: {out.stdout}{out.stderr}; log in {work}")
        else:
            os.kill(old, signal.SIGTERM)
            while not gone(old):
                time.sleep(0.005)
            start()
        # Until the old process is gone (an upgrade: its clients have moved).
        while not gone(old):
            time.sleep(0.01)
        took.append(round(time.monotonic() - t0, 3))
        time.sleep(args.settle)
    stop.set()
    for t in threads:
        t.join()
    last = read_pid(pid_file)
    if last and not gone(last):
        os.kill(last, signal.SIGTERM)
    first.poll()
    print(json.dumps({
        "mode": args.mode,
        "rounds": args.rounds,
        "commands": tally.commands,
        "refused_connects": tally.refused,
        "command_errors": tally.errors,
        "persistent_connections_closed": tally.closed,
        "first_error": tally.first_error,
        "seconds_until_old_process_gone": took,
        "connect_ms": ms(tally.connect),
        "command_ms": ms(tally.command),
        "log": os.path.join(work, "redcar.log"),
    }))


if __name__ == "__main__":
    main()
