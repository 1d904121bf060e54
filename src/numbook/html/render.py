"""Rendering: records of a verified page become elements. Nothing here decides whether a claim holds.

Each record of ``numbook.core.verify`` becomes one element (built with ElementTree, never by
string formatting) carrying its provenance as data attributes: ``data-check``,
``data-value``, ``data-device`` and ``data-date``. Claims inside TeX math stay TeX
(``\\class{nb-claim}{…}``) because MathJax draws them; their provenance is on the page's
claim index (``nb-claims``), one entry per math claim, in order.
"""

from __future__ import annotations

import base64
import json
import xml.etree.ElementTree as etree
from collections.abc import Callable, Iterable

from numbook.core.claims import format_value
from numbook.core.result import Uncertainty
from numbook.core.verify import Record, RecordKind

__all__ = ["element", "tooltip", "rewrite", "to_html", "tex", "claim_index", "interval", "cell_interval",
           "interval_words"]


def interval_words(spread: Uncertainty, unit: str = "") -> str:
    """How a measured value was obtained, in words: ``95% t interval over 5 seeds: 37.2108 to 45.9341 ms, n = 480``
    (the ends to six significant figures)."""
    u = f" {unit}" if unit else ""
    return f"{spread.kind}: {spread.lo:.6g} to {spread.hi:.6g}{u}, n = {spread.n}"


def tooltip(rec: Record) -> str:
    """The hover text of a claim: value, check, how it was compared, its interval, device and date."""
    unit = f" {rec.unit}" if rec.unit else ""
    where = f"{rec.check}" + (f", line {rec.source_line}" if rec.source_line else "")
    ran = " ".join(p for p in (rec.ran_at, f"({rec.how})" if rec.how else "") if p)
    got = f"source: {rec.source}, recorded by {where}" if rec.source else f"computed by {where}"
    spread = interval_words(rec.spread, rec.unit) if rec.spread is not None else ""
    parts = [f"{rec.name} = {format_value(rec.value)}{unit}", got, f"compared {rec.test}", spread, rec.device, ran]
    return " · ".join(p for p in parts if p)


def _data(rec: Record) -> dict[str, str]:
    data = {"data-check": rec.check, "data-value": format_value(rec.value), "data-device": rec.device,
            "data-date": rec.ran_at}
    if rec.spread is not None:
        data.update({"data-ci-lo": format_value(rec.spread.lo), "data-ci-hi": format_value(rec.spread.hi),
                     "data-ci-level": format_value(rec.spread.level), "data-ci-kind": rec.spread.kind,
                     "data-n": str(rec.spread.n), "data-repeats": str(rec.spread.repeats)})
    return data


def interval(rec: Record) -> etree.Element | None:
    """What a claim of a measured value shows after it (and its unit): ``(n = 480, 5 seeds, 95% CI 37–46 ms)``,
    the interval at the claim's precision; None for any other record, and inside math (there the claim's
    tooltip carries it)."""
    if rec.kind != RecordKind.CLAIM or rec.spread is None or not rec.ci_shown or rec.math:
        return None
    spread = rec.spread
    el = etree.Element("span", {"class": "nb-ci", "title": interval_words(spread, rec.unit)})
    if spread.lo == spread.hi:   # every repeat gave the same figure: no interval to show, only that
        el.text = f"(n = {spread.n}, {spread.repeats_words}, the same in each: {rec.ci_shown})"
    else:
        el.text = f"(n = {spread.n}, {spread.repeats_words}, {spread.level_words} CI {rec.ci_shown})"
    return el


def cell_interval(rec: Record) -> etree.Element | None:
    """The same suffix in a table cell, where a row of figures each with its words would not fit: the interval
    alone, ``(37–46)``, with ``n``, the repeats and the level in its tooltip (class ``nb-ci nb-ci-cell``)."""
    el = interval(rec)
    if el is None:
        return None
    spread = rec.spread
    assert spread is not None   # interval() returns None without one
    el.set("class", "nb-ci nb-ci-cell")
    el.set("title", f"n = {spread.n}, {spread.repeats_words}; " + interval_words(spread, rec.unit))
    el.text = f"({rec.ci_shown})"
    return el


def element(rec: Record) -> etree.Element | None:
    """The element a prose record renders as; None for a record that shows nothing (a failed sanity)."""
    if rec.kind == RecordKind.CLAIM:
        cls = ("nb-claim" if rec.ok else "nb-claim nb-claim-bad") + (" nb-fact" if rec.source else "")
        el = etree.Element("span", {"class": cls, "data-claim": rec.name, **_data(rec), "title": tooltip(rec),
                                    "tabindex": "0", **({"data-source": rec.source} if rec.source else {})})
        el.text = rec.shown
        return el
    if rec.kind in (RecordKind.FREE, RecordKind.UNVERIFIED):
        if not rec.shown:
            return None
        el = etree.Element("span", {"class": "nb-free" if rec.kind == RecordKind.FREE else "nb-claim nb-claim-bad"})
        el.text = rec.shown
        return el
    if rec.kind == RecordKind.SANITY:
        where = f"{rec.check}, line {rec.source_line}" if rec.source_line else rec.check
        said = f": {rec.message}" if rec.message else ""
        if len(rec.operands) == 2:
            said += f" (left = {format_value(rec.operands[0])}, right = {format_value(rec.operands[1])})"
        el = etree.Element("span", {
            "class": "nb-sanity", "role": "img", "tabindex": "0", "data-sanity": rec.name, "data-check": rec.check,
            **({"data-left": format_value(rec.operands[0]), "data-right": format_value(rec.operands[1])}
               if len(rec.operands) == 2 else {}),
            "data-device": rec.device, "data-date": rec.ran_at,
            "aria-label": f"assertion {rec.name} held",
            "title": f"assertion '{rec.name}' held when {where} ran{said} · {rec.device} · {rec.ran_at} ({rec.how})",
        })
        el.text = "✓"
        return el
    if rec.kind == RecordKind.FIGURE:
        fig = etree.Element("figure", {"class": "nb-figure", "data-figure": rec.name})
        data = base64.b64encode(rec.svg.encode("utf-8")).decode("ascii")
        etree.SubElement(fig, "img", {"src": f"data:image/svg+xml;base64,{data}", "alt": rec.caption})
        cap = etree.SubElement(fig, "figcaption")
        cap.text = rec.caption + " "
        src = etree.SubElement(cap, "span", {"class": "nb-figure-source"})
        src.text = f"Drawn by {rec.check} for this build."
        return fig
    return None  # pragma: no cover - every kind is handled above


def tex(rec: Record, ident: str = "") -> str:
    """A claim inside TeX math: the number with a class (and an id) MathJax keeps.

    Its provenance travels beside the math, in the page's claim index (``claim_index``), under
    that id: MathJax draws the number as SVG, where no title attribute would show.
    """
    if rec.kind not in (RecordKind.CLAIM, RecordKind.UNVERIFIED):
        return rec.shown
    cls = "nb-claim" if rec.ok and rec.kind == RecordKind.CLAIM else "nb-claim nb-claim-bad"
    body = rf"\cssId{{{ident}}}{{{rec.shown}}}" if ident else rec.shown
    return rf"\class{{{cls}}}{{{body}}}"


def claim_index(entries: list[tuple[str, Record]]) -> str:
    """The page's index of math claims: ``<script type="application/json" class="nb-claims">``."""
    def plain(tex_text: str) -> str:
        return (tex_text.replace("{,}", ",").replace("\\%", "%").replace("\\times", "×").replace("\\geq", "≥")
                .replace("\\leq", "≤").strip())

    data = [{"id": ident, "shown": plain(rec.shown), "tip": tooltip(rec)}
            for ident, rec in sorted(entries, key=lambda e: (e[1].row, e[1].start)) if rec.kind == RecordKind.CLAIM]
    el = etree.Element("script", {"type": "application/json", "class": "nb-claims"})
    el.text = json.dumps(data, ensure_ascii=False).replace("</", "<\\/")
    return to_html(el)


def to_html(el: etree.Element) -> str:
    return etree.tostring(el, encoding="unicode", method="html")


def rewrite(text: str, records: Iterable[Record], emit: Callable[[Record], str],
            behind: Callable[[Record], str] | None = None) -> str:
    """``text`` with each record's marker replaced by ``emit(record)``, and ``behind(record)`` (a measured value's
    interval) put after the unit written after it, at the record's ``tail``."""
    lines = text.split("\n")
    by_row: dict[int, list[Record]] = {}
    for rec in records:
        by_row.setdefault(rec.row, []).append(rec)
    for row, recs in by_row.items():
        line = lines[row]
        for rec in sorted(recs, key=lambda r: r.start, reverse=True):
            shown, before, after = emit(rec), line[:rec.start], line[rec.end:]
            extra = behind(rec) if behind is not None and rec.tail >= rec.end else ""
            if extra:
                after = line[rec.end:rec.tail] + " " + extra + line[rec.tail:]
            if not shown and after[:1] in tuple(".,;:!?)"):
                before = before.rstrip(" ")   # a marker that renders as nothing leaves no space before a stop
            line = before + shown + after
        lines[row] = line
    return "\n".join(lines)
