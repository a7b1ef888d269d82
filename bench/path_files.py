#!/usr/bin/env python3
"""Which source files a command's path runs through, from a callgrind dump.

    bench/path_files.py DUMP REQUESTS [ROOT]

DUMP is a dump of one scenario (CALLGRIND_KEEP=1 bench/callgrind.sh ...; the dump of the
scenario is callgrind.out.PID.N, N >= 1), REQUESTS the requests it ran; files are named from
ROOT, the project's directory (guessed from the dump: src/..., crates/NAME/src/...). Prints two
counts:
- the files holding a function (not inlined) called at least once per request: the frames a
  profiler shows on the command's stack;
- the files whose code, inlined or not, runs at least one instruction per request on average
  (this also counts sampled work, such as the hot keys' one command in 16, and per-turn chores).
"""
import collections
import re
import signal
import sys

# Piped into `head`: stop quietly.
signal.signal(signal.SIGPIPE, signal.SIG_DFL)


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    path, requests = sys.argv[1], int(sys.argv[2])
    root = sys.argv[3] if len(sys.argv) > 3 else None
    files, fns = {}, {}

    def name(table, value):
        m = re.match(r"\((\d+)\)(?: (.*))?$", value)
        if not m:
            return value
        if m.group(2) is not None:
            table[m.group(1)] = m.group(2)
        return table.get(m.group(1), value)

    home = {}  # function -> the file it is defined in
    calls = collections.Counter()
    cost = collections.Counter()  # file -> instructions run there (inlined code in its own file)
    fl = fi = callee = None
    skip_cost_line = False
    for line in open(path, errors="replace"):
        line = line.rstrip("\n")
        if not line:
            continue
        head = line[0]
        if head.isdigit() or head in "+-*":
            if skip_cost_line:  # the cost line of a call: inclusive, not this function's own
                skip_cost_line = False
                continue
            parts = line.split()
            if len(parts) >= 2 and parts[1].isdigit():
                cost[fi] += int(parts[1])
            continue
        key, _, value = line.partition("=")
        if key == "fl":
            fl = fi = name(files, value)
        elif key in ("fi", "fe"):
            fi = name(files, value)
        elif key == "fn":
            home.setdefault(name(fns, value), fl)
            fi = fl
        elif key in ("cfi", "cfl"):
            name(files, value)
        elif key == "cfn":
            callee = name(fns, value)
        elif key == "calls":
            calls[callee] += int(value.split()[0])
            skip_cost_line = True

    root = root or common_root(home.values())
    on_stack = collections.defaultdict(list)
    for fn, count in calls.items():
        file = home.get(fn)
        if file and file.startswith(root) and count >= requests:
            on_stack[file[len(root):]].append(fn.split("::")[-1])
    print(f"{len(on_stack)} files hold a function called at least once per request:")
    for file in sorted(on_stack):
        print(f"  {file}: {', '.join(sorted(set(on_stack[file]))[:5])}")
    ran = sorted(
        ((c / requests, f[len(root):]) for f, c in cost.items() if f and f.startswith(root)),
        reverse=True,
    )
    ran = [(c, f) for c, f in ran if c >= 1]
    print(f"{len(ran)} files run at least one instruction per request (inlined code counted in its file):")
    for c, f in ran:
        print(f"  {c:8.1f} {f}")


def common_root(paths):
    """The project's directory (holding src/ and the workspace's crates/), guessed from the
    files the dump names."""
    for p in paths:
        if p and "/src/" in p and "/rustc/" not in p and "/.cargo/" not in p:
            at = p.find("/crates/")
            at = at if at >= 0 else p.index("/src/")
            return p[: at + 1]
    return "/"


if __name__ == "__main__":
    main()
