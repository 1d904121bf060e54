"""``nox -s rehearse``: the book's claims verified where the book says they hold, not only on a quiet machine.

    python tools/rehearse.py [--root .] [--conditions quiet,busy,avx2,default]

Measured claims are written to hold on a loaded machine and on another CPU. This runs
``numbook verify --no-cache`` (every check runs again; the result cache is neither read nor pruned)
under each condition and prints one row per condition:

- ``quiet``: the machine as it is;
- ``busy``: a fixed neighbour load, one process spinning on each of half the cores (at least one),
  started before the checks and stopped after them;
- ``avx2`` and ``default``: torch's CPU dispatch forced to another instruction set
  (``ATEN_CPU_CAPABILITY``; a key of the result cache, so results never mix).

Every claim must pass under every condition: exit status 1 if any condition has a fault, and its
faults are printed.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import re
import subprocess
import sys
import time
from pathlib import Path

CONDITIONS = {
    "quiet": {},
    "busy": {},
    "avx2": {"ATEN_CPU_CAPABILITY": "avx2"},
    "default": {"ATEN_CPU_CAPABILITY": "default"},
}
SUMMARY = re.compile(r"^(\d+) checks, (\d+) claims verified, (\d+) faults in ([\d.]+) s$", re.M)


def _spin() -> None:   # pragma: no cover - runs in the neighbour's processes
    x = 0
    while True:
        x = (x * 1103515245 + 12345) % 2**31


def neighbours(n: int) -> list[mp.Process]:
    procs = [mp.Process(target=_spin, daemon=True) for _ in range(n)]
    for p in procs:
        p.start()
    return procs


def run(root: Path, name: str, numbook: str) -> tuple[str, int, str]:
    env = dict(os.environ, **CONDITIONS[name])
    load = neighbours(max(1, (os.cpu_count() or 2) // 2)) if name == "busy" else []
    try:
        proc = subprocess.run([numbook, "verify", "--root", str(root), "--no-cache", "--no-progress"],
                              capture_output=True, text=True, env=env, check=False)
    finally:
        for p in load:
            p.kill()
            p.join()
    return proc.stdout, proc.returncode, proc.stderr


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", type=Path, default=Path("."))
    ap.add_argument("--conditions", default=",".join(CONDITIONS))
    args = ap.parse_args()
    numbook = str(Path(sys.executable).with_name("numbook"))
    rows, failed = [], []
    for name in args.conditions.split(","):
        if name not in CONDITIONS:
            ap.error(f"unknown condition {name!r} (known: {', '.join(CONDITIONS)})")
        started = time.perf_counter()
        out, rc, err = run(args.root, name, numbook)
        m = SUMMARY.search(out)
        checks, claims, faults = (m.group(1), m.group(2), m.group(3)) if m else ("?", "?", "?")
        what = ", ".join(f"{k}={v}" for k, v in CONDITIONS[name].items()) or (
            f"{max(1, (os.cpu_count() or 2) // 2)} spinning neighbour(s)" if name == "busy" else "as it is")
        rows.append((name, what, checks, claims, faults, f"{time.perf_counter() - started:.0f} s"))
        if rc != 0 or not m:
            failed.append((name, [ln for ln in out.splitlines() if ":" in ln and not SUMMARY.match(ln)][:20],
                           err.strip().splitlines()[-3:]))
        print(f"rehearse: {name}: {faults} faults ({rows[-1][-1]})", file=sys.stderr, flush=True)
    head = ("condition", "setting", "checks", "claims", "faults", "time")
    widths = [max(len(str(r[i])) for r in [head, *rows]) for i in range(len(head))]
    for r in [head, *rows]:
        print("  ".join(str(c).ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())
    for name, lines, err in failed:
        print(f"\n{name}: faults")
        for ln in lines + err:
            print(f"  {ln}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
