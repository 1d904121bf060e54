"""Verify a page: bind each claim to its check's value and test it. Nothing here writes HTML.

This is the one claim processor of the book. The book's verification pass
(``numbook.core.bookpass``) calls it once per page, for ``numbook verify`` and for the build;
the Markdown extension renders the records (``numbook.html.render``) and verifies a text itself
only when it converts one outside that pass. A page is verified into a :class:`PageReport`:

- **records**, one per ``[[…]]`` marker: what it is (a claim, a free number, a sanity marker,
  a figure), where it stands (row and columns in the page text, the file's line), what the
  reader sees, and for a claim the value, the check, the test and the run's provenance;
- **diagnostics**, one per fault, each with ``path:line``;
- the **results it read**, by the name the page gives each check: what the page depends on.

The results come from a :class:`Results`, passed in: the runner is one (``numbook.run.runner.Runner``),
so is the build's table of results (``numbook.core.bookpass.BuildResults``) and a test's fixed table.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass, field, replace
from decimal import ROUND_CEILING, ROUND_FLOOR, Decimal
from pathlib import Path
from typing import Any, Protocol

from numbook.core.claims import (
    DTYPE_DIGITS,
    ClaimLiteral,
    Kind,
    LiteralError,
    format_value,
    parse_literal,
    parse_tolerance,
)
from numbook.core.diagnostics import Diagnostic
from numbook.core.page import SECTIONS
from numbook.core.relations import bound_before, relation_sentences
from numbook.core.result import CheckResult, Uncertainty
from numbook.core.statements import Bound, compared, sentence_faults
from numbook.core.structure import (
    check_file_name,
    heading,
    inside,
    list_ordinals,
    math_ranges,
    paragraph_code_spans,
    walk,
)
from numbook.core.units import PERCENT, UNIT_WORDS, Unit, name_unit, parse_unit, unit_after, unit_written

__all__ = ["PageContext", "PageReport", "Record", "RecordKind", "Results", "verify_page", "CLAIM", "CHECK_FENCE",
           "failure_message", "description_faults", "section_faults", "unbound_numbers"]

CLAIM = re.compile(
    r"\[\[(?:sanity:(?:(?P<scheck>[A-Za-z_][\w./-]*):)?(?P<sanity>[A-Za-z_]\w*)|figure:(?P<figure>[A-Za-z_]\w*)|relation:none\|(?P<why>[^\]]+)"
    r"|(?P<lit>[^\]|]+(?:\][^\]|]*)?)\|(?P<ref>[^\]]+))\]\]"
)
FREE = "free"
CHECK_FENCE = re.compile(r"^\s*(?:`{3,}|~{3,})\s*check\b[^\n]*?\bpath=\"([^\"]+)\"")
"""The opening line of a ```` ```check path="other.py" ```` fence: it shows another check than the page's."""
_GLUED_AFTER = re.compile(r"\d|[.,]\d|\{,\}\d|\\?%")
_GLUED_BEFORE = re.compile(r"(?:\d\{,\}|\d[.,]|\d|(?:^|[\s(\[=$])[-+−])$")
_ORDERED = SECTIONS[:6]  # Statement, Given, Find, Strategy, Solution, Answer
_LIST_ITEM = re.compile(r"^\s*(?:[-*+]|\d+\.)\s")

# -- numbers that are not quantities ---------------------------------------------------------------
_SUPERSCRIPT = "⁰¹²³⁴⁵⁶⁷⁸⁹"
_GLUED_UNITS = "|".join(re.escape(w) for w in UNIT_WORDS if len(w) > 1 and w[0].isalpha() and " " not in w)
_NUMBER = re.compile(r"(?<![\w.\\])(?<!\d[,.])(?:\d+(?:(?:\{,\}|,|\.)\d+)*|(?<![,])\.\d+)"
                     rf"(?:⁻?[{_SUPERSCRIPT}]+)?(?:(?!\w)|(?=(?:{_GLUED_UNITS})(?![\w/])))")
"""A number as the reader reads it: 8,192, 262.2, .85, 10¹¹, and 262 in 262MB (a unit glued to it); not the
digits of a word (fp32, x1, 8B, 6N)."""
NAMING_WORDS = (
    "Step", "Lesson", "Part", "Chapter", "Series", "Problem", "Question", "Option", "Figure", "Table", "Version",
    "Llama", "GPT", "Qwen", "Gemma", "Mistral", "Python", "CUDA", "PyTorch", "MkDocs", "Material",
)
"""A number right after one of these words (any case) names something; it is not a quantity. Only the book's
own parts and products: "sequence 513", "layer 32" or "head 8" may as well be a length or a count, so an index
of that kind is bound or marked free like any other number."""
_UNIT_POWERS = {("10", e) for e in ("3", "6", "9", "12", "15", "-3", "-6", "-9", "-12")} | {
    ("2", e) for e in ("10", "20", "30", "40", "50")}
"""Powers that define units (10^6 bytes in a MB, 2^20 in a MiB): not quantities. Any other power (2^{15}, 10¹¹) is."""
_IDENTIFIERS = [
    re.compile(r"<[^>]+>"),                                        # HTML tags
    re.compile(r"\]\(\s*(?:<[^>]*>|[^)\s]*)"),                       # link targets (a link's title is read)
    re.compile(r"\b[IVX]+\.\d+(?:\.[A-Z]\d{2})?\b"),               # problem and chapter IDs: I.4, I.4.B07
    re.compile(r"\b\d+\.\d+\.\d+\b"),                              # section numbers: 8.1.1
    re.compile(r"(?i)\b(?:" + "|".join(NAMING_WORDS) + r")\s+\d+(?:\.\d+)*(?:\s+of\s+\d+)?"),  # Step 3, Llama 2
    re.compile(r"[A-Za-z]-\d+\b"),                                 # UTF-8, GPT-2, top-1
    re.compile(r"^\s*(?:[-*+]|\|)\s"),                             # bullets and table pipes (ordinals: see below)
    re.compile(r"\\(?:ln|log|exp|sqrt)\s*\{?\d+(?:\.\d+)?\}?"),        # \ln 2: a constant of the formula
]
_ORDINAL = re.compile(r"^\s*\d+[.)](?=\s)")
_POWER = re.compile(r"\b(?P<base>10|2)\s*\^\s*(?:\{\s*(?P<e1>-?\d+)?\s*\}|(?P<e2>-?\d+))")
_SUPER_POWER = re.compile(rf"\b(?P<base>10|2)(?P<e>⁻?[{_SUPERSCRIPT}]+)(?!\w)")
_FRAC_DIGITS = re.compile(r"\\[td]?frac\s*(\d)\s*(\d)")           # \tfrac12: the digits 1 and 2
_TEX_COMMAND = re.compile(r"\\[A-Za-z]+")
_SUBSCRIPT = re.compile(r"_(?:\{[^}]*\}|\d+)")                     # TeX subscripts: x_1, t_{i,2}
_EMPHASIS = re.compile(r"(?<![A-Za-z0-9])[_*]+(?=\.?\d)|(?<=\d)[_*]+(?![A-Za-z0-9])")
ZERO_ONE = ("0", "1")
"""0 and 1 are never reported: rank 0, one scalar, one-hot, "the first" are not quantities to bind."""


class RecordKind(enum.StrEnum):
    CLAIM = "claim"        # a number bound to a check value (verified; ok or not)
    FREE = "free"          # a number marked free
    SANITY = "sanity"      # a sanity marker: an assertion that held
    FIGURE = "figure"      # a figure the check drew
    UNVERIFIED = "unverified"  # a claim that could not be tested (its fault is a diagnostic)


@dataclass(frozen=True)
class Record:
    """One ``[[…]]`` marker of a page, verified."""

    kind: RecordKind
    row: int                 # 0-based line of the verified text
    start: int               # columns of the marker in that line
    end: int
    line: int                # the file's line
    shown: str = ""          # the text the reader sees
    math: bool = False       # inside TeX math
    name: str = ""
    check: str = ""
    value: Any = None
    ok: bool = True
    test: str = ""           # how the literal was compared, in words
    unit: str = ""
    device: str = ""
    ran_at: str = ""
    how: str = ""            # ran for this build, from cache, frozen GPU measurements (derived on this build)
    source_line: int | None = None   # the check's line that recorded it
    source: str = ""         # where a fact comes from (the facts file's source and date read)
    message: str = ""        # a sanity's message
    operands: tuple[Any, ...] = ()   # a sanity's two computed sides
    caption: str = ""        # a figure's caption and SVG
    svg: str = ""
    spread: Uncertainty | None = None   # a measured value's samples, repeats and interval
    ci_shown: str = ""       # its interval as the page shows it, at the claim's precision: "37–46 ms"
    tail: int = 0            # the column after the unit written after the claim: where the interval is shown
    bound: str = ""          # the words before the claim read as a bound on a measured value ("under")


class Results(Protocol):
    """The results of a build's checks, by the name a page gives a check (``x.py``, relative to checks/).

    Asked twice for one name, it answers with the same result: a check runs once per build."""

    def result(self, check: str, /) -> CheckResult:
        """The check's result: run for this build, or read from the cache."""
        ...


@dataclass(frozen=True)
class PageContext:
    """What the verifier needs to know about the page it is verifying: data about the page, no results."""

    path: str                                   # shown in messages, e.g. problems/I.4.B07.md
    check: str | None                           # the page's check, relative to checks/
    line_offset: int = 0                        # lines of the file before the verified text
    check_line: int = 1                         # line of 'check:' in the front matter
    first_line: int | None = None               # the file's line of the body's first line (section faults)
    problem: bool = False                       # apply the Given and section rules
    scan_numbers: bool = False                  # report unbound numbers in every section
    root: Path | None = None                    # the project root (where check paths are relative to)
    description: str = ""                       # the front matter's one-line summary (the meta description)
    description_line: int = 1                   # its line in the front matter
    fields: dict[str, tuple[int, str]] = field(default_factory=dict)  # other front matter the reader reads
    #                                           (title, conventions): key -> (its line, its text); see read_fields
    last_line: int | None = None                # the file's last line: rows past it (the build's Draws on and
    #                                           Used by) are no text of the file, and their numbers not scanned


@dataclass
class PageReport:
    """A page verified: the text and the context it was verified with, and what that found."""

    text: str
    context: PageContext
    records: list[Record] = field(default_factory=list)
    diagnostics: list[Diagnostic] = field(default_factory=list)
    claims: dict[str, int] = field(default_factory=dict)   # check -> claims verified on this page
    read: dict[str, CheckResult] = field(default_factory=dict)   # check, as the page names it -> the result read

    @property
    def checks(self) -> frozenset[str]:
        """The checks whose results this page read (``checks/x.py``): a new result of one changes the page."""
        return frozenset(res.check for res in self.read.values())


class _Read:
    """A page's reading of the results: each check asked once, and every result it read kept (PageReport.read)."""

    def __init__(self, results: Results) -> None:
        self.results = results
        self.read: dict[str, CheckResult] = {}

    def result(self, check: str, /) -> CheckResult:
        if check not in self.read:
            self.read[check] = self.results.result(check)
        return self.read[check]


def failure_message(res: CheckResult, name: str, by_claim: bool = False) -> tuple[str, str]:
    """The one-line message and the detail for a check that produced no values (``by_claim``: named by
    a marker's ``other:`` prefix, ``[[v|other:name]]`` or ``[[sanity:other:name]]``, not by ``check:``)."""
    status = str(res.status)
    if status == "missing":
        by = f"'{name.removesuffix('.py')}:' in a marker on this page" if by_claim else f"'check: {name}'"
        return f"check '{res.check}' does not exist (named by {by})", ""
    if status == "timeout":
        return (f"check '{res.check}' timed out after {res.timeout_s:g} s "
                "(raise it with a '# numbook: timeout=SECONDS' line in the check)"), res.traceback_excerpt()
    if status in ("frozen-missing", "frozen-stale", "frozen-invalid"):
        return res.stderr.strip(), ""
    if status == "skipped":
        return "", ""
    if status == "out-of-memory":
        return res.memory_message(), res.traceback_excerpt()
    last = res.stderr.strip().splitlines()[-1] if res.stderr.strip() else f"exit code {res.returncode}"
    return f"check '{res.check}' raised: {last}", res.traceback_excerpt()


def section_faults(path: str, seen: list[str], line: int) -> list[Diagnostic]:
    """Missing and misordered sections of a problem page, given its H2 titles in order."""
    out = [Diagnostic(path, line, f"missing section '## {want}'") for want in SECTIONS if want not in seen]
    order = [n for n in seen if n in _ORDERED]
    if order != sorted(order, key=_ORDERED.index):
        out.append(Diagnostic(path, line, "sections out of order: " + ", ".join(_ORDERED)))
    return out


def _power(m: re.Match[str]) -> str:
    """A power of 2 or 10 with its base blanked, or all of it where it defines a unit (10^6, 2²⁰)."""
    exp = m.groupdict().get("e") or m.group("e1") or m.group("e2") or ""
    exp = exp.translate(str.maketrans(_SUPERSCRIPT + "⁻", "0123456789-"))
    if (m.group("base"), exp) in _UNIT_POWERS:
        return " " * len(m.group())
    if "e" in m.groupdict():
        return m.group()  # 10¹¹ is read as one number
    cut = m.end("base") - m.start()
    return " " * cut + m.group()[cut:]   # 2^{15}: the base is no quantity of its own, the exponent is


def unbound_numbers(text: str, math: list[tuple[int, int]] | None = None, ordinal: bool = False) -> list[str]:
    """The numbers in a line of prose (claims already removed) that are quantities and not bound.

    ``math`` holds the ranges of ``text`` that are TeX math (there ``_1`` is a subscript and ``\\frac12`` two
    digits; in prose ``_262_`` is emphasis); ``ordinal``: the line's leading number is an ordered list's marker,
    which the reader does not read as written (see :func:`numbook.core.structure.list_ordinals`)."""
    if ordinal:
        text = _ORDINAL.sub(lambda m: " " * len(m.group()), text)
    for pat in _IDENTIFIERS:
        text = pat.sub(lambda m: " " * len(m.group()), text)
    text = _SUPER_POWER.sub(_power, _POWER.sub(_power, text))
    ranges = math or []
    prose = _EMPHASIS.sub(lambda m: " " * len(m.group()), _outside(text, ranges))
    tex = _outside(text, _complement(ranges, len(text)))
    tex = _FRAC_DIGITS.sub(lambda m: f" {m.group(1)} {m.group(2)}".ljust(len(m.group())), tex)
    tex = _SUBSCRIPT.sub(lambda m: " " * len(m.group()), _TEX_COMMAND.sub(lambda m: " " * len(m.group()), tex))
    found = [(m.start(), m.group()) for part in (prose, tex) for m in _NUMBER.finditer(part)]
    return [n for _, n in sorted(found) if n not in ZERO_ONE]


def _complement(ranges: list[tuple[int, int]], n: int) -> list[tuple[int, int]]:
    """The parts of ``range(n)`` outside ``ranges``."""
    out, at = [], 0
    for a, b in sorted(ranges):
        if a > at:
            out.append((at, a))
        at = max(at, b)
    if at < n:
        out.append((at, n))
    return out


def _outside(line: str, spans: list[tuple[int, int]]) -> str:
    """``line`` with the given ranges blanked."""
    for a, b in sorted(spans, reverse=True):
        line = line[:a] + " " * (b - a) + line[b:]
    return line


def display(lit: str, math: bool) -> str:
    """What the reader sees for a literal: TeX inside math, plain text outside."""
    text = lit.strip()
    if math:
        return re.sub(r"(?<!\\)%", r"\\%", text).replace("×", r"\times ").replace("≥", r"\geq ").replace(
            "≤", r"\leq ")
    return text.replace("{,}", ",").replace("\\%", "%").replace("\\times", "×").replace("\\,", "\u2009")


def _digits(number: Decimal) -> str:
    """A Decimal as positional digits: 50, 0.05, 2.5."""
    return format(number.normalize(), "f")


def _measured_literal(literal: ClaimLiteral, lookback: str, ref: str) -> tuple[ClaimLiteral, str]:
    """How a claim of a measured value with an interval is tested: a plain number after a bound's words
    (``under [[50|p99_ms]]``, ``at least [[3|ratio]]×``) is that bound, and the words; an integer is compared
    rounded to units (a measurement is no exact count); any other literal as written."""
    plain = (Kind.INT, Kind.DECIMAL, Kind.PERCENT, Kind.RATIO, Kind.SCI, Kind.WORD)
    if literal.kind in plain and literal.tolerance is None and literal.number is not None:
        found = bound_before(lookback, ref)
        if found is not None:
            return ClaimLiteral(literal.text, Kind.BOUND, number=literal.number, op=found[0],
                                percent=literal.percent), found[1]
    if literal.kind == Kind.INT:
        return replace(literal, kind=Kind.DECIMAL), ""
    return literal, ""


def _shown_interval(literal: ClaimLiteral, spread: Uncertainty, m: re.Match[str]) -> dict[str, Any]:
    """The interval as the page shows it after the claim (``ci_shown``: its ends rounded outwards at the claim's
    precision, with the mark and the unit written after it) and where (``tail``: after that unit); a bound's
    ends at two digits of the interval's width."""
    q = literal.quantum
    if q is None:
        return {}
    scale = Decimal(100) if literal.percent else Decimal(1)
    lo, hi = Decimal(repr(spread.lo)) * scale, Decimal(repr(spread.hi)) * scale
    if literal.kind == Kind.BOUND and hi > lo:
        q = min(q, Decimal(1).scaleb((hi - lo).adjusted() - 1))
    ends = [(x / q).to_integral_value(rounding=r) * q for x, r in ((lo, ROUND_FLOOR), (hi, ROUND_CEILING))]
    if literal.kind == Kind.SCI and literal.number is not None and q > 1:
        e = literal.number.adjusted()
        sep = "e" if "e" in literal.text.lower() else " × 10^"
        shown = [f"{format((x / Decimal(10) ** e).quantize(q / Decimal(10) ** e), 'f')}{sep}{e}" for x in ends]
    else:
        group = "," if re.search(r"\d,\d{3}", literal.text) else ""   # written 134,217,728: its ends grouped too
        shown = [format(x.quantize(q) if q <= 1 else x, f"{group}f") for x in ends]
        if hi == lo:   # every repeat gave the same figure: the point itself, not rounded outwards at a bound's step
            shown = [format(lo.normalize() if lo == lo.to_integral_value() else lo, f"{group}f")] * 2
    text = m.string[m.end():]
    mark = "%" if literal.percent else ""
    glued = 1 if text[:1] == "×" else 0
    if glued or re.search(r"(?:×|\\times|\dx)\s*$", literal.text):
        mark = "×"
    after = unit_written(text[glued:])
    word = f" {after[1]}" if after is not None and not mark else ""
    tail = m.end() + glued + (after[2] if after is not None and not mark else 0)
    span = shown[0] if shown[0] == shown[1] else f"{shown[0]}–{shown[1]}"   # a point when every repeat agreed
    return {"ci_shown": f"{span}{mark}{word}", "tail": tail}


def _provenance(res: CheckResult) -> dict[str, Any]:
    return {"device": res.device, "ran_at": res.ran_at, "how": res.source_words}


class _Verifier:
    def __init__(self, ctx: PageContext, results: _Read) -> None:
        self.ctx = ctx
        self.results = results
        self.diags: list[Diagnostic] = []
        self.records: list[Record] = []
        self.claims: dict[str, int] = {}
        self.given_claimed: set[str] = set()
        self.failed_checks: set[str] = set()

    def error(self, line: int, msg: str, detail: str = "") -> None:
        self.diags.append(Diagnostic(self.ctx.path, line, msg, detail))

    def result_for(self, name: str | None, line: int) -> CheckResult | None:
        if not name:
            return None
        res = self.results.result(name)
        if name in self.failed_checks:
            return None
        if not res.ok:
            self.failed_checks.add(name)
            msg, detail = failure_message(res, name, by_claim=name != self.ctx.check)
            if msg:
                self.error(self.ctx.check_line if name == self.ctx.check else line, msg, detail)
            return None
        if not (res.values or res.inputs or res.sanity or res.figures):
            self.failed_checks.add(name)
            self.error(self.ctx.check_line if name == self.ctx.check else line,
                       f"check '{res.check}' ran but recorded nothing: record what the page states with "
                       "numbook.check.given(), value(), sanity() or figure()")
            return None
        return res

    def marker(self, m: re.Match[str], row: int, line: int, section: str, math: bool, lookback: str = "") -> Record:
        """One marker; ``lookback`` is its paragraph up to it (a bound written before a measured value's claim)."""
        at: dict[str, Any] = {"row": row, "start": m.start(), "end": m.end(), "line": line, "math": math}
        if m.group("sanity"):
            other = m.group("scheck")
            return self.sanity(m.group("sanity"), at, check_file_name(other) if other else None)
        if m.group("figure"):
            return self.figure(m.group("figure"), at)
        if m.group("why") is not None:
            return Record(RecordKind.FREE, **at)   # a reasoned allowance: renders as nothing
        lit_text, ref = m.group("lit"), m.group("ref").strip()
        shown = display(lit_text, math)
        if ref == FREE:
            return Record(RecordKind.FREE, shown=shown, **at)
        bad = Record(RecordKind.UNVERIFIED, shown=shown, ok=False, **at)
        name, _, tol_text = ref.partition("±")
        name = name.strip()
        check = self.ctx.check
        if ":" in name:
            stem, name = name.split(":", 1)
            check = check_file_name(stem)
        if math and re.search(r"\d,\d", lit_text):
            self.error(line, f"claim '[[{lit_text}|{ref}]]': inside math a comma is read as punctuation and "
                             f"renders as '{lit_text.replace(',', ', ')}'; write {lit_text.replace(',', '{,}')}")
            return bad
        try:
            literal = parse_literal(lit_text, parse_tolerance(tol_text) if tol_text.strip() else None)
        except LiteralError as exc:
            self.error(line, f"claim '[[{lit_text}|{ref}]]': {exc}")
            return bad
        if check is None:
            self.error(line, f"claim '{name}' on a page with no check: add 'check:' to the front matter")
            return bad
        res = self.result_for(check, line)
        if res is None:
            return bad
        found, value = res.lookup(name)
        if not found:
            known = ", ".join(sorted([*res.inputs, *res.values])) or "nothing"
            self.error(line, f"claim '{name}' names a value {res.check} does not record (it records: {known})")
            return bad
        if section == "Given" and self.ctx.problem:
            if name not in res.inputs:
                self.error(line, f"claim '{name}' in Given binds to a computed value; Given states inputs, "
                                 f"recorded in {res.check} with given()")
            self.given_claimed.add(name)
        spread = res.spread(name) if name in res.values else None
        bound = ""
        if spread is not None:
            literal, bound = _measured_literal(literal, lookback, m.group("ref"))
        ok = literal.matches(value)
        if not ok:
            self.error(line, f"claim '{name}' reads {lit_text.strip()}, {res.check} computed "
                             f"{format_value(value)} (compared {literal.describe()})")
        before = len(self.diags)
        unit = self.unit(res, name, value, m, line)
        self.precision(res, name, literal, line)
        test = literal.describe()
        measured: dict[str, Any] = {}
        if spread is not None:
            if ok:
                self.within(res, name, literal, value, spread, unit, line, bound)
            test = f"{test}, over its whole {spread.level_words} CI" if literal.kind == Kind.BOUND else (
                f"{test}, inside its {spread.level_words} CI")
            measured = {"spread": spread, "bound": bound, **({} if math else _shown_interval(literal, spread, m))}
        ok = ok and len(self.diags) == before
        self.claims[res.check] = self.claims.get(res.check, 0) + 1
        src = res.facts.get(name)
        source = f"{src['source']} (read {src['read']})" if isinstance(src, dict) else ""
        return Record(RecordKind.CLAIM, shown=shown, name=name, check=res.check, value=value, ok=ok,
                      test=test, unit=unit.symbol if unit else "", source=source,
                      source_line=res.lines.get(name), **measured, **_provenance(res), **at)

    def within(self, res: CheckResult, name: str, literal: ClaimLiteral, value: Any, spread: Uncertainty,
               unit: Unit | None, line: int, bound: str) -> None:
        """A claim of a measured value against its interval: a bound holds for the whole interval (its lower end
        for at least and more than, its upper end for at most and less than); a number lies inside the interval,
        widened by half a unit of its last written digit."""
        u = f" {unit.symbol}" if unit else ""
        ci = (f"{spread.level_words} CI {format_value(spread.lo)} to {format_value(spread.hi)}{u} "
              f"(n = {spread.n}, {spread.repeats_words}; {spread.kind})")
        measured = f"{res.check} measured {format_value(value)}{u}, {ci}"
        if literal.kind == Kind.BOUND:
            upper = literal.op in ("<", "<=")
            end = spread.hi if upper else spread.lo
            if not literal.matches(end):
                number = f"{_digits(literal.number or Decimal(0))}{'%' if literal.percent else ''}"
                written = f" (written '{bound} {literal.text.strip()}')" if bound else ""
                self.error(line, f"claim '{name}' states the bound {literal.op} {number}{written}, which its interval "
                                 f"does not satisfy: {measured}, and its {'upper' if upper else 'lower'} end "
                                 f"{format_value(end)} is not {literal.op} {number}: a bound on a measured value holds "
                                 "for its whole interval")
            return
        q = literal.quantum
        if q is None or literal.number is None:
            return
        scale = Decimal(100) if literal.percent else Decimal(1)
        half = q / 2
        lo, hi = Decimal(repr(spread.lo)) * scale - half, Decimal(repr(spread.hi)) * scale + half
        if not lo <= literal.number <= hi:
            points = " percentage points" if literal.percent else ""
            self.error(line, f"claim '{name}' reads {literal.text.strip()}, which its interval does not support: "
                             f"{measured}, and {literal.text.strip()} lies outside it even widened by half its last "
                             f"written digit (± {_digits(half)}{points})")

    def glued(self, m: re.Match[str], line: int) -> None:
        """A digit, decimal point, sign or percent sign glued to a claim changes the number the reader reads."""
        if m.group("lit") is None:
            return
        marker = m.group()
        after = _GLUED_AFTER.match(m.string, m.end())
        before = _GLUED_BEFORE.search(m.string[:m.start()])
        if after:
            reads = f"{m.group('lit').strip()}{after.group()}"
            self.error(line, f"'{after.group()}' is glued to the claim {marker}: the reader reads {reads}, which "
                             f"is not what the check computed; put what belongs to the number inside the literal "
                             f"(and bind that value) or leave a space")
        if before:
            glue = before.group().lstrip(" ([=$")
            reads = f"{glue}{m.group('lit').strip()}"
            self.error(line, f"'{glue}' is glued to the claim {marker}: the reader reads {reads}, which is not "
                             f"what the check computed; bind the value the reader should read "
                             f"([[{reads}|name]]) or leave a space")

    def malformed(self, line: str, spans: list[tuple[int, int]], lineno: int) -> None:
        """A ``[[`` outside code that opens no marker (an empty literal ``[[|x]]``, no ``|``) is published raw."""
        rest = CLAIM.sub(lambda m: " " * len(m.group()), line)
        for m in re.finditer(r"\[\[[^\]]*\]\]|\[\[", rest):
            if inside(m.start(), spans):
                continue
            text = m.group()
            why = ("its literal is empty: write the number the reader should read before the '|'"
                   if re.match(r"\[\[\s*\|", text) else "it is not a claim [[literal|name]], a free number "
                   "[[literal|free]], [[sanity:name]], [[figure:name]] or [[relation:none|why]]")
            self.error(lineno, f"marker '{text}' would be published as typed: {why}")

    def bound(self, body: str) -> Bound | None:
        """The computed value and unit of a verified claim of this page, by its marker's body ("10.86|loss"): the
        claim written so, else another that holds; with a measured value's interval, and whether the words before
        it were read as a bound on it (then it is given even where it failed: its fault is reported)."""
        lit, _, ref = body.rpartition("|")
        ref = ref.partition("±")[0].strip()
        stem, _, name = ref.rpartition(":")
        check = check_file_name(stem) if stem else self.ctx.check
        recs = [rec for rec in self.records if rec.kind == RecordKind.CLAIM and rec.name == name
                and (check is None or rec.check.endswith(check)) and (rec.ok or rec.bound)]
        recs.sort(key=lambda rec: rec.shown != display(lit, rec.math))
        if not recs:
            return None
        rec = recs[0]
        spread = rec.spread
        return Bound(rec.value, rec.unit, (spread.lo, spread.hi) if spread else None,
                     spread.level_words if spread else "", rec.bound, rec.ok)

    def unit(self, res: CheckResult, name: str, value: Any, m: re.Match[str], line: int) -> Unit | None:
        """The value's unit. A unit written after the claim must be it: another unit is an error with both
        readings, a unit after a value the check recorded none for is an error that asks for one, and a percent
        sign after a plain literal of a value that is not in percent reads a fraction as a percentage."""
        declared = res.units.get(name)
        unit = parse_unit(declared) if declared else name_unit(name)
        after = unit_after(m.string[m.end():], math=inside(m.start(), math_ranges(m.string, "")[0]))
        if after is None:
            return unit
        written, word = after
        lit = m.group("lit").strip()
        if written == PERCENT and unit != PERCENT:
            if re.search(r"%\s*$", lit):
                return unit   # [[15%|share]] percent: the literal already reads a percentage
            x = value if isinstance(value, int | float) and not isinstance(value, bool) else None
            pct = f"{format_value(float(x) * 100)}%" if x is not None else "a percentage"
            what = ("as a fraction" if unit.dimension == "ratio" else f"in {unit.symbol}") if unit else "with no unit"
            self.error(line, f"claim '{name}' is followed by '{word}', so the reader reads {lit}%, but {res.check} "
                             f"recorded it {what}: {lit} is {pct}; write the percentage inside the literal "
                             f"([[{pct if x is not None else lit + '%'}|{name}]] compares 100 × the value), or "
                             f"record the value in percent (unit=\"%\")")
            return unit
        if unit is None:
            if declared and declared.strip() == word:
                return None
            if declared:
                self.error(line, f"claim '{name}' is written in {written.symbol}, but {res.check} computed it in "
                                 f"{declared.strip()}")
                return None
            self.error(line, f"claim '{name}' is followed by the unit '{word}', but {res.check} records no unit "
                             f"for it: record the unit it is computed in (value(\"{name}\", x, "
                             f"unit=\"{written.symbol}\") or given(…, unit=…)), so that a wrong unit on the page fails")
            return None
        if written == unit:
            return unit
        reading = ""
        x = value if isinstance(value, int | float) and not isinstance(value, bool) else None
        if x is not None and written.dimension == unit.dimension:
            reading = (f": {format_value(value)} {unit.symbol} = {format_value(unit.convert(float(x), written))} "
                       f"{written.symbol}")
        self.error(line, f"claim '{name}' is written in {written.symbol}, but {res.check} computed it in "
                         f"{unit.symbol}{reading}")
        return unit

    def precision(self, res: CheckResult, name: str, literal: ClaimLiteral, line: int) -> None:
        """A claim may not claim more significant digits than its value's dtype carries, unless it writes the stored
        value exactly (11.0859375 is an fp16 value to its last binary digit: no digit of it is false)."""
        dtype = res.dtypes.get(name)
        digits = DTYPE_DIGITS.get(str(dtype)) if dtype else None
        sig = literal.significant
        value = res.values.get(name, res.inputs.get(name))
        exact = (isinstance(value, float) and literal.number is not None and not literal.percent
                 and Decimal(value) == literal.number)
        if digits is not None and sig is not None and literal.tolerance is None and sig > digits and not exact:
            self.error(line, f"claim '{name}' is written with {sig} significant digits, but {res.check} computed "
                             f"it in {dtype}, which carries about {digits}: round it")

    def sanity(self, name: str, at: dict[str, Any], check: str | None = None) -> Record:
        """A sanity marker: ``[[sanity:name]]`` for the page's check, ``[[sanity:other_check:name]]`` for another."""
        res = self.result_for(check or self.ctx.check, at["line"])
        if res is None:
            return Record(RecordKind.UNVERIFIED, ok=False, **at)
        entry = res.sanity.get(name)
        if entry is None:
            known = ", ".join(sorted(res.sanity)) or "none"
            self.error(at["line"], f"sanity marker '{name}' names no assertion in {res.check} (it asserts: {known})")
            return Record(RecordKind.UNVERIFIED, ok=False, **at)
        if not entry.get("ok", False):   # a run stops at a failed sanity(); a result that holds one anyway
            msg = str(entry.get("message", ""))   # (a frozen or merged file, edited) backs no sentence
            self.error(at["line"], f"sanity '{name}' failed in {res.check}" + (f": {msg}" if msg else ""))
        self.claims[res.check] = self.claims.get(res.check, 0) + 1
        ops = entry.get("operands")
        return Record(RecordKind.SANITY, name=name, check=res.check, ok=bool(entry.get("ok", False)),
                      message=str(entry.get("message", "")), source_line=res.lines.get(name),
                      operands=tuple(ops) if isinstance(ops, list) else (),
                      **_provenance(res), **at)

    def figure(self, name: str, at: dict[str, Any]) -> Record:
        res = self.result_for(self.ctx.check, at["line"])
        if res is None:
            return Record(RecordKind.UNVERIFIED, ok=False, **at)
        fig = res.figures.get(name)
        if fig is None:
            known = ", ".join(sorted(res.figures)) or "none"
            self.error(at["line"], f"figure '{name}' is not drawn by {res.check} (it draws: {known})")
            return Record(RecordKind.UNVERIFIED, ok=False, **at)
        return Record(RecordKind.FIGURE, name=name, check=res.check, caption=str(fig["caption"]),
                      svg=str(fig["svg"]), **_provenance(res), **at)

    def unbound(self, text: str, line: int, section: str, math: list[tuple[int, int]] | None = None,
                ordinal: bool = False) -> None:
        where = f" in {section}" if section else ""
        for number in unbound_numbers(text, math, ordinal):
            lit = _literal(number)
            self.error(line, f"unbound number '{number}'{where}: bind it with [[{lit}|name]] or mark it "
                             f"[[{lit}|free]]")


def _literal(number: str) -> str:
    """A literal for a number as the reader reads it: 10¹¹ is 1e11, 2¹⁵ is 32768, .85 is 0.85."""
    base, _, exp = number.partition(next((c for c in number if c in _SUPERSCRIPT + "⁻"), "\0"))
    if exp or number != base:
        e = int((number[len(base):]).translate(str.maketrans(_SUPERSCRIPT + "⁻", "0123456789-")))
        return f"1e{e}" if base == "10" else (format_value(int(base) ** e) if e >= 0 and base.isdigit() else number)
    return "0" + number if number.startswith(".") else number


def _stated(text: str, unit: str) -> set[tuple[str, str]]:
    """The numbers written in ``text``, each as the reader sees it (``8{,}192`` is 8,192), with ``unit``."""
    return {(m.group().replace("{,}", ","), unit) for m in _NUMBER.finditer(text.replace("{,}", ","))}


def description_faults(ctx: PageContext, records: list[Record]) -> list[Diagnostic]:
    """Faults of the front matter's ``description``, ``title`` and ``conventions``: markup that would be
    published as typed, and numbers that repeat no verified claim or free number of the page.

    The description is published as written (the page's meta description), the title and the conventions
    above the page, and no marker can bind them. So each number in them must repeat one the page's prose
    binds to a check, or marks free: the same number, and where a unit follows it, the same unit (262.1 MB
    repeats [[262.1|fp32_mb]] of a value in MB, not one in MiB, nor a 262.1 that counts something else).
    If the check's value changes, the claim in the prose fails, and the copy, which then repeats no verified
    claim, fails with it; it still fails once the prose is fixed, until the copy is.
    """
    out = []
    for markup, why in (("[[", "a marker"), ("{,}", "a TeX thousands separator")):
        if markup in ctx.description:
            out.append(Diagnostic(ctx.path, ctx.description_line,
                                  f"the description holds {why} ('{markup}'): it is published as written, unprocessed; "
                                  "write what the reader should see (8,192, not 8{,}192) and repeat a number the "
                                  "prose binds"))
    stated: set[tuple[str, str]] = set()
    for rec in records:
        if (rec.kind == RecordKind.CLAIM and rec.ok) or rec.kind == RecordKind.FREE:
            stated |= _stated(rec.shown, rec.unit)
    fields = [("description", ctx.description_line, ctx.description),
              *((key, line, text) for key, (line, text) in ctx.fields.items())]
    for key, line, text in fields:
        if not text:
            continue
        quantities = unbound_numbers(text)
        for m in _NUMBER.finditer(text):
            number = m.group()
            if number not in quantities:
                continue   # an identifier, a unit's power, 0 or 1
            digits = number.replace("{,}", ",")
            after = unit_after(text[m.end():])
            unit = after[0].symbol if after else None
            if any(d == digits and (unit is None or u == unit) for d, u in stated):
                continue
            with_unit = f" {unit}" if unit else ""
            if key == "description":
                out.append(Diagnostic(ctx.path, line,
                                      f"number '{number}'{with_unit} in the description repeats no verified claim or "
                                      f"free number of this page: a description cannot be bound, so each of its "
                                      f"numbers must repeat one the prose binds ([[{number}|name]]) or marks free "
                                      f"([[{number}|free]]), or leave it out"))
            else:
                out.append(Diagnostic(ctx.path, line,
                                      f"number '{number}'{with_unit} in the front matter's '{key}' repeats no verified "
                                      f"claim or free number of this page: it is published as written and cannot be "
                                      f"bound, so it must repeat a number the prose binds ([[{number}|name]]) or marks "
                                      f"free ([[{number}|free]]), or leave it out"))
    return out


def verify_page(text: str, ctx: PageContext, results: Results) -> PageReport:
    """Verify every marker of a page body (front matter already removed) into records and diagnostics."""
    read = _Read(results)
    v = _Verifier(ctx, read)
    section, given_line = "", 0
    math_state = ""
    sanity_block: list[tuple[int, str]] = []
    seen_sections: list[str] = []

    def close_sanity_block() -> None:
        if section == "Check — sanity" and sanity_block and ctx.problem:
            joined = " ".join(t for _, t in sanity_block)
            if "[[sanity:" not in joined and joined.strip():
                v.error(sanity_block[0][0], "sanity sentence with no executed assertion: end it with "
                                             "[[sanity:name]] naming a sanity() in the check")
        sanity_block.clear()

    lines = list(walk(text))
    ordinals = list_ordinals(lines) if ctx.scan_numbers else set()
    span_map = paragraph_code_spans(lines)
    para: list[str] = []   # the paragraph's lines before this one: the sentence a claim stands in
    for ln in lines:
        line = ln.text
        lineno = ln.index + 1 + ctx.line_offset
        if ln.code:
            para.clear()
            continue
        head = heading(line)
        if head is not None or not line.strip() or _LIST_ITEM.match(line) or line.lstrip().startswith("|"):
            para.clear()
        if head is not None and head[0] == 2:
            close_sanity_block()
            section = head[1]
            seen_sections.append(section)
            if section == "Given":
                given_line = lineno
        if not line.strip():
            close_sanity_block()
        elif section == "Check — sanity" and head is None:
            if _LIST_ITEM.match(line):
                close_sanity_block()  # each list item is a sentence of its own
            sanity_block.append((lineno, line))
        spans = span_map.get(ln.index, [])
        if not line.strip() and math_state == "$":
            math_state = ""  # an unclosed $ does not run past its paragraph
        ranges, math_state = math_ranges(line, math_state)
        for m in CLAIM.finditer(line):
            if not inside(m.start(), spans):
                lookback = " ".join([*para, line[:m.start()]])
                v.records.append(v.marker(m, ln.index, lineno, section, inside(m.start(), ranges), lookback))
                v.glued(m, lineno)
        if head is None and line.strip():
            para.append(line.strip())
        v.malformed(line, spans, lineno)
        if ctx.scan_numbers and lineno >= (ctx.first_line or 0) and lineno <= (ctx.last_line or lineno):
            # every line of the file the reader reads, headings included; not the frame a build puts around it
            prose = CLAIM.sub(lambda m: " " * len(m.group()), _outside(line, spans))
            v.unbound(prose, lineno, section, ranges, ln.index in ordinals)
    close_sanity_block()

    v.diags += sentence_faults(text, ctx.path, ctx.line_offset, ctx.check, read.result)
    if ctx.scan_numbers:
        for rel in relation_sentences(text):
            backed, wrong = compared(rel, v.bound)
            for msg in wrong:
                v.error(rel.line + ctx.line_offset, msg)
            if backed or rel.equality:
                continue   # an equality word between two values is tested where one has an interval, else let be
            short = rel.text if len(rel.text) <= 90 else rel.text[:87] + "…"
            v.error(rel.line + ctx.line_offset,
                    f"relation sentence with no sanity ({', '.join(rel.words)}): '{short}': back it with a "
                    "sanity(name, relation, operands=(left, right)) and end it with [[sanity:name]], or mark it "
                    "[[relation:none|why]]")

    if ctx.scan_numbers and (ctx.description or ctx.fields):
        v.diags += description_faults(ctx, v.records)

    if ctx.problem:
        v.diags += section_faults(ctx.path, seen_sections, ctx.first_line or 1 + ctx.line_offset)
        res = read.result(ctx.check) if ctx.check else None
        if res is not None and res.ok and ctx.check not in v.failed_checks:
            for name in res.inputs:
                if name not in v.given_claimed:
                    v.error(given_line or 1 + ctx.line_offset,
                            f"input '{name}' of {res.check} is not stated in Given: "
                            f"write it as [[{format_value(res.inputs[name])}|{name}]]")
    return PageReport(text, ctx, v.records, v.diags, v.claims, read.read)
