"""Watches the host for stalls during a soak: a process that only sleeps and wakes.

    stallwatch.py OUT THRESHOLD_S

Sleeps 20 ms at a time; when a wake-up comes more than THRESHOLD_S late, nothing on the host
was running on time (redcar, the nodes and the clients included: a loaded machine, a paused
VM), and the stall is appended to OUT as one JSON line {"from": t, "to": t} in
time.monotonic() seconds, the clock the workload's histories use. The soak turns each into a
"host-stall" window in which errors are allowed (soak.py, `host_stalls`): a client timing out
because the machine stopped is not redcar breaking its error contract.
"""

import json
import signal
import sys
import time

STEP = 0.02


def main():
    out_path, threshold = sys.argv[1], float(sys.argv[2])
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    with open(out_path, "a", buffering=1) as out:
        while True:
            before = time.monotonic()
            time.sleep(STEP)
            after = time.monotonic()
            if after - before - STEP > threshold:
                out.write(json.dumps({"from": before + STEP, "to": after}) + "\n")


if __name__ == "__main__":
    main()
