"""Checks that cannot fail are defects: nudge every input and see which claims move.

``numbook verify --perturb`` re-runs each check once per input (``given()``), with that input
nudged (a count by one, a float by 1%), and compares every value a page binds a claim to:

- an input that moves no bound claim (other than its own statement in Given) is **dead**: the
  page states it, and nothing the page claims depends on it;
- a bound claim that no input moves is **constant**: a typed number standing in for a result,
  unless the check says why it is fixed (``value(name, x, fixed="bytes of an fp32 element: a
  property of the dtype")``) or it is a sourced fact (``fact()``).

The report is a table and a status line; both are written to ``perturb.json`` in the result
cache, and the run report page shows the last one.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .claims import format_value
from .result import CheckResult

__all__ = ["GivenRow", "PerturbReport", "perturb", "format_report", "save_report", "load_report"]


@dataclass(frozen=True)
class GivenRow:
    check: str
    given: str
    was: str
    nudged: str
    verdict: str                 # moves | dead | not nudged | failed
    moved: tuple[str, ...] = ()
    note: str = ""


@dataclass
class PerturbReport:
    rows: list[GivenRow] = field(default_factory=list)
    constants: dict[str, list[str]] = field(default_factory=dict)   # check -> bound values no input moves
    fixed: dict[str, dict[str, str]] = field(default_factory=dict)  # check -> value -> why it is fixed
    when: str = ""

    @property
    def dead(self) -> list[GivenRow]:
        return [r for r in self.rows if r.verdict == "dead"]

    @property
    def clean(self) -> bool:
        return not self.dead and not any(self.constants.values()) and not any(r.verdict == "failed"
                                                                                for r in self.rows)

    def status(self) -> str:
        moving = sum(r.verdict == "moves" for r in self.rows)
        const = sum(len(v) for v in self.constants.values())
        failed = sum(r.verdict == "failed" for r in self.rows)
        return (f"perturb: {len(self.rows)} inputs nudged, {moving} move claims, {len(self.dead)} dead, "
                f"{failed} failed when nudged; {const} constant claims; "
                f"{sum(len(v) for v in self.fixed.values())} fixed with a reason; "
                + ("clean" if self.clean else "NOT clean"))


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return bool(a == b)


def _nudge_text(x: Any, by: float | None = None) -> tuple[str, bool]:
    """The nudged input as ``given()`` makes it (see ``numbook.check._nudge``), and whether it is nudged."""
    from .check import _nudge

    moved = _nudge(x, by)
    if isinstance(x, list) and isinstance(moved, list) and moved != x:
        return "each ×1.01", True
    if moved is x or isinstance(x, bool) or not isinstance(x, int | float):
        return format_value(x), False
    return format_value(moved), True


def perturb(results: dict[str, CheckResult], bound: dict[str, set[str]],
            rerun: Callable[[str, str], CheckResult]) -> PerturbReport:
    """Nudge each input of each check whose values the pages bind; ``rerun(check, input)`` runs it nudged."""
    report = PerturbReport(when=_dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC"))
    for check in sorted({r.check: r for r in results.values()}):
        base = next(r for r in results.values() if r.check == check)
        names = bound.get(check, set())
        if not base.ok or not names:
            continue
        moved_any: set[str] = set()
        for given, x in base.inputs.items():
            nudged, ok = _nudge_text(x, base.nudges.get(given))
            if not ok:
                report.rows.append(GivenRow(check, given, format_value(x), nudged, "not nudged",
                                            note="not a number: a shape, a flag or a text"))
                continue
            res = rerun(check, given)
            if not res.ok:
                last = res.stderr.strip().splitlines()[-1] if res.stderr.strip() else str(res.status)
                report.rows.append(GivenRow(check, given, format_value(x), nudged, "failed", note=last))
                continue
            moved = tuple(sorted(n for n in names if n != given
                                 and not _same(base.lookup(n)[1], res.lookup(n)[1])))
            moved_any |= set(moved)
            report.rows.append(GivenRow(check, given, format_value(x), nudged, "moves" if moved else "dead", moved))
        fixed = {n: str(why) for n, why in base.fixed.items() if n in names}
        if fixed:
            report.fixed[check] = fixed
        const = sorted(n for n in names if n in base.values and n not in moved_any and n not in fixed
                       and n not in base.facts)
        if const:
            report.constants[check] = const
    return report


def format_report(rep: PerturbReport) -> str:
    rows = [("check", "input", "value", "nudged", "verdict", "claims moved")]
    for r in rep.rows:
        moved = ", ".join(r.moved[:6]) + (f" and {len(r.moved) - 6} more" if len(r.moved) > 6 else "")
        rows.append((r.check, r.given, r.was, r.nudged, r.verdict, moved or r.note))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    out = ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in rows]
    for check, names in sorted(rep.constants.items()):
        out.append(f"{check}: constant claims (no input moves them; compute them, source them with fact(), or "
                   f"say why they are fixed): {', '.join(names)}")
    out.append(rep.status())
    return "\n".join(out)


def save_report(rep: PerturbReport, cache_dir: Path | None) -> None:
    if cache_dir is None:
        return
    cache_dir.mkdir(parents=True, exist_ok=True)
    (cache_dir / "perturb.json").write_text(json.dumps(asdict(rep), indent=1), encoding="utf-8")


def load_report(cache_dir: Path | None) -> PerturbReport | None:
    f = cache_dir / "perturb.json" if cache_dir is not None else None
    if f is None or not f.is_file():
        return None
    try:
        data = json.loads(f.read_text(encoding="utf-8"))
        rows = [GivenRow(**{**r, "moved": tuple(r.get("moved", ()))}) for r in data["rows"]]
        return PerturbReport(rows, data.get("constants", {}), data.get("fixed", {}), data.get("when", ""))
    except (ValueError, TypeError, KeyError):
        return None
