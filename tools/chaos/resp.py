"""A minimal RESP2 client (one command at a time) and the CRC16 slot hash, stdlib only.

The soak uses its own client instead of redis-py so that nothing is retried behind its back: a
client library that re-sends a timed-out RPUSH would make the harness, not redcar, duplicate a
value. Every call either returns the reply, raises ReplyError (an error reply; the connection
stays usable) or raises ConnError (the connection is gone and closed; whether the command ran is
unknown unless `sent` is False).
"""

import socket


class ReplyError(Exception):
    """An error reply (-ERR ..., -MOVED ...); the connection is still in sync."""


class ConnError(Exception):
    """Connect failed, timed out or the peer closed; `sent` says whether the request left us."""

    def __init__(self, msg, sent):
        super().__init__(msg)
        self.sent = sent


def encode(args):
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        if not isinstance(a, bytes):
            a = str(a).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)


class Conn:
    """One blocking connection; any transport failure closes it (a late reply would desync it)."""

    def __init__(self, host, port, timeout=3.0, connect_timeout=1.0):
        self.addr = (host, int(port))
        self.timeout = timeout
        self.connect_timeout = connect_timeout
        self.sock = None
        self.buf = b""

    def connect(self):
        try:
            s = socket.create_connection(self.addr, timeout=self.connect_timeout)
        except OSError as e:
            raise ConnError(f"connect: {e}", sent=False) from None
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        s.settimeout(self.timeout)
        self.sock, self.buf = s, b""

    def close(self):
        if self.sock is not None:
            try:
                self.sock.close()
            except OSError:
                pass
        self.sock = None

    def send(self, *args):
        if self.sock is None:
            self.connect()
        try:
            self.sock.sendall(encode(args))
        except OSError as e:
            self.close()
            # A partial send may still have reached the server in full: unknown.
            raise ConnError(f"send: {e}", sent=True) from None

    def call(self, *args):
        self.send(*args)
        return self.read()

    def read(self, timeout=None):
        """Read one reply; timeout=None uses the connection's; socket.timeout propagates raw
        only when `timeout` is given (the subscriber polls), else the connection is dropped."""
        if timeout is not None:
            self.sock.settimeout(timeout)
            try:
                if not self.buf:
                    chunk = self.sock.recv(65536)
                    if not chunk:
                        self.close()
                        raise ConnError("closed by peer", sent=True)
                    self.buf += chunk
            finally:
                if self.sock is not None:
                    self.sock.settimeout(self.timeout)
        try:
            return self._reply()
        except (OSError, EOFError) as e:
            self.close()
            what = "timed out" if isinstance(e, socket.timeout) else str(e) or "closed by peer"
            raise ConnError(what, sent=True) from None

    def _line(self):
        while True:
            i = self.buf.find(b"\r\n")
            if i >= 0:
                line, self.buf = self.buf[:i], self.buf[i + 2:]
                return line
            self._fill()

    def _fill(self):
        chunk = self.sock.recv(65536)
        if not chunk:
            raise EOFError("closed by peer")
        self.buf += chunk

    def _reply(self):
        line = self._line()
        kind, rest = line[:1], line[1:]
        if kind == b"+":
            return rest.decode()
        if kind == b"-":
            raise ReplyError(rest.decode(errors="replace"))
        if kind == b":":
            return int(rest)
        if kind == b"$":
            n = int(rest)
            if n < 0:
                return None
            while len(self.buf) < n + 2:
                self._fill()
            data, self.buf = self.buf[:n], self.buf[n + 2:]
            return data.decode(errors="replace")
        if kind == b"*":
            n = int(rest)
            if n < 0:
                return None
            out = []
            for _ in range(n):
                try:
                    out.append(self._reply())
                except ReplyError as e:  # an error inside an array (EXEC): keep it as a value
                    out.append(e)
            return out
        raise EOFError(f"protocol error: {line[:40]!r}")


def call_once(host, port, *args, timeout=2.0):
    """Open, ask, close: for admin commands to nodes."""
    c = Conn(host, port, timeout=timeout)
    try:
        return c.call(*args)
    finally:
        c.close()


def _crc16_table():
    table = []
    for i in range(256):
        crc = i << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) if crc & 0x8000 else (crc << 1)
        table.append(crc & 0xFFFF)
    return table


_TABLE = _crc16_table()


def key_slot(key):
    """Redis Cluster's slot: CRC16 (XMODEM) of the hash tag, mod 16384."""
    k = key.encode() if isinstance(key, str) else key
    s = k.find(b"{")
    if s >= 0:
        e = k.find(b"}", s + 1)
        if e > s + 1:
            k = k[s + 1:e]
    crc = 0
    for b in k:
        crc = ((crc << 8) & 0xFFFF) ^ _TABLE[((crc >> 8) ^ b) & 0xFF]
    return crc % 16384
