"""Verify a page: bind each claim to its check's value, test it, and render it.

This is the one claim processor of the book. The Markdown extension calls it on the raw
page text (before any other preprocessor, so line numbers are the file's own); the author
CLI calls it without rendering HTML. It returns the rewritten Markdown and the diagnostics.
"""

from __future__ import annotations

import base64
import html
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .claims import Literal, LiteralError, format_value, parse_literal, parse_tolerance
from .diagnostics import Diagnostic
from .page import SECTIONS
from .runner import CheckResult

__all__ = ["PageContext", "PageReport", "verify_page", "CLAIM", "failure_message"]

CLAIM = re.compile(
    r"\[\[(?:sanity:(?P<sanity>[A-Za-z_]\w*)|figure:(?P<figure>[A-Za-z_]\w*)"
    r"|(?P<lit>[^\]|]+(?:\][^\]|]*)?)\|(?P<ref>[^\]]+))\]\]"
)
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*(?:\{[^}]*\})?\s*#*\s*$")
_FENCE = re.compile(r"^\s*(`{3,}|~{3,})")
_CODE_SPAN = re.compile(r"(`+)(.+?)\1")
_NUMBER = re.compile(r"(?<![\w.\\])(?<!\d[,.])\d+(?:(?:\{,\}|,|\.)\d+)*(?![\w])")
_IGNORE = [
    re.compile(r"<[^>]+>"),                                  # HTML tags
    re.compile(r"\]\([^)]*\)"),                              # link targets
    re.compile(r"\b[IVX]+\.\d+(?:\.[A-Z]\d{2})?\b"),         # problem and chapter IDs
    re.compile(r"\b(?:Step|step|Lesson|lesson|Part|part|Chapter|chapter)\s+\d+\b"),
    re.compile(r"^\s*(?:\d+\.|[-*+]|\|)\s"),                 # list markers
    re.compile(r"\\[A-Za-z]+"),                              # TeX commands
]
FREE = "free"
UNBOUND_SECTIONS = ("Given", "Solution", "Answer")
_ORDERED = SECTIONS[:6]  # Statement, Given, Find, Strategy, Solution, Answer


@dataclass
class PageContext:
    """What the verifier needs to know about the page it is verifying."""

    path: str                                   # shown in messages, e.g. problems/I.4.B07.md
    check: str | None                           # the page's check, relative to checks/
    results: Callable[[str], CheckResult]       # check name -> result (runs or reads cache)
    line_offset: int = 0                        # lines of front matter before the body
    check_line: int = 1                         # line of 'check:' in the front matter
    problem: bool = False                       # apply the Given and section rules
    render: bool = True
    root: Path | None = None                    # the project root (where check paths are relative to)
    html_cache: Path | None = None              # where rendered check fences are kept between builds
    render_key: str = ""                        # a hash of the site configuration the HTML depends on


@dataclass
class PageReport:
    text: str
    diagnostics: list[Diagnostic] = field(default_factory=list)
    claims: dict[str, int] = field(default_factory=dict)   # check -> claims verified on this page


def failure_message(res: CheckResult, name: str) -> tuple[str, str]:
    """The one-line message and the detail for a check that produced no values."""
    if res.status == "missing":
        return f"check '{res.check}' does not exist (named by 'check: {name}')", ""
    if res.status == "timeout":
        return (f"check '{res.check}' timed out after {res.timeout_s:g} s "
                "(raise it with a '# numbook: timeout=SECONDS' line in the check)"), res.traceback_excerpt()
    if res.status in ("frozen-missing", "frozen-stale", "frozen-invalid"):
        return res.stderr.strip(), ""
    if res.status == "skipped":
        return "", ""
    last = res.stderr.strip().splitlines()[-1] if res.stderr.strip() else f"exit code {res.returncode}"
    return f"check '{res.check}' raised: {last}", res.traceback_excerpt()


def fenced(text: str) -> Iterator[tuple[int, str, bool]]:
    """Each line of ``text`` with its index and whether it is fenced code (a fence line included)."""
    fence: str | None = None
    for idx, line in enumerate(text.split("\n")):
        fm = _FENCE.match(line)
        if fence is not None:
            if fm and fm.group(1)[0] == fence[0] and len(fm.group(1)) >= len(fence):
                fence = None
            yield idx, line, True
        elif fm:
            fence = fm.group(1)
            yield idx, line, True
        else:
            yield idx, line, False


def h2(line: str) -> str | None:
    """The title of a level-2 heading, or None."""
    hm = _HEADING.match(line)
    return hm.group(2).strip() if hm and len(hm.group(1)) == 2 else None


def section_faults(path: str, seen: list[str], line: int) -> list[Diagnostic]:
    """Missing and misordered sections of a problem page, given its H2 titles in order."""
    out = [Diagnostic(path, line, f"missing section '## {want}'") for want in SECTIONS if want not in seen]
    order = [n for n in seen if n in _ORDERED]
    if order != sorted(order, key=_ORDERED.index):
        out.append(Diagnostic(path, line, "sections out of order: " + ", ".join(_ORDERED)))
    return out


def _math_ranges(line: str, state: str) -> tuple[list[tuple[int, int]], str]:
    """Character ranges of ``line`` that are TeX math, and the math left open at its end.

    ``state`` is ``""`` (text), ``"$"`` (inline math continued from the line before) or
    ``"$$"`` (a display block still open). Inline math does not cross a blank line.
    """
    ranges: list[tuple[int, int]] = []
    i, n = 0, len(line)
    start = 0 if state else -1
    while i < n:
        if line.startswith("\\$", i):
            i += 2
            continue
        if line.startswith("$$", i) and state != "$":
            if state == "$$":
                ranges.append((start, i))
                start, state = -1, ""
            else:
                start, state = i + 2, "$$"
            i += 2
            continue
        if line[i] == "$" and state != "$$":
            if state == "$":
                ranges.append((start, i))
                start, state = -1, ""
            else:
                start, state = i + 1, "$"
        i += 1
    if state:
        ranges.append((start, n))
    return ranges, state


def _inside(pos: int, ranges: list[tuple[int, int]]) -> bool:
    return any(a <= pos < b for a, b in ranges)


def _display(lit: str, math: bool) -> str:
    text = lit.strip()
    if math:
        return re.sub(r"(?<!\\)%", r"\\%", text).replace("×", r"\times ").replace("≥", r"\geq ").replace(
            "≤", r"\leq ")
    return text.replace("{,}", ",").replace("\\%", "%").replace("\\times", "×").replace("\\,", " ")


class _Verifier:
    def __init__(self, ctx: PageContext) -> None:
        self.ctx = ctx
        self.diags: list[Diagnostic] = []
        self.claims: dict[str, int] = {}
        self.given_claimed: set[str] = set()
        self.failed_checks: set[str] = set()

    def error(self, line: int, msg: str, detail: str = "") -> None:
        self.diags.append(Diagnostic(self.ctx.path, line, msg, detail))

    def result_for(self, name: str | None, line: int) -> CheckResult | None:
        if not name:
            return None
        res = self.ctx.results(name)
        if not res.ok and name not in self.failed_checks:
            self.failed_checks.add(name)
            msg, detail = failure_message(res, name)
            if msg:
                self.error(self.ctx.check_line if name == self.ctx.check else line, msg, detail)
        return res if res.ok else None

    def claim(self, m: re.Match[str], line: int, section: str, math: bool) -> str:
        if m.group("sanity"):
            return self.sanity(m.group("sanity"), line)
        if m.group("figure"):
            return self.figure(m.group("figure"), line)
        lit_text, ref = m.group("lit"), m.group("ref").strip()
        shown = _display(lit_text, math)
        if ref == FREE:
            return shown
        name, _, tol_text = ref.partition("±")
        name = name.strip()
        check = self.ctx.check
        if ":" in name:
            stem, name = name.split(":", 1)
            check = stem if stem.endswith(".py") else stem + ".py"
        try:
            literal = parse_literal(lit_text, parse_tolerance(tol_text) if tol_text.strip() else None)
        except LiteralError as exc:
            self.error(line, f"claim '[[{lit_text}|{ref}]]': {exc}")
            return shown
        if check is None:
            self.error(line, f"claim '{name}' on a page with no check: add 'check:' to the front matter")
            return shown
        res = self.result_for(check, line)
        if res is None:
            return shown
        found, value = res.lookup(name)
        if not found:
            known = ", ".join(sorted([*res.inputs, *res.values])) or "nothing"
            self.error(line, f"claim '{name}' names a value {res.check} does not record (it records: {known})")
            return shown
        if section == "Given" and self.ctx.problem:
            if name not in res.inputs:
                self.error(line, f"claim '{name}' in Given binds to a computed value; Given states inputs, "
                                 f"recorded in {res.check} with given()")
            self.given_claimed.add(name)
        ok = literal.matches(value)
        if not ok:
            self.error(line, f"claim '{name}' reads {lit_text.strip()}, {res.check} computed "
                             f"{format_value(value)} (compared {literal.describe()})")
        self.claims[res.check] = self.claims.get(res.check, 0) + 1
        return self.render(shown, name, value, res, literal, ok, math)

    def render(self, shown: str, name: str, value: Any, res: CheckResult, literal: Literal, ok: bool,
               math: bool) -> str:
        if not self.ctx.render:
            return shown
        tip = f"{name} = {format_value(value)} · {res.check}"
        if math:  # MathJax's \texttip mis-sizes its box in SVG output; a class keeps the number plain
            return rf"\class{{nb-claim}}{{{shown}}}"
        cls = "nb-claim" if ok else "nb-claim nb-claim-bad"
        return (f'<span class="{cls}" title="{html.escape(tip)} ({literal.describe()})" '
                f'data-claim="{html.escape(name)}">{html.escape(shown, quote=False)}</span>')

    def sanity(self, name: str, line: int) -> str:
        res = self.result_for(self.ctx.check, line)
        if res is None:
            return ""
        entry = res.sanity.get(name)
        if entry is None:
            known = ", ".join(sorted(res.sanity)) or "none"
            self.error(line, f"sanity marker '{name}' names no assertion in {res.check} (it asserts: {known})")
            return ""
        self.claims[res.check] = self.claims.get(res.check, 0) + 1
        where = f"{res.check}, line {res.lines.get(name, '?')}"
        if not self.ctx.render:
            return ""
        return (f'<span class="nb-sanity" role="img" aria-label="assertion {html.escape(name)} held" '
                f'title="assertion \'{html.escape(name)}\' held when {html.escape(where)} ran">✓</span>')

    def figure(self, name: str, line: int) -> str:
        res = self.result_for(self.ctx.check, line)
        if res is None:
            return ""
        fig = res.figures.get(name)
        if fig is None:
            known = ", ".join(sorted(res.figures)) or "none"
            self.error(line, f"figure '{name}' is not drawn by {res.check} (it draws: {known})")
            return ""
        if not self.ctx.render:
            return ""
        # an <img> with a data URI: the page stays small for the search index, and the SVG needs no file
        data = base64.b64encode(fig["svg"].encode("utf-8")).decode("ascii")
        img = f'<img src="data:image/svg+xml;base64,{data}" alt="{html.escape(fig["caption"])}">'
        return (f'<figure class="nb-figure" data-figure="{html.escape(name)}">{img}'
                f"<figcaption>{html.escape(fig['caption'])} <span class=\"nb-figure-source\">Drawn by "
                f"{html.escape(res.check)} for this build.</span></figcaption></figure>")

    def unbound(self, text: str, line: int, section: str) -> None:
        for pat in _IGNORE:
            text = pat.sub(" ", text)
        for m in _NUMBER.finditer(text):
            if m.group() in ("0", "1"):
                continue
            self.error(line, f"unbound number '{m.group()}' in {section}: bind it with "
                             f"[[{m.group()}|name]] or mark it [[{m.group()}|free]]")


def verify_page(text: str, ctx: PageContext) -> PageReport:
    """Verify and render every claim of a page body (front matter already removed)."""
    v = _Verifier(ctx)
    out: list[str] = []
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

    for idx, line, code in fenced(text):
        lineno = idx + 1 + ctx.line_offset
        if code:
            out.append(line)
            continue
        title = h2(line)
        hm = _HEADING.match(line)
        if title is not None:
            close_sanity_block()
            section = title
            seen_sections.append(section)
            if section == "Given":
                given_line = lineno
        if not line.strip():
            close_sanity_block()
        elif section == "Check — sanity" and not hm:
            if re.match(r"^\s*(?:[-*+]|\d+\.)\s", line):
                close_sanity_block()  # each list item is a sentence of its own
            sanity_block.append((lineno, line))
        spans = [(m.start(), m.end()) for m in _CODE_SPAN.finditer(line)]
        if not line.strip() and math_state == "$":
            math_state = ""  # an unclosed $ does not run past its paragraph
        ranges, math_state = _math_ranges(line, math_state)
        pieces: list[str] = []
        plain: list[str] = []
        last = 0
        for m in CLAIM.finditer(line):
            if _inside(m.start(), spans):
                continue
            pieces.append(line[last:m.start()])
            plain.append(line[last:m.start()])
            pieces.append(v.claim(m, lineno, section, _inside(m.start(), ranges)))
            plain.append(" ")
            last = m.end()
        pieces.append(line[last:])
        plain.append(line[last:])
        if ctx.problem and section in UNBOUND_SECTIONS and not hm:
            v.unbound(_CODE_SPAN.sub(" ", "".join(plain)), lineno, section)
        out.append("".join(pieces))
    close_sanity_block()

    if ctx.problem:
        v.diags += section_faults(ctx.path, seen_sections, 1 + ctx.line_offset)
        res = ctx.results(ctx.check) if ctx.check else None
        if res is not None and res.ok:
            for name in res.inputs:
                if name not in v.given_claimed:
                    v.error(given_line or 1 + ctx.line_offset,
                            f"input '{name}' of {res.check} is not stated in Given: "
                            f"write it as [[{format_value(res.inputs[name])}|{name}]]")
    return PageReport("\n".join(out), v.diags, v.claims)
