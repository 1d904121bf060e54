"""Checks that cannot fail are defects: nudge every input and see which claims move.

``numbook verify --perturb`` re-runs each check once per input (``given()``), with that input
nudged (a count by one, a float by 1%), and compares every value a page binds a claim to:

- an input that moves no bound claim (other than its own statement in Given) is **dead**: the
  page states it, and nothing the page claims depends on it;
- a bound claim that no input moves is **constant**: a typed number standing in for a result,
  unless the check says why it is fixed (``value(name, x, fixed="bytes of an fp32 element: a
  property of the dtype")``) or it is a sourced fact (``fact()``);
- a value the check declares **measured** (``value(name, x, measured="...")``: a time, a
  bandwidth, anything read off this machine) moves between any two runs, so it is left out of
  both tests: noise would pass every input as live. Such values are listed apart, and an input
  that moves nothing but measured values gets the verdict *measured only*.

The report is a table and a status line. It is the book's record, kept in the repository at
``<checks_dir>/perturb.json``: each ``--perturb`` run replaces the entries of the checks it
nudged and keeps the others, with the hash of every file each check read, so the run report
shows the whole book's table and marks a check whose files changed since as stale.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from numbook.core.claims import format_value
from numbook.core.result import CheckResult

__all__ = ["GivenRow", "PerturbReport", "perturb", "format_report", "merge", "stale", "report_path", "save_report",
           "load_report"]


@dataclass(frozen=True)
class GivenRow:
    check: str
    given: str
    was: str
    nudged: str
    verdict: str                 # moves | dead | measured only | not nudged | failed
    moved: tuple[str, ...] = ()
    note: str = ""


@dataclass
class PerturbReport:
    rows: list[GivenRow] = field(default_factory=list)
    constants: dict[str, list[str]] = field(default_factory=dict)   # check -> bound values no input moves
    fixed: dict[str, dict[str, str]] = field(default_factory=dict)  # check -> value -> why it is fixed
    measured: dict[str, dict[str, str]] = field(default_factory=dict)  # check -> value -> what was measured
    when: str = ""
    checked: dict[str, str] = field(default_factory=dict)    # check -> when it was last nudged
    reads: dict[str, dict[str, str | None]] = field(default_factory=dict)  # check -> file read -> its hash

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
                f"{sum(len(v) for v in self.measured.values())} measured; "
                + ("clean" if self.clean else "NOT clean"))


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return bool(a == b)


def _nudge_text(x: Any, by: float | None = None) -> tuple[str, bool]:
    """The nudged input as ``given()`` makes it (see ``numbook.check._nudge``), and whether it is nudged."""
    from numbook.check import _nudge

    moved = _nudge(x, by)
    if isinstance(x, list) and isinstance(moved, list) and moved != x:
        return "each ×1.01", True
    if by == 0 or moved is x or isinstance(x, bool) or not isinstance(x, int | float):
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
        report.checked[check] = report.when
        report.reads[check] = dict(base.reads)
        measured = {n: str(what) for n, what in base.measured.items() if n in names}
        compared = names - set(measured)
        moved_any: set[str] = set()
        for given, x in base.inputs.items():
            nudged, ok = _nudge_text(x, base.nudges.get(given))
            if not ok:
                why = ("a seed: it names a draw, no small change of it exists" if base.nudges.get(given) == 0
                       else "not a number: a shape, a flag or a text")
                report.rows.append(GivenRow(check, given, format_value(x), nudged, "not nudged", note=why))
                continue
            res = rerun(check, given)
            if not res.ok:
                last = res.stderr.strip().splitlines()[-1] if res.stderr.strip() else str(res.status)
                report.rows.append(GivenRow(check, given, format_value(x), nudged, "failed", note=last))
                continue
            moved = tuple(sorted(n for n in compared if n != given
                                 and not _same(base.lookup(n)[1], res.lookup(n)[1])))
            moved_any |= set(moved)
            verdict = "moves" if moved else "measured only" if measured else "dead"
            report.rows.append(GivenRow(check, given, format_value(x), nudged, verdict, moved,
                                        note="moves no value but measured ones, which noise moves too"
                                        if verdict == "measured only" else ""))
        fixed = {n: str(why) for n, why in base.fixed.items() if n in names}
        if fixed:
            report.fixed[check] = fixed
        if measured:
            report.measured[check] = measured
        const = sorted(n for n in compared if n in base.values and n not in moved_any and n not in fixed
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


def merge(old: PerturbReport | None, new: PerturbReport, keep: set[str] | None = None) -> PerturbReport:
    """``new``'s checks replace theirs in ``old``; ``old``'s other checks stay if in ``keep`` (None: all)."""
    if old is None:
        return new
    mine = set(new.checked)
    stay = {c for c in old.checked if c not in mine and (keep is None or c in keep)}

    def pick(field_old: dict[str, Any], field_new: dict[str, Any]) -> dict[str, Any]:
        return {**{c: v for c, v in field_old.items() if c in stay}, **field_new}

    rows = sorted([r for r in old.rows if r.check in stay] + new.rows, key=lambda r: r.check)
    return PerturbReport(rows, pick(old.constants, new.constants), pick(old.fixed, new.fixed),
                         pick(old.measured, new.measured), new.when, pick(old.checked, new.checked),
                         pick(old.reads, new.reads))


def stale(rep: PerturbReport, changed: Callable[[dict[str, str | None]], list[str]]) -> dict[str, list[str]]:
    """Checks whose read files changed since they were nudged: check -> the changed files. ``changed`` is
    the rule frozen GPU results go stale by (``numbook.run.frozen.changed_reads``)."""
    return {check: files for check, reads in rep.reads.items() if (files := changed(reads))}


def report_path(checks_dir: Path) -> Path:
    """Where the book's perturbation record lives: next to the checks, in the repository."""
    return checks_dir / "perturb.json"


def save_report(rep: PerturbReport, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(asdict(rep), indent=1, sort_keys=True) + "\n", encoding="utf-8")


def load_report(path: Path | None) -> PerturbReport | None:
    if path is None or not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        rows = [GivenRow(**{**r, "moved": tuple(r.get("moved", ()))}) for r in data["rows"]]
        return PerturbReport(rows, data.get("constants", {}), data.get("fixed", {}), data.get("measured", {}),
                             data.get("when", ""), data.get("checked", {}), data.get("reads", {}))
    except (ValueError, TypeError, KeyError):
        return None
