"""Print the mutation score of each mutated module from mutmut's results, minus the listed equivalents.

Run by ``nox -s mutation`` after ``mutmut run``. A module's score is killed / (all mutants - listed
equivalents - mutants never checked). Mutants with no covering test count as survivors (a line no
fast test reaches is a line no test pins down); a timeout counts as killed (mutmut's convention).

    python tools/mutation_score.py [--min 90]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tomllib
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EQUIVALENTS = ROOT / "tests" / "mutation" / "equivalents.toml"
KILLED = {"killed", "timeout", "caught by type check"}


def results() -> dict[str, str]:
    """Mutant name -> status, from ``mutmut results --all true``."""
    out = subprocess.run([sys.executable, "-m", "mutmut", "results", "--all", "true"], cwd=ROOT,
                         capture_output=True, text=True, check=True).stdout
    found: dict[str, str] = {}
    for line in out.splitlines():
        name, sep, status = line.strip().rpartition(": ")
        if sep and "__mutmut_" in name:
            found[name] = status.strip()
    return found


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--min", type=float, default=None, help="exit 1 if a module scores below this percentage")
    args = ap.parse_args(argv)
    equivalent = tomllib.loads(EQUIVALENTS.read_text(encoding="utf-8")).get("equivalent", {})
    per: dict[str, Counter[str]] = defaultdict(Counter)
    found = results()
    for name, status in found.items():
        module = name.split(".x_")[0].split(".xǁ")[0]   # mutmut names functions x_f and methods xǁClassǁm
        per[module]["equivalent" if name in equivalent else status] += 1
    worst = 100.0
    print(f"{'module':<20} {'mutants':>8} {'killed':>7} {'survived':>9} {'no tests':>9} {'equiv.':>7} "
          f"{'unchecked':>10} {'score':>7}")
    for module, c in sorted(per.items()):
        killed = sum(c[s] for s in KILLED)
        counted = sum(c.values()) - c["equivalent"] - c["not checked"]
        score = 100 * killed / counted if counted else 0.0
        worst = min(worst, score)
        print(f"{module:<20} {sum(c.values()):>8} {killed:>7} {c['survived']:>9} {c['no tests']:>9} "
              f"{c['equivalent']:>7} {c['not checked']:>10} {score:>6.1f}%")
    stale = sorted(set(equivalent) - set(found))
    if stale:
        print(f"equivalents.toml names {len(stale)} mutants mutmut no longer makes: {', '.join(stale[:5])}")
    if args.min is not None and worst < args.min:
        print(f"a module scores {worst:.1f}%, below {args.min:g}%")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
