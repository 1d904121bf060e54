"""A ledger of every published number: ``numbers.json`` beside the site, and the diff of two ledgers.

Every build writes one entry per claim it published: the page and line, the number as written,
the value the check computed, the check, the device, the library versions and the build date (and, for a
measured value with an interval, its samples, repeats, the interval's ends and how it was computed). The
entries are read from the reports of the book's verification pass (``numbook.core.bookpass``): a
claim's record and the result of its check the page read.
``numbook diff OLD NEW`` lists the printed numbers that changed between two ledgers (a pull
request against main, a library upgrade), grouped by page; with ``--fail-on-change`` it exits
non-zero when any did.
"""

from __future__ import annotations

import datetime as _dt
import json
from collections.abc import Iterable
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

from numbook.core.claims import format_value
from numbook.core.verify import PageReport, RecordKind

__all__ = ["Entry", "build_ledger", "write_ledger", "read_ledger", "diff", "format_diff", "LEDGER_FORMAT"]

LEDGER_FORMAT = 1


@dataclass(frozen=True)
class Entry:
    page: str
    line: int
    name: str
    written: str
    value: str
    check: str
    device: str
    versions: dict[str, str]
    ran_at: str
    ok: bool
    measured: str = ""   # what was measured on the build machine (a timing): it moves between any two runs
    n: int | None = None       # a measured value with an interval: the samples over all repeats,
    repeats: int | None = None  # the repeats (runs or seeds),
    lo: str = ""               # the interval's ends (as the value: full precision)
    hi: str = ""
    kind: str = ""             # and how it was computed: "95% t interval over 5 seeds"

    @property
    def key(self) -> tuple[str, str, str]:
        return self.page, self.check, self.name

    @property
    def interval(self) -> tuple[float, float] | None:
        try:
            return (float(self.lo), float(self.hi)) if self.lo and self.hi else None
        except ValueError:
            return None


def build_ledger(reports: Iterable[PageReport]) -> list[Entry]:
    """One entry per claim of every page, in page and line order."""
    out: list[Entry] = []
    for report in sorted(reports, key=lambda r: r.context.path):
        read = {res.check: res for res in report.read.values()}   # a claim's record names its check
        for rec in sorted(report.records, key=lambda r: (r.line, r.start)):
            if rec.kind != RecordKind.CLAIM:
                continue
            res = read[rec.check]
            spread = rec.spread
            entry = Entry(report.context.path, rec.line, rec.name, rec.shown, format_value(rec.value), rec.check,
                          rec.device, dict(res.versions), rec.ran_at, rec.ok, res.measured.get(rec.name, ""))
            if spread is not None:
                entry = replace(entry, n=spread.n, repeats=spread.repeats, lo=format_value(spread.lo),
                                hi=format_value(spread.hi), kind=spread.kind)
            out.append(entry)
    return out


def write_ledger(path: Path, entries: Iterable[Entry], built: _dt.datetime | None = None) -> None:
    data = {"numbook_ledger": LEDGER_FORMAT,
            "built": (built or _dt.datetime.now(_dt.UTC)).strftime("%Y-%m-%d %H:%M UTC"),
            "claims": [_as_dict(e) for e in entries]}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


_FIELDS = tuple(f.name for f in fields(Entry))
_INTERVAL = ("n", "repeats", "lo", "hi", "kind")   # written for a measured value with an interval only


def _as_dict(e: Entry) -> dict[str, Any]:
    """An entry as JSON data (dataclasses.asdict deep-copies each field: half of writing a ledger)."""
    out = {name: getattr(e, name) for name in _FIELDS if name not in _INTERVAL or e.n is not None}
    out["versions"] = dict(e.versions)
    return out


def read_ledger(path: Path) -> list[Entry]:
    data = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(data, dict) or data.get("numbook_ledger") != LEDGER_FORMAT:
        raise ValueError(f"{path} is not a numbook ledger (format {LEDGER_FORMAT})")
    return [Entry(**c) for c in data["claims"]]


@dataclass(frozen=True)
class Change:
    page: str
    name: str
    check: str
    old: Entry | None
    new: Entry | None

    @property
    def measured(self) -> bool:
        """A measured value (a timing) whose written form did not change, whose intervals (where both builds
        recorded one) overlap and whose claim still verifies: run-to-run noise, not a new result."""
        return self.spread and self.new is not None and self.new.ok

    @property
    def spread(self) -> bool:
        """A measured value whose written form did not change and whose intervals (where both have one) overlap,
        whether or not its claim still verifies."""
        return (self.old is not None and self.new is not None and bool(self.old.measured or self.new.measured)
                and self.old.written == self.new.written and self.overlap is not False)

    @property
    def fails(self) -> bool:
        """A claim that fails verification in the new ledger (never left out as a measurement's spread)."""
        return self.new is not None and not self.new.ok

    @property
    def moved(self) -> bool:
        """A measured value whose new interval does not overlap its old one: a measurement that moved, not noise."""
        return (self.old is not None and self.new is not None and bool(self.old.measured or self.new.measured)
                and self.overlap is False)

    @property
    def overlap(self) -> bool | None:
        """Whether the old and the new interval of a measured value overlap; None where either has none."""
        a = self.old.interval if self.old is not None else None
        b = self.new.interval if self.new is not None else None
        if a is None or b is None:
            return None
        return a[0] <= b[1] and b[0] <= a[1]

    def describe(self) -> str:
        if self.old is None and self.new is not None:
            return (f"  + {self.name} = {self.new.value} (line {self.new.line}, written {self.new.written})"
                    + ("; fails verification" if self.fails else ""))
        if self.new is None and self.old is not None:
            return f"  - {self.name} = {self.old.value} (was line {self.old.line}, written {self.old.written})"
        assert self.old is not None and self.new is not None
        parts = []
        what = self.new.measured or self.old.measured
        if self.old.value != self.new.value:
            parts.append(f"computed {self.old.value} → {self.new.value}")
            if self.spread or (what and self.overlap is False):
                parts[-1] += f" (measured: {what})"
        if (self.old.lo, self.old.hi) != (self.new.lo, self.new.hi):
            interval = f"interval {_ends(self.old)} → {_ends(self.new)}"
            if self.overlap is not None:
                interval += (" (the intervals overlap: within the measurement's spread)" if self.overlap else
                             " (the intervals do not overlap: the measured value moved)")
            parts.append(interval)
        if self.old.written != self.new.written:
            parts.append(f"written {self.old.written} → {self.new.written}")
        vers = {k: (self.old.versions.get(k), v) for k, v in self.new.versions.items() if self.old.versions.get(k) != v}
        if vers:
            parts.append("with " + ", ".join(f"{k} {a} → {b}" for k, (a, b) in sorted(vers.items())))
        if self.fails:
            parts.append("now fails verification" if self.old.ok else "still fails verification")
        return f"  ~ {self.name} (line {self.new.line}): " + "; ".join(parts)


def _ends(e: Entry) -> str:
    return f"{_digits(e.lo)}–{_digits(e.hi)}" if e.lo and e.hi else "none"


def _digits(end: str) -> str:
    """An interval's end at 4 significant digits, as the diff shows it (the ledger keeps full precision)."""
    if len(end.lstrip("-").replace(".", "").lstrip("0").rstrip("0")) <= 4:
        return end   # "20.0", "37.21": written short already
    try:
        return f"{float(end):.4g}"
    except ValueError:
        return end


def _count(k: int, one: str, many: str) -> str:
    return f"{k} {one if k == 1 else many}"


def diff(old: list[Entry], new: list[Entry]) -> list[Change]:
    """Claims whose computed value or written form changed, appeared or went away."""
    def index(entries: list[Entry]) -> dict[tuple[str, str, str, int], Entry]:
        seen: dict[tuple[str, str, str], int] = {}
        out: dict[tuple[str, str, str, int], Entry] = {}
        for e in entries:   # a value claimed twice on one page: compared occurrence by occurrence
            n = seen.get(e.key, 0)
            seen[e.key] = n + 1
            out[(*e.key, n)] = e
        return out

    a, b = index(old), index(new)
    changes: list[Change] = []
    for k in sorted(set(a) | set(b)):
        o, n = a.get(k), b.get(k)
        if (o is not None and n is not None and o.value == n.value and o.written == n.written
                and (o.lo, o.hi) == (n.lo, n.hi) and o.ok == n.ok):
            continue
        changes.append(Change(k[0], k[2], k[1], o, n))
    return changes


def format_diff(changes: list[Change]) -> str:
    if not changes:
        return "numbook diff: no published number changed"
    out: list[str] = []
    page = None
    for c in changes:
        if c.page != page:
            page = c.page
            out.append(f"{page}:")
        out.append(c.describe())
    pages = len({c.page for c in changes})
    noise = sum(c.measured for c in changes)
    moved = sum(c.moved for c in changes)
    failing = sum(c.fails for c in changes)
    parts = []
    if noise:
        parts.append(f"{noise} of them measured values, which move between any two runs" if noise > 1 else
                     "1 of them a measured value, which moves between any two runs")
    if moved:
        parts.append(_count(moved, "measured value whose intervals no longer overlap",
                            "measured values whose intervals no longer overlap"))
    if parts:
        parts.append(f"{len(changes) - noise - moved} computed")
    if failing:
        parts.append(_count(failing, "claim that fails verification", "claims that fail verification"))
    out.append(f"numbook diff: {_count(len(changes), 'published number', 'published numbers')} changed on "
               f"{_count(pages, 'page', 'pages')}" + (f" ({'; '.join(parts)})" if parts else ""))
    return "\n".join(out)
