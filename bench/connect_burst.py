#!/usr/bin/env python3
"""A connect burst (bench/connect_burst.sh): CONCURRENCY threads open TOTAL connections to
HOST:PORT between them, each thread connecting again as soon as its previous connect() returned
(what a pool of workers starting at once does; nothing waits for redcar to accept). Each
connection sends PING at once; a reader thread per connector times its +PONG replies; all
connections stay open until the end. Prints one JSON object: connect times (the
connect() call) and connect-to-+PONG times in ms: p50, p99, max, and how many took 0.9 s or more
("stalled": a SYN dropped because the listen queue was full is sent again after 1 s)."""

import json
import resource
import select
import socket
import sys
import threading
import time


def percentile(values, q):
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def summary(values):
    return {
        "p50_ms": round(percentile(values, 0.50) * 1000, 3),
        "p99_ms": round(percentile(values, 0.99) * 1000, 3),
        "max_ms": round(max(values, default=0.0) * 1000, 3),
        "stalled": sum(1 for v in values if v >= 0.9),
    }


def main():
    host, port, total, concurrency = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    held, connects, replies, errors = [], [], [], []
    lock = threading.Lock()
    start = threading.Barrier(concurrency)

    def connector(count):
        mine, my_connects, my_replies, my_errors = [], [], [], []
        # A reader thread per connector times the replies while the connector keeps connecting.
        poller, waiting, done = select.epoll(), {}, threading.Event()

        def reader():
            deadline = None
            while waiting or not done.is_set():
                if done.is_set():
                    deadline = deadline or time.perf_counter() + 30
                    if time.perf_counter() > deadline:
                        my_errors.extend("no reply within 30 s" for _ in list(waiting))
                        return
                for fd, _ in poller.poll(0.05):
                    s, began, buffered = waiting[fd]
                    try:
                        chunk = s.recv(64)
                    except OSError as e:
                        chunk, buffered = b"", str(e).encode()
                    buffered += chunk
                    if chunk and not buffered.endswith(b"\r\n"):
                        waiting[fd] = (s, began, buffered)
                        continue
                    poller.unregister(fd)
                    del waiting[fd]
                    if buffered == b"+PONG\r\n":
                        my_replies.append(time.perf_counter() - began)
                    else:
                        my_errors.append(f"reply {buffered!r}")

        replies_thread = threading.Thread(target=reader)
        replies_thread.start()
        start.wait()
        for _ in range(count):
            began = time.perf_counter()
            try:
                s = socket.create_connection((host, port), timeout=30)
                my_connects.append(time.perf_counter() - began)
                waiting[s.fileno()] = (s, began, b"")
                poller.register(s.fileno(), select.EPOLLIN)
                s.sendall(b"PING\r\n")
                mine.append(s)
            except OSError as e:
                my_errors.append(str(e))
        done.set()
        replies_thread.join()
        poller.close()
        with lock:
            held.extend(mine)
            connects.extend(my_connects)
            replies.extend(my_replies)
            errors.extend(my_errors)

    shares = [total // concurrency + (1 if i < total % concurrency else 0) for i in range(concurrency)]
    threads = [threading.Thread(target=connector, args=(n,)) for n in shares]
    began = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - began
    for s in held:
        s.close()
    print(json.dumps({
        "connections": len(connects),
        "replied": len(replies),
        "errors": len(errors),
        "first_error": errors[0] if errors else None,
        "seconds": round(elapsed, 3),
        "connect": summary(connects),
        "first_reply": summary(replies),
    }))


if __name__ == "__main__":
    main()
