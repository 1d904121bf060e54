"""Scale test: generate a book of N small problems and measure what verifying and building it costs.

    python tools/scale_book.py --sizes 100 250 500 [--keep DIR]

For each size it writes a book (problems with a stdlib check each, every section, claims in
prose, tables and math), then measures a cold ``numbook verify`` (every check runs), a warm one
(every result from the cache: the hit rate is reported), and a warm ``mkdocs build --strict``.
It prints one row per size with the time per page, so growth can be read as linear or not.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PAGE = """---
id: {pid}
title: Table {n}
check: {stem}.py
---

## Statement

An embedding table maps each of $|V|$ tokens to $d$ numbers. How large is table {n}?

## Given

$|V| = [[{V_tex}|V]]$ tokens and $d = [[{d}|d]]$.

## Find

The element count and the fp32 memory.

## Strategy

Multiply the axis lengths, then the bytes per element.

## Solution

| table | elements | MB |
|---|---|---|
| this one | [[{numel:,}|numel]] | [[{mb:.1f}|fp32_mb]] |

## Answer

$[[{numel_tex}|numel]]$ elements, [[{mb:.1f}|fp32_mb]] MB.

## Check — numeric

```check
```

## Check — sanity

- The bytes are the elements times four. [[sanity:bytes]]

## Where this breaks

Tied tables share storage.

## Variation

Double $d$.
"""

CHECK = '''"""Table {n}."""
import array

from numbook.check import given, sanity, value

V = given("V", {V})
d = given("d", {d})
elem = array.array("f").itemsize
numel = value("numel", V * d)
value("fp32_mb", numel * elem / 1e6)
sanity("bytes", numel * elem == V * d * 4, "fp32 is four bytes an element", operands=(numel * elem, V * d * 4))
print(f"table ({{V}}, {{d}}): {{numel:,}} elements, {{numel * elem:,}} bytes")
'''

MKDOCS = """site_name: Scale test
theme: {name: material, font: false}
plugins:
  - search
  - numbook: {timeout: 60}
markdown_extensions:
  - numbook
  - tables
  - pymdownx.superfences
  - pymdownx.tabbed: {alternate_style: true}
  - pymdownx.arithmatex: {generic: true}
nav:
  - Home: index.md
"""


def make_book(root: Path, n: int) -> None:
    if root.exists():
        shutil.rmtree(root)
    (root / "docs").mkdir(parents=True)
    (root / "problems").mkdir()
    (root / "checks").mkdir()
    (root / "mkdocs.yml").write_text(MKDOCS, encoding="utf-8")
    (root / "docs" / "index.md").write_text("# Scale test\n\nGenerated problems.\n", encoding="utf-8")
    for i in range(n):
        series, num = "ABCDEFGHIJ"[i // 99], i % 99 + 1
        pid = f"I.9.{series}{num:02d}"
        stem = f"i9_{series.lower()}{num:02d}_table"
        V, d = 1000 + 7 * i, 64 + (i % 8) * 32
        numel = V * d
        (root / "problems" / f"{pid}.md").write_text(
            PAGE.format(pid=pid, n=i + 1, stem=stem, V=V, V_tex=f"{V:,}".replace(",", "{,}"), d=d, numel=numel,
                        mb=numel * 4 / 1e6,
                        numel_tex=f"{numel:,}".replace(",", "{,}")), encoding="utf-8")
        (root / "checks" / f"{stem}.py").write_text(CHECK.format(n=i + 1, V=V, d=d), encoding="utf-8")


def timed(cmd: list[str], cwd: Path) -> tuple[float, subprocess.CompletedProcess[str]]:
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1")
    started = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=3600, check=False)
    return time.perf_counter() - started, proc


def measure(root: Path, n: int) -> dict[str, float]:
    make_book(root, n)
    cold, p1 = timed([sys.executable, "-m", "numbook.cli", "verify", "--no-progress"], root)
    assert p1.returncode == 0, p1.stderr[-3000:]
    warm, p2 = timed([sys.executable, "-m", "numbook.cli", "verify", "--no-progress"], root)
    rows = [ln for ln in p2.stdout.splitlines() if ln.startswith("checks/")]
    hits = sum(" cache " in f" {ln} " for ln in rows)
    timed([sys.executable, "-m", "mkdocs", "build", "--strict"], root)       # fills the rendered-fence cache
    build, p3 = timed([sys.executable, "-m", "mkdocs", "build", "--strict"], root)
    assert p3.returncode == 0, p3.stderr[-3000:]
    return {"problems": n, "verify_cold_s": cold, "verify_warm_s": warm, "cache_hit_rate": hits / max(1, len(rows)),
            "build_warm_s": build, "build_ms_per_page": 1000 * build / n, "verify_cold_ms_per_check": 1000 * cold / n}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[100, 250, 500])
    ap.add_argument("--keep", type=Path, help="build the books here instead of a temporary folder")
    ap.add_argument("--json", type=Path, help="also write the rows as JSON")
    args = ap.parse_args()
    base = args.keep or Path(tempfile.mkdtemp(prefix="numbook-scale-"))
    rows = [measure(base / f"book-{n}", n) for n in args.sizes]
    head = ("problems", "verify cold", "per check", "verify warm", "hit rate", "build warm", "per page")
    print("  ".join(f"{h:>11}" for h in head))
    for r in rows:
        print("  ".join(f"{v:>11}" for v in (
            f"{r['problems']:.0f}", f"{r['verify_cold_s']:.1f} s", f"{r['verify_cold_ms_per_check']:.0f} ms",
            f"{r['verify_warm_s']:.2f} s", f"{r['cache_hit_rate']:.0%}", f"{r['build_warm_s']:.1f} s",
            f"{r['build_ms_per_page']:.0f} ms")))
    if len(rows) > 1:
        first, last = rows[0], rows[-1]
        grow = (last["build_warm_s"] / first["build_warm_s"]) / (last["problems"] / first["problems"])
        print(f"warm build grows {grow:.2f}× as fast as the page count (1.00 is linear)")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1), encoding="utf-8")
    if not args.keep:
        shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
