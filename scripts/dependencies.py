#!/usr/bin/env python3
"""Checks the rules docs/dependencies.md sets for redcar's direct dependencies.

1. Every dependency in every Cargo.toml of the workspace has its reason next to it: a comment
   line above it (a group of dependencies listed together may share one comment).
2. Every dependency is maintained: its newest release on crates.io is at most 365 days old,
   read from the crates.io sparse index (each version's `pubtime`). Without the index
   (offline), this check is skipped with a note; the first one always runs.

Exit status 1 when a rule is broken, with one line per dependency that breaks it.
"""

import datetime
import json
import pathlib
import re
import sys
import urllib.request

ROOT = pathlib.Path(__file__).resolve().parent.parent
MAX_AGE_DAYS = 365
SECTIONS = ("dependencies", "dev-dependencies", "build-dependencies")
# Crates whose newest release is older than a year but that are known to be kept: none today.
# An entry needs its reason (where the maintenance shows: commits, a release branch, ...).
KEPT = {}


def manifests():
    yield ROOT / "Cargo.toml"
    yield from sorted((ROOT / "crates").glob("*/Cargo.toml"))


def dependencies(manifest):
    """(name, has a reason, line number, is a path dependency) per dependency of the file."""
    section, reason = None, False
    for number, line in enumerate(manifest.read_text().splitlines(), 1):
        stripped = line.strip()
        header = re.fullmatch(r"\[([^\]]+)\]", stripped)
        if header:
            section, reason = header.group(1), False
            continue
        if section not in SECTIONS:
            continue
        if stripped.startswith("#"):
            reason = True
            continue
        if not stripped:
            reason = False
            continue
        entry = re.match(r"([A-Za-z0-9_-]+)\s*=", stripped)
        if entry:
            yield entry.group(1), reason, number, "path =" in stripped


def newest_release(name):
    """The newest non-yanked release's (version, publication time) from the sparse index."""
    lower = name.lower()
    if len(lower) <= 2:
        path = f"{len(lower)}/{lower}"
    elif len(lower) == 3:
        path = f"3/{lower[0]}/{lower}"
    else:
        path = f"{lower[:2]}/{lower[2:4]}/{lower}"
    request = urllib.request.Request(f"https://index.crates.io/{path}",
                                     headers={"User-Agent": "redcar scripts/dependencies.py"})
    with urllib.request.urlopen(request, timeout=10) as reply:
        rows = [json.loads(line) for line in reply.read().decode().splitlines() if line]
    kept = [r for r in rows if not r.get("yanked") and r.get("pubtime")]
    newest = max(kept, key=lambda r: r["pubtime"])
    return newest["vers"], datetime.datetime.fromisoformat(newest["pubtime"].replace("Z", "+00:00"))


def main():
    failures = []
    names = {}
    for manifest in manifests():
        where = manifest.relative_to(ROOT)
        for name, reason, number, local in dependencies(manifest):
            if not reason:
                failures.append(f"{where}:{number}: {name} has no reason (a comment line above it)")
            if not local:
                names.setdefault(name, f"{where}:{number}")
    now = datetime.datetime.now(datetime.timezone.utc)
    checked = 0
    for name, where in sorted(names.items()):
        try:
            version, published = newest_release(name)
        except OSError as error:
            print(f"dependencies: age skipped: the crates.io index cannot be read ({error})",
                  file=sys.stderr)
            break
        checked += 1
        age = (now - published).days
        if age > MAX_AGE_DAYS and name not in KEPT:
            failures.append(f"{where}: {name}: newest release {version} is {age} days old "
                            f"(published {published:%Y-%m-%d}); replace it, or list it in KEPT "
                            "with where its maintenance shows")
    for failure in failures:
        print(f"dependencies: {failure}", file=sys.stderr)
    if failures:
        return 1
    print(f"dependencies: ok ({len(names)} crates with their reasons; "
          f"{checked} with a release in the last {MAX_AGE_DAYS} days)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
