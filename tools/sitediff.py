"""Compare two builds of the site: which files differ, and whether only in numbers.

    python tools/sitediff.py SITE_A SITE_B [--show N]

A refactoring of the tool must leave every page as it was, but a build stamps dates and run times,
and a measured figure (a latency, a throughput) differs on every run. Each text file of both sites
is cut into tags and text; every run of digits is masked, and two files whose masked tokens agree
differ only in numbers: the numbers that differ are listed with the words around them, to read
(a date, a run time, a measured value; anything else is a finding). Files that differ in more than
numbers are shown as a unified diff of their tokens. Exit status 1 if any file differs in more
than numbers, or exists in one site only.
"""

from __future__ import annotations

import argparse
import difflib
import re
import sys
from pathlib import Path

TOKEN = re.compile(r"<[^>]*>|[^<]+")
DIGITS = re.compile(r"\d+")
TEXT = {".html", ".json", ".md", ".py", ".ipynb", ".txt", ".xml", ".js", ".css", ".svg"}


def tokens(path: Path) -> list[str]:
    text = path.read_text(encoding="utf-8", errors="replace")
    return [t for t in TOKEN.findall(text) if t.strip()] if path.suffix in {".html", ".svg", ".xml"} else \
        text.splitlines()


def compare(a: Path, b: Path, show: int) -> int:
    files_a = {p.relative_to(a) for p in a.rglob("*") if p.is_file()}
    files_b = {p.relative_to(b) for p in b.rglob("*") if p.is_file()}
    bad = 0
    for rel in sorted(files_a ^ files_b):
        print(f"only in {'A' if rel in files_a else 'B'}: {rel}")
        bad += 1
    same = numbers = 0
    for rel in sorted(files_a & files_b):
        pa, pb = a / rel, b / rel
        if pa.read_bytes() == pb.read_bytes():
            same += 1
            continue
        if pa.suffix not in TEXT:
            print(f"binary differs: {rel}")
            bad += 1
            continue
        ta, tb = tokens(pa), tokens(pb)
        ma, mb = [DIGITS.sub("#", t) for t in ta], [DIGITS.sub("#", t) for t in tb]
        if ma == mb:
            numbers += 1
            diffs = [(x, y) for x, y in zip(ta, tb, strict=True) if x != y]
            print(f"numbers only: {rel} ({len(diffs)} tokens)")
            for x, y in diffs[:show]:
                print(f"    - {x.strip()[:160]}\n    + {y.strip()[:160]}")
            continue
        bad += 1
        print(f"DIFFERS: {rel}")
        for line in list(difflib.unified_diff(ta, tb, lineterm="", n=1))[2:2 + 4 * show]:
            print(f"    {line[:200]}")
    print(f"{same} files identical, {numbers} differ in numbers only, {bad} differ otherwise or exist in one site")
    return 1 if bad else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("a", type=Path)
    ap.add_argument("b", type=Path)
    ap.add_argument("--show", type=int, default=3, help="differing tokens shown per file")
    args = ap.parse_args()
    return compare(args.a, args.b, args.show)


if __name__ == "__main__":
    sys.exit(main())
