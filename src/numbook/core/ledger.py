"""A ledger of every published number: ``numbers.json`` beside the site, and the diff of two ledgers.

Every build writes one entry per claim it published: the page and line, the number as written,
the value the check computed, the check, the device, the library versions and the build date. The
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
from dataclasses import dataclass, fields
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

    @property
    def key(self) -> tuple[str, str, str]:
        return self.page, self.check, self.name


def build_ledger(reports: Iterable[PageReport]) -> list[Entry]:
    """One entry per claim of every page, in page and line order."""
    out: list[Entry] = []
    for report in sorted(reports, key=lambda r: r.context.path):
        read = {res.check: res for res in report.read.values()}   # a claim's record names its check
        for rec in sorted(report.records, key=lambda r: (r.line, r.start)):
            if rec.kind != RecordKind.CLAIM:
                continue
            res = read[rec.check]
            out.append(Entry(report.context.path, rec.line, rec.name, rec.shown, format_value(rec.value), rec.check,
                             rec.device, dict(res.versions), rec.ran_at, rec.ok, res.measured.get(rec.name, "")))
    return out


def write_ledger(path: Path, entries: Iterable[Entry], built: _dt.datetime | None = None) -> None:
    data = {"numbook_ledger": LEDGER_FORMAT,
            "built": (built or _dt.datetime.now(_dt.UTC)).strftime("%Y-%m-%d %H:%M UTC"),
            "claims": [_as_dict(e) for e in entries]}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


_FIELDS = tuple(f.name for f in fields(Entry))


def _as_dict(e: Entry) -> dict[str, Any]:
    """An entry as JSON data (dataclasses.asdict deep-copies each field: half of writing a ledger)."""
    out = {name: getattr(e, name) for name in _FIELDS}
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
        """A measured value (a timing) whose written form did not change: run-to-run noise, not a new result."""
        return (self.old is not None and self.new is not None and bool(self.old.measured or self.new.measured)
                and self.old.written == self.new.written)

    def describe(self) -> str:
        if self.old is None and self.new is not None:
            return f"  + {self.name} = {self.new.value} (line {self.new.line}, written {self.new.written})"
        if self.new is None and self.old is not None:
            return f"  - {self.name} = {self.old.value} (was line {self.old.line}, written {self.old.written})"
        assert self.old is not None and self.new is not None
        parts = []
        if self.old.value != self.new.value:
            parts.append(f"computed {self.old.value} → {self.new.value}")
            if self.measured:
                parts[-1] += f" (measured: {self.new.measured or self.old.measured})"
        if self.old.written != self.new.written:
            parts.append(f"written {self.old.written} → {self.new.written}")
        vers = {k: (self.old.versions.get(k), v) for k, v in self.new.versions.items() if self.old.versions.get(k) != v}
        if vers:
            parts.append("with " + ", ".join(f"{k} {a} → {b}" for k, (a, b) in sorted(vers.items())))
        return f"  ~ {self.name} (line {self.new.line}): " + "; ".join(parts)


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
        if o is not None and n is not None and o.value == n.value and o.written == n.written:
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
    out.append(f"numbook diff: {len(changes)} published numbers changed on {pages} pages"
               + (f" ({noise} of them measured values, which move between any two runs; "
                  f"{len(changes) - noise} computed)" if noise else ""))
    return "\n".join(out)
