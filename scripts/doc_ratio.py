#!/usr/bin/env python3
"""Prints the share of doc-comment lines in redcar's non-test Rust code.

What it counts, over every `.rs` file under `src/` and `crates/*/src`:

- left out as test code: files named `tests.rs` or `*_tests.rs`, files named `loom_*`, files
  under a `tests` folder, and the tail of a file from its `#[cfg(test)]` / `mod tests {` on;
- every other non-blank line counts as a line of code;
- of those, a line that starts (after indentation) with `///` or `//!` counts as a doc line.

The share is doc lines over lines of code. tests/doc_ratio.rs computes the same figure and
fails below its floor (docs/testing.md); run this script to see where the share is low:

    scripts/doc_ratio.py            # the total, and how many doc lines the floor still needs
    scripts/doc_ratio.py --files    # per file, lowest share first

Doc lines are meant to carry the why and what holds (invariants, units, callers, failure), so
the floor is a nudge to write them, not a count to pad.
"""

import math
import pathlib
import sys

# Keep in step with FLOOR_PERCENT in tests/doc_ratio.rs.
FLOOR_PERCENT = 18.0
ROOT = pathlib.Path(__file__).resolve().parent.parent
TEST_TAIL = "\n#[cfg(test)]\nmod tests {"


def sources(root):
    """The non-test `.rs` files under src/ and crates/*/src, relative to `root`, sorted."""
    bases = [root / "src"] + sorted(p / "src" for p in (root / "crates").iterdir() if p.is_dir())
    for base in bases:
        for path in sorted(base.rglob("*.rs")):
            rel = path.relative_to(root)
            name = path.name
            if "tests" in rel.parts[:-1] or "target" in rel.parts[:-1]:
                continue
            if name == "tests.rs" or name.endswith("_tests.rs") or name.startswith("loom_"):
                continue
            yield rel


def count(text):
    """(lines of code, doc lines) of one file's text, its test tail left out."""
    cut = text.find(TEST_TAIL)
    if cut >= 0:
        text = text[:cut]
    code = doc = 0
    for line in text.splitlines():
        line = line.strip()
        if not line:
            continue
        code += 1
        if line.startswith("///") or line.startswith("//!"):
            doc += 1
    return code, doc


def main(argv):
    root = ROOT
    args = [a for a in argv if a != "--files"]
    if args:
        root = pathlib.Path(args[0]).resolve()
    rows = []
    for rel in sources(root):
        code, doc = count((root / rel).read_text(encoding="utf-8", errors="replace"))
        if code:
            rows.append((doc / code, code, doc, rel.as_posix()))
    if "--files" in argv:
        for share, code, doc, rel in sorted(rows):
            print(f"{100 * share:5.1f}%  {doc:5d} / {code:5d}  {rel}")
    code = sum(r[1] for r in rows)
    doc = sum(r[2] for r in rows)
    need = max(0, math.ceil(FLOOR_PERCENT / 100 * code) - doc)
    print(
        f"non-blank non-test lines {code} doc {doc} ratio {100 * doc / code:.1f}% "
        f"need for {FLOOR_PERCENT:g}%: {need}"
    )


if __name__ == "__main__":
    try:
        main(sys.argv[1:])
    except BrokenPipeError:
        # `--files | head`: the reader has what it wanted.
        sys.stderr.close()
