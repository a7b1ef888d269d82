#!/usr/bin/env python3
"""A crowd of idle clients for bench/crowd.sh ("the cost of one client").

    bench/crowd.py --port P --count N [--mode ping|set|get] [--value-bytes B] [--key KEY]
                   [--host 127.0.0.1] [--concurrency 256] [--retries 5] [--timeout 120]
                   [--hold 1800]

Opens N TCP connections to HOST:PORT, sends one command on each and reads its reply, then keeps
every connection open and idle until SIGTERM or SIGINT (or --hold seconds, a safety net):

    ping  PING                                  expects +PONG
    set   SET <KEY>:<i> <B bytes>               expects +OK (a big request, then idle)
    get   GET <KEY>                             expects a bulk string of B bytes (a big reply,
                                                then idle; the key must already hold it)

Plain Python 3 standard library, one thread, non-blocking sockets on an epoll selector: at most
--concurrency connections are between connect() and their reply at any time. A connection that
fails before its reply (EAGAIN, ECONNREFUSED, ECONNRESET, EOF, a timed-out connect ...) is closed
and retried after a short pause, up to --retries times; an error reply (-ERR ...) is final.

stdout gets one JSON line once every connection has its reply or has failed for good:
    {"ready": true, "count": N, "answered": N, "failed": 0, "retries": 0, "seconds": 1.23, ...}
and the process exits 1 (after printing "ready": false and the errors) if fewer than N answered.
While holding, SIGUSR1 makes it check its connections (a peer that closed one shows as readable
with EOF or a reset) and print {"alive": A, "closed": C, "unexpected": U}. On exit every socket is
closed with SO_LINGER 0 (a reset), so no local port is left in TIME_WAIT for the next crowd.
Progress and errors go to stderr.
"""

import argparse
import errno
import json
import os
import resource
import selectors
import signal
import socket
import struct
import sys
import time

RETRYABLE = {
    errno.EAGAIN,
    errno.ECONNREFUSED,
    errno.ECONNRESET,
    errno.ECONNABORTED,
    errno.EPIPE,
    errno.ETIMEDOUT,
    errno.EADDRNOTAVAIL,
    errno.EINTR,
    errno.ENOBUFS,
}


def log(msg):
    print(f"crowd.py: {msg}", file=sys.stderr, flush=True)


def emit(obj):
    print(json.dumps(obj, sort_keys=True), flush=True)


def raise_fd_limit(need):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        soft = hard
    if soft < need:
        raise SystemExit(
            f"crowd.py: needs {need} file descriptors but the hard limit is {hard} "
            "(ulimit -Hn); raise it or use a smaller --count"
        )
    return soft, hard


def check_ports(count):
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            lo, hi = (int(x) for x in f.read().split())
    except OSError:
        return None
    span = hi - lo + 1
    # Every connection to the one address needs its own local port; leave room for the rest.
    if count > span - 500:
        raise SystemExit(
            f"crowd.py: {count} connections to one address need {count} local ports, the "
            f"ephemeral range {lo}-{hi} has {span}: widen net.ipv4.ip_local_port_range"
        )
    return (lo, hi)


class Conn:
    __slots__ = ("i", "sock", "state", "out", "out_i", "out_off", "head", "need", "tries")

    def __init__(self, i):
        self.i = i
        self.sock = None
        self.state = "new"
        self.tries = 0


class Crowd:
    def __init__(self, args):
        self.a = args
        self.sel = selectors.EpollSelector()
        self.value = b"x" * args.value_bytes if args.mode == "set" else b""
        self.conns = [Conn(i) for i in range(args.count)]
        self.todo = list(range(args.count - 1, -1, -1))  # a stack: pop() gives 0, 1, 2, ...
        self.delayed = []  # (due, index): retries waiting for their pause
        self.in_flight = 0
        self.answered = 0
        self.failed = 0
        self.retries = 0
        self.errors = {}
        self.started = {}

    # ------------------------------------------------------------ the command of one connection
    def request(self, c):
        a = self.a
        if a.mode == "ping":
            return [b"*1\r\n$4\r\nPING\r\n"]
        if a.mode == "get":
            k = a.key.encode()
            return [b"*2\r\n$3\r\nGET\r\n$%d\r\n%s\r\n" % (len(k), k)]
        k = f"{a.key}:{c.i}".encode()
        head = b"*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$%d\r\n" % (len(k), k, len(self.value))
        return [head, memoryview(self.value), b"\r\n"]

    def error(self, key):
        self.errors[key] = self.errors.get(key, 0) + 1

    # ------------------------------------------------------------ state machine
    def start(self, c):
        c.tries += 1
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setblocking(False)
        c.sock = s
        c.state = "connecting"
        c.out = self.request(c)
        c.out_i = 0
        c.out_off = 0
        c.head = bytearray()
        c.need = None
        self.in_flight += 1
        self.started[c.i] = time.monotonic()
        rc = s.connect_ex((self.a.host, self.a.port))
        if rc not in (0, errno.EINPROGRESS):
            self.fail(c, rc)
            return
        self.sel.register(s, selectors.EVENT_WRITE, c)

    def close_sock(self, c, rst=False):
        if c.sock is None:
            return
        try:
            self.sel.unregister(c.sock)
        except (KeyError, ValueError):
            pass
        if rst:
            try:
                c.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            except OSError:
                pass
        c.sock.close()
        c.sock = None

    def fail(self, c, err, final=False):
        """A connection failed before its reply: retry it after a pause, or give up."""
        name = errno.errorcode.get(err, str(err)) if isinstance(err, int) else str(err)
        self.close_sock(c, rst=True)
        self.in_flight -= 1
        self.started.pop(c.i, None)
        retryable = not final and (not isinstance(err, int) or err in RETRYABLE)
        if retryable and c.tries <= self.a.retries:
            self.retries += 1
            self.error(f"retried: {name}")
            c.state = "delayed"
            self.delayed.append((time.monotonic() + 0.05 * c.tries, c.i))
        else:
            self.failed += 1
            self.error(f"failed: {name}")
            c.state = "failed"

    def done(self, c):
        self.sel.unregister(c.sock)
        c.state = "idle"
        c.out = None
        c.head = None
        self.in_flight -= 1
        self.started.pop(c.i, None)
        self.answered += 1

    def on_writable(self, c):
        s = c.sock
        if c.state == "connecting":
            err = s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
            if err:
                self.fail(c, err)
                return
            c.state = "sending"
        try:
            while c.out_i < len(c.out):
                buf = c.out[c.out_i]
                n = s.send(buf[c.out_off:])
                c.out_off += n
                if c.out_off < len(buf):
                    return  # the socket buffer is full: wait for the next EVENT_WRITE
                c.out_i += 1
                c.out_off = 0
        except BlockingIOError:
            return
        except OSError as e:
            self.fail(c, e.errno)
            return
        c.state = "reading"
        self.sel.modify(s, selectors.EVENT_READ, c)

    def on_readable(self, c):
        try:
            data = c.sock.recv(1 << 18)
        except BlockingIOError:
            return
        except OSError as e:
            self.fail(c, e.errno)
            return
        if not data:
            self.fail(c, "EOF before the reply")
            return
        if c.need is not None:  # inside a bulk reply: count the bytes, keep none
            c.need -= len(data)
        else:
            c.head += data
            eol = c.head.find(b"\r\n")
            if eol < 0:
                if len(c.head) > 4096:
                    self.fail(c, "reply line too long", final=True)
                return
            line = bytes(c.head[:eol])
            rest = len(c.head) - eol - 2
            kind = line[:1]
            if kind == b"-":
                self.fail(c, "error reply: " + line[1:].decode(errors="replace")[:80], final=True)
                return
            if self.a.mode == "get":
                if kind != b"$":
                    self.fail(c, f"unexpected reply {line[:40]!r}", final=True)
                    return
                length = int(line[1:])
                if length != self.a.value_bytes:
                    self.fail(c, f"GET returned {length} bytes, expected {self.a.value_bytes}", final=True)
                    return
                c.need = length + 2 - rest
                c.head = None
            else:
                want = b"+PONG" if self.a.mode == "ping" else b"+OK"
                if line != want or rest:
                    self.fail(c, f"unexpected reply {line[:40]!r}", final=True)
                    return
                self.done(c)
                return
        if c.need is not None and c.need <= 0:
            if c.need < 0:
                self.fail(c, "more bytes than the reply", final=True)
                return
            self.done(c)

    def run(self):
        a = self.a
        t0 = time.monotonic()
        deadline = t0 + a.timeout
        last_report = t0
        while self.answered + self.failed < a.count:
            now = time.monotonic()
            if now > deadline:
                for c in self.conns:
                    if c.state in ("connecting", "sending", "reading", "delayed"):
                        if c.state == "delayed":
                            self.in_flight += 1  # fail() takes it off again
                        self.fail(c, f"no reply within --timeout {a.timeout}s", final=True)
                break
            if self.delayed:
                ready = [d for d in self.delayed if d[0] <= now]
                if ready:
                    self.delayed = [d for d in self.delayed if d[0] > now]
                    # Retries go first: they have waited already.
                    self.todo.extend(i for _, i in sorted(ready, reverse=True))
            while self.todo and self.in_flight < a.concurrency:
                self.start(self.conns[self.todo.pop()])
            # A connect the kernel holds (a full listen backlog retransmits the SYN after 1 s,
            # then 3 s, ...) is not an error: it simply waits, up to --timeout.
            events = self.sel.select(timeout=0.05)
            for key, mask in events:
                c = key.data
                if c.sock is None or c.state in ("idle", "failed", "delayed"):
                    continue
                if mask & selectors.EVENT_WRITE:
                    self.on_writable(c)
                elif mask & selectors.EVENT_READ:
                    self.on_readable(c)
            if now - last_report >= 5:
                last_report = now
                log(f"{self.answered}/{a.count} answered, {self.in_flight} in flight, "
                    f"{self.failed} failed, {self.retries} retries")
        return time.monotonic() - t0

    # ------------------------------------------------------------ holding the crowd
    def check_alive(self):
        """Which idle connections has the peer closed (EOF or reset) or written to?"""
        poller = selectors.EpollSelector()
        live = [c for c in self.conns if c.state == "idle"]
        for c in live:
            poller.register(c.sock, selectors.EVENT_READ, c)
        closed = unexpected = 0
        for key, _ in poller.select(timeout=0):
            c = key.data
            try:
                data = c.sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT)
                if data:
                    unexpected += 1
                else:
                    closed += 1
            except BlockingIOError:
                pass
            except OSError:
                closed += 1
        poller.close()
        return {"alive": len(live) - closed, "closed": closed, "unexpected": unexpected}

    def close_all(self):
        for c in self.conns:
            self.close_sock(c, rst=True)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--count", type=int, required=True)
    p.add_argument("--mode", choices=("ping", "set", "get"), default="ping")
    p.add_argument("--value-bytes", type=int, default=1 << 20)
    p.add_argument("--key", default="crowd:big", help="the GET key, or the SET key prefix")
    p.add_argument("--concurrency", type=int, default=256, help="connections between connect and reply")
    p.add_argument("--retries", type=int, default=5, help="retries of one connection")
    p.add_argument("--timeout", type=float, default=120, help="seconds for the whole crowd to answer")
    p.add_argument("--hold", type=float, default=1800, help="exit after holding this long")
    a = p.parse_args()
    if a.count < 1 or a.concurrency < 1:
        p.error("--count and --concurrency must be at least 1")

    soft, hard = raise_fd_limit(a.count + 64)
    ports = check_ports(a.count)
    # Signals are taken with sigtimedwait while holding; blocked from the start so none is lost.
    wanted = {signal.SIGTERM, signal.SIGINT, signal.SIGUSR1}
    signal.pthread_sigmask(signal.SIG_BLOCK, wanted)

    crowd = Crowd(a)
    seconds = crowd.run()
    report = {
        "ready": crowd.answered == a.count,
        "count": a.count,
        "mode": a.mode,
        "answered": crowd.answered,
        "failed": crowd.failed,
        "retries": crowd.retries,
        "errors": crowd.errors,
        "seconds": round(seconds, 3),
        "fd_limit": [soft, hard],
        "port_range": ports,
        "pid": os.getpid(),
    }
    emit(report)
    if not report["ready"]:
        log(f"only {crowd.answered} of {a.count} connections answered: {crowd.errors}")
        crowd.close_all()
        return 1
    log(f"{a.count} connections answered in {seconds:.2f} s ({crowd.retries} retries); holding them")

    deadline = time.monotonic() + a.hold
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            log(f"--hold {a.hold}s is over: closing the crowd")
            break
        info = signal.sigtimedwait(wanted, min(left, 5))
        if info is None:
            continue
        if info.si_signo == signal.SIGUSR1:
            emit(crowd.check_alive())
            continue
        break
    crowd.close_all()
    return 0


if __name__ == "__main__":
    sys.exit(main())
