#!/usr/bin/env python3
"""Generate crates/redcar-protocol/src/commands/table.rs from a live redis-server's COMMAND reply.

Usage:
    python3 tools/gen_commands.py                 # start a temporary redis-server, regenerate
    python3 tools/gen_commands.py --from H:P      # use an already running server
    python3 tools/gen_commands.py --check         # exit 1 if the checked-in table is stale

The output is deterministic: commands and subcommands sorted by name, flags in
a fixed order. Unknown flags or key-spec shapes abort generation so that a new
Redis version is noticed instead of silently mis-described.
"""

import argparse
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "crates", "redcar-protocol", "src", "commands", "table.rs")

# Redis flag name -> Rust const in spec::flags (order = output order).
FLAGS = [
    "write", "readonly", "denyoom", "module", "admin", "pubsub", "noscript",
    "blocking", "loading", "stale", "skip_monitor", "skip_slowlog", "asking",
    "fast", "no_auth", "may_replicate", "no_mandatory_keys", "no_multi",
    "movablekeys", "allow_busy", "no_async_loading", "sentinel", "only_sentinel",
]
FLAG_CONST = {f: ("MOVABLE_KEYS" if f == "movablekeys" else f.upper()) for f in FLAGS}

ACL = [
    "keyspace", "read", "write", "set", "sortedset", "list", "hash", "string",
    "bitmap", "hyperloglog", "geo", "stream", "pubsub", "admin", "fast", "slow",
    "blocking", "dangerous", "connection", "transaction", "scripting",
]

KEY_FLAGS = [
    "RO", "RW", "OW", "RM", "access", "update", "insert", "delete", "not_key",
    "incomplete", "variable_flags",
]


class RespError(Exception):
    pass


class Resp:
    """Minimal blocking RESP2 client: enough for COMMAND and INFO."""

    def __init__(self, host, port):
        self.sock = socket.create_connection((host, port), timeout=10)
        self.buf = b""

    def call(self, *args):
        out = b"*%d\r\n" % len(args)
        for a in args:
            a = a.encode() if isinstance(a, str) else a
            out += b"$%d\r\n%s\r\n" % (len(a), a)
        self.sock.sendall(out)
        return self._read()

    def _line(self):
        while b"\r\n" not in self.buf:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise RespError("connection closed")
            self.buf += chunk
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def _exact(self, n):
        while len(self.buf) < n + 2:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise RespError("connection closed")
            self.buf += chunk
        data, self.buf = self.buf[:n], self.buf[n + 2:]
        return data

    def _read(self):
        line = self._line()
        kind, rest = line[:1], line[1:]
        if kind == b"+":
            return rest.decode()
        if kind == b"-":
            raise RespError(rest.decode())
        if kind == b":":
            return int(rest)
        if kind == b"$":
            n = int(rest)
            return None if n < 0 else self._exact(n).decode()
        if kind == b"*":
            n = int(rest)
            return None if n < 0 else [self._read() for _ in range(n)]
        raise RespError("unexpected reply type %r" % kind)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server():
    tmp = tempfile.mkdtemp(prefix="redcar-gen-")
    port = free_port()
    proc = subprocess.Popen(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1",
         "--save", "", "--appendonly", "no", "--dir", tmp],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(100):
        try:
            return proc, tmp, Resp("127.0.0.1", port)
        except OSError:
            time.sleep(0.05)
    proc.kill()
    raise SystemExit("redis-server did not start")


def pairs(flat):
    """RESP2 maps arrive as flat [k, v, k, v...] arrays."""
    return dict(zip(flat[0::2], flat[1::2]))


def rust_str(s):
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def bits(names, table, prefix, what, cmd):
    out = []
    for n in names:
        if n not in table:
            raise SystemExit("%s: unknown %s %r; extend the generator and spec.rs" % (cmd, what, n))
    for t in table:
        if t in names:
            out.append(prefix + (t.upper() if what != "flag" else FLAG_CONST[t]))
    return " | ".join(out) if out else "0"


def begin_search(bs, cmd):
    bs = pairs(bs)
    spec = pairs(bs.get("spec") or [])
    if bs["type"] == "index":
        return "BeginSearch::Index(%d)" % spec["index"]
    if bs["type"] == "keyword":
        return "BeginSearch::Keyword { keyword: %s, start_from: %d }" % (
            rust_str(spec["keyword"]), spec["startfrom"])
    if bs["type"] == "unknown":
        return "BeginSearch::Unknown"
    raise SystemExit("%s: unknown begin_search %r" % (cmd, bs["type"]))


def find_keys(fk, cmd):
    fk = pairs(fk)
    spec = pairs(fk.get("spec") or [])
    if fk["type"] == "range":
        return "FindKeys::Range { last_key: %d, step: %d, limit: %d }" % (
            spec["lastkey"], spec["keystep"], spec["limit"])
    if fk["type"] == "keynum":
        return "FindKeys::KeyNum { key_num_idx: %d, first_key: %d, step: %d }" % (
            spec["keynumidx"], spec["firstkey"], spec["keystep"])
    if fk["type"] == "unknown":
        return "FindKeys::Unknown"
    raise SystemExit("%s: unknown find_keys %r" % (cmd, fk["type"]))


def key_spec(ks, cmd, ind):
    ks = pairs(ks)
    kflags = [f.lower() for f in ks.get("flags", [])]
    return (
        "%sKeySpec {\n%s    flags: %s,\n%s    begin: %s,\n%s    find: %s,\n%s}" % (
            ind, ind, bits(kflags, [k.lower() for k in KEY_FLAGS], "k::", "key flag", cmd),
            ind, begin_search(ks["begin_search"], cmd),
            ind, find_keys(ks["find_keys"], cmd), ind))


def command(entry, ind):
    name, arity, flags = entry[0], entry[1], entry[2]
    acl = [c.lstrip("@") for c in entry[6]]
    tips, specs, subs = entry[7], entry[8], entry[9]
    inner = ind + "    "
    lines = [
        "%sCommandSpec {" % ind,
        "%sname: %s," % (inner, rust_str(name)),
        "%sarity: %d," % (inner, arity),
        "%sflags: %s," % (inner, bits(flags, FLAGS, "f::", "flag", name)),
        "%sacl_categories: %s," % (inner, bits(acl, ACL, "a::", "acl category", name)),
        "%stips: &[%s]," % (inner, ", ".join(rust_str(t) for t in sorted(tips))),
    ]
    if specs:
        body = ",\n".join(key_spec(ks, name, inner + "    ") for ks in specs)
        lines.append("%skey_specs: &[\n%s,\n%s]," % (inner, body, inner))
    else:
        lines.append("%skey_specs: &[]," % inner)
    if subs:
        body = ",\n".join(command(s, inner + "    ") for s in sorted(subs, key=lambda s: s[0]))
        lines.append("%ssubcommands: &[\n%s,\n%s]," % (inner, body, inner))
    else:
        lines.append("%ssubcommands: &[]," % inner)
    lines.append("%s}" % ind)
    return "\n".join(lines)


def render(reply, version):
    entries = sorted(reply, key=lambda e: e[0])
    body = ",\n".join(command(e, "    ") for e in entries)
    return (
        "//! The builtin command table: generated by tools/gen_commands.py from redis-server %s — do not edit.\n"
        "//!\n"
        "//! Regenerate with `python3 tools/gen_commands.py`; check with `--check`.\n"
        "\n"
        "use super::spec::{acl as a, flags as f, key_flags as k};\n"
        "use super::spec::{BeginSearch, CommandSpec, FindKeys, KeySpec};\n"
        "\n"
        "/// Version of redis-server the table was generated from.\n"
        "pub const REDIS_VERSION: &str = %s;\n"
        "\n"
        "/// Every builtin command, sorted by name (binary-searchable); subcommands sorted too.\n"
        "pub static COMMANDS: &[CommandSpec] = &[\n%s,\n];\n" % (version, rust_str(version), body))


def fetch(conn):
    info = conn.call("INFO", "server")
    version = next(l.split(":", 1)[1].strip() for l in info.splitlines()
                   if l.startswith("redis_version:"))
    return conn.call("COMMAND"), version


def generate(addr):
    if addr:
        host, port = addr.rsplit(":", 1)
        return fetch(Resp(host, int(port)))
    proc, tmp, conn = start_server()
    try:
        return fetch(conn)
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        shutil.rmtree(tmp, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--from", dest="addr", metavar="HOST:PORT")
    ap.add_argument("--check", action="store_true")
    args = ap.parse_args()
    reply, version = generate(args.addr)
    text = render(reply, version)
    if args.check:
        try:
            with open(OUT, encoding="utf-8") as fh:
                current = fh.read()
        except FileNotFoundError:
            current = ""
        if current != text:
            print("crates/redcar-protocol/src/commands/table.rs is stale; run python3 tools/gen_commands.py", file=sys.stderr)
            return 1
        print("crates/redcar-protocol/src/commands/table.rs is current (redis %s, %d commands)" % (version, len(reply)))
        return 0
    with open(OUT, "w", encoding="utf-8") as fh:
        fh.write(text)
    print("wrote %s (redis %s, %d commands)" % (os.path.relpath(OUT, ROOT), version, len(reply)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
