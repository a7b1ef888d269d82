#!/usr/bin/env python3
"""The node CPU of one `cluster.change_check: digest` check against cluster size (docs/scale.md).

Builds `CLUSTER NODES` texts shaped like a redis-server 7 node's (N/2 primaries with 4 slot ranges
each, one replica each) for N in 6, 32, 100, 1000, and runs the digest script's hashing on each
(the script of src/cluster/change_check.rs, reading ARGV[1] instead of calling CLUSTER NODES) 200
times with EVALSHA on the redis-server at 127.0.0.1:PORT; prints usec_per_call from
INFO commandstats. Resets the node's stats (CONFIG RESETSTAT): use a scratch redis-server, e.g.
    redis-server --port 7777 --save '' --appendonly no --daemonize yes
    bench/digest_cost.py 7777
"""
import random
import socket
import sys


def nodes_text(n):
    random.seed(n)
    shards = n // 2
    ids = ['%040x' % random.getrandbits(160) for _ in range(n)]
    per = 16384 // shards
    out = []
    for s in range(shards):
        p, r = ids[2 * s], ids[2 * s + 1]
        start = s * per
        end = 16383 if s == shards - 1 else start + per - 1
        q = (end - start + 1) // 4
        frags = ' '.join(f'{start + i * q}-{(start + (i + 1) * q - 1) if i < 3 else end}' for i in range(4))
        out.append(f'{p} 127.1.{s // 200}.{s % 200 + 1}:7000@17000 master - 0 1733353200{s % 1000:03d} {s + 1} connected {frags}')
        out.append(f'{r} 127.1.{(s + shards) // 200}.{(s + shards) % 200 + 1}:7000@17000 slave {p} 0 1733353200{s % 1000:03d} {s + 1} connected')
    out[0] = out[0].replace(' master ', ' myself,master ')
    return '\n'.join(out) + '\n'


def main():
    port = int(sys.argv[1])
    sock = socket.create_connection(('127.0.0.1', port))
    f = sock.makefile('rb')

    def cmd(*args):
        b = b'*%d\r\n' % len(args)
        for a in args:
            a = a if isinstance(a, bytes) else str(a).encode()
            b += b'$%d\r\n%s\r\n' % (len(a), a)
        sock.sendall(b)
        line = f.readline()
        if line[:1] == b'$':
            return f.read(int(line[1:]) + 2)[:-2]
        return line.strip()

    script = ("local t = string.gsub('\\n' .. ARGV[1], '\\n(%x+ %S+ %S+ %S+) %d+ %d+', '\\n%1')\n"
              "return redis.sha1hex(t)\n")
    sha = cmd('SCRIPT', 'LOAD', script).decode()
    print('| nodes | CLUSTER NODES bytes | µs per digest (hashing) |')
    print('|---|---|---|')
    for n in (6, 32, 100, 1000):
        text = nodes_text(n)
        cmd('CONFIG', 'RESETSTAT')
        for _ in range(200):
            cmd('EVALSHA', sha, 0, text)
        info = cmd('INFO', 'commandstats').decode()
        line = next(l for l in info.splitlines() if l.startswith('cmdstat_evalsha'))
        usec = float(line.split('usec_per_call=')[1].split(',')[0])
        print(f'| {n} | {len(text)} | {usec:.0f} |')


if __name__ == '__main__':
    main()
