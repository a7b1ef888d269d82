"""The report: a per-fault table, where each check failed, statistics and the verdict lines."""

import collections
import re

from checker import CHECKS
from resp import key_slot

DATA_OPS = ("get", "rpush", "incr", "exec")  # latency is judged on these (WAIT waits by design)


def p99(values):
    if not values:
        return None
    s = sorted(values)
    return s[min(len(s) - 1, int(len(s) * 0.99))]


def fmt_ms(x):
    return "-" if x is None else f"{x * 1000:.1f}"


def kind_of(t, faults):
    w = window_of(t, faults)
    return w.split(" ", 1)[1] if w.startswith("#") else w


def window_of(t, faults):
    """The label of the fault window holding time t: "#3 failover", or "between faults"."""
    if t is None:
        return "whole run"
    for n, f in enumerate(faults, 1):
        if f["t_start"] <= t <= f["t_end"]:
            return f"#{n} {f['fault']}"
    return "between faults"


def nearest_fault(t, faults):
    """For a time between faults: how far it is from the closest fault window, e.g. "0.02 s
    before #3 primary-kill" (what a violation just outside a window was probably about)."""
    if t is None or not faults:
        return ""
    gaps = []
    for n, f in enumerate(faults, 1):
        gaps.append((f["t_start"] - t, f"before #{n} {f['fault']}") if t < f["t_start"]
                    else (t - f["t_end"], f"after #{n} {f['fault']} ended"))
    gap, what = min(gaps)
    return f" ({gap:.2f} s {what})"


def error_runs(hist):
    """Per client, runs of consecutive failed operations: (start, end) of each."""
    per = collections.defaultdict(list)
    for r in hist:
        if r["op"] != "msg":
            per[r["c"]].append(r)
    runs = []
    for recs in per.values():
        recs.sort(key=lambda r: r["i"])
        start = end = None
        for r in recs:
            if r["st"] == "err":
                start = r["t0"] if start is None else start
                end = r["t1"]
            elif start is not None:
                runs.append((start, end))
                start = None
        if start is not None:
            runs.append((start, end))
    return runs


def normalize(msg):
    """An error message with addresses and numbers blurred, for grouping."""
    msg = re.sub(r"127\.0\.0\.1:\d+", "ADDR", msg)
    return re.sub(r"\d+(\.\d+)?", "N", msg)[:110]


def fault_rows(hist, faults, t0):
    ops = [r for r in hist if r["op"] != "msg"]
    runs = error_runs(hist)
    rows = []
    outside = [r for r in ops if r["op"] in DATA_OPS
               and not any(f["t_start"] <= r["t0"] <= f["t_end"] for f in faults)]
    base = p99([r["t1"] - r["t0"] for r in outside])
    for n, f in enumerate(faults, 1):
        lo, hi = f["t_start"], f["t_end"]
        inside = [r for r in ops if lo <= r["t1"] and r["t0"] <= hi]
        errs = [r for r in inside if r["st"] == "err"]
        indet = sum(1 for r in errs if r["cls"] == "indeterminate")
        longest = max([e - s for s, e in runs if lo <= s <= hi] or [0])
        span = (max(r["t1"] for r in errs) - min(r["t0"] for r in errs)) if errs else None
        aff = f["_affected"]
        others = [r["t1"] - r["t0"] for r in inside if r["op"] in DATA_OPS
                  and key_slot(r["k"]) not in aff and lo <= r["t0"]]
        rows.append([str(n), f["fault"], f"{lo - t0:.1f}", f"{f['t_settled'] - lo:.1f}", str(len(inside)),
                     f"{len(errs)} ({indet} indet.)",
                     "-" if span is None else f"{span * 1000:.0f}", f"{longest * 1000:.0f}",
                     fmt_ms(p99(others)) if len(aff) < 16384 else "n/a", fmt_ms(base)])
    between = [r for r in ops if not any(f["t_start"] <= r["t1"] and r["t0"] <= f["t_end"]
                                         for f in faults)]
    berrs = [r for r in between if r["st"] == "err"]
    in_any = [(s, e) for s, e in runs
              if not any(f["t_start"] <= s <= f["t_end"] for f in faults)]
    rows.append(["-", "between faults", "", "", str(len(between)),
                 f"{len(berrs)} ({sum(1 for r in berrs if r['cls'] == 'indeterminate')} indet.)",
                 "", f"{max([e - s for s, e in in_any] or [0]) * 1000:.0f}", fmt_ms(base), fmt_ms(base)])
    return rows


def table(header, rows):
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows)]
    line = lambda cells: "| " + " | ".join(str(c).ljust(w) for c, w in zip(cells, widths)) + " |"
    out = [line(header), "|" + "|".join("-" * (w + 2) for w in widths) + "|"]
    return "\n".join(out + [line(r) for r in rows])


def render(hist, faults, verdict, t0, meta):
    out = []
    out.append(f"chaos soak: {meta['command']}")
    out.append(f"seed {meta['seed']}, {meta['seconds']:.0f} s of load, "
               f"{len(faults)} faults, {meta['clients']} clients")
    out.append("")
    for n, f in enumerate(faults, 1):
        notes = "; ".join(f["notes"])
        out.append(f"  #{n} at {f['t_start'] - t0:6.1f} s: {f['what']}" + (f" ({notes})" if notes else ""))
    out.append("")
    header = ["#", "fault", "at s", "to settle s", "ops", "client errors", "error span ms",
              "longest error run ms",
              "p99 other shards ms", "p99 outside faults ms"]
    out.append(table(header, fault_rows(hist, faults, t0)))
    out.append("")
    # Client errors by fault window, operation and message: what the engineers fixing src/ need.
    groups = collections.defaultdict(lambda: [0, 0])
    for r in hist:
        if r["st"] == "err":
            # An error belongs to the window it happened in: its end (t1).
            g = groups[(kind_of(r["t1"], faults), r["op"].upper(), normalize(r["e"]))]
            g[0] += 1
            g[1] += (r["c"], r["i"]) in verdict.outside
    if groups:
        out.append("client errors by fault kind, operation and message "
                   "(errors / how many of them no fault window allows):")
        for (w, op, msg), (n, bad) in sorted(groups.items(), key=lambda x: (x[0][0], -x[1][0])):
            out.append(f"  {n:6d} {bad:6d}  {w:16s} {op:9s} {msg}")
        out.append("")
    out.append("statistics:")
    for k, val in verdict.stats.items():
        out.append(f"  {k}: {val}")
    out.append("")
    for check in CHECKS:
        vs = verdict.violations[check]
        if check in verdict.skipped:
            out.append(f"SKIP  {check} (not judged: the soak did not start redcar)")
            continue
        if not vs:
            out.append(f"PASS  {check}")
            continue
        where = collections.Counter(window_of(t, faults) for t, _ in vs)
        out.append(f"FAIL  {check}: {len(vs)} violations ("
                   + ", ".join(f"{n} in {w}" for w, n in where.most_common()) + ")")
        for t, msg in vs[:5]:
            at = "" if t is None else f"at {t - t0:.2f} s, "
            w = window_of(t, faults)
            near = nearest_fault(t, faults) if w == "between faults" else ""
            out.append(f"        {at}{w}{near}: {msg}")
        if len(vs) > 5:
            out.append(f"        ... and {len(vs) - 5} more")
    return "\n".join(out)
