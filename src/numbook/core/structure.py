"""The structure of a Markdown page, as the book's Markdown extensions read it: one module, one rule.

Everything in the tooling that asks "is this line code?", "where does the front matter end?",
"which part of this line is a code span or TeX math?" or "which section is this?" asks here:
the claim processor, lint, the components' line locator and the author CLI. The rules follow
the extensions the book renders with:

- **fenced code** as pymdownx.superfences reads it: an opening fence of three or more backticks or
  tildes (at any indent), closed only by a line holding the same character, at least as many,
  and nothing else (so a ```` ```python ```` line inside a ```` ``` ```` fence is content, not a close);
- **indented code** as Python-Markdown reads it: after a blank line, a line indented four spaces
  (or a tab) past the content of the block it sits in. The content of a list item, an
  admonition (``!!!``), a details block (``???``) and a content tab (``===``) is itself indented
  four spaces, so an explanation under a quiz option or the body of a note is prose, not code;
- **front matter**: a YAML block between ``---`` lines at the very top of the file.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator
from dataclasses import dataclass

__all__ = ["PAGES_REMEMBERED", "Line", "walk", "code_spans", "paragraph_code_spans", "math_ranges", "inside", "h2",
           "heading", "FRONT_MATTER", "check_file_name", "list_ordinals"]

FRONT_MATTER = re.compile(r"\A---[ \t]*\n(.*?\n)?(?:---|\.\.\.)[ \t]*(?:\n|\Z)", re.DOTALL)
"""The one front-matter rule (MkDocs' own: ``mkdocs.utils.meta``)."""

PAGES_REMEMBERED = 1 << 15
"""How many texts the per-text memos keep (lines here; the checks a page uses and the digits a check's labels
type, in numbook.core.lint): more than a book has pages, several times over. A memo smaller than the book
forgets every page before it is asked again (a build walks the pages in order), so each rebuild under
``mkdocs serve`` would read every page anew."""

_FENCE_OPEN = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})(?P<rest>.*)$")
_HEADING = re.compile(r"^(#{1,6})[ \t]+(.*?)[ \t]*(?:\{[^}]*\})?[ \t]*#*[ \t]*$")
_CONTAINER = re.compile(r"^(?P<indent> *)(?:(?:[-*+]|\d+[.)])[ \t]+|(?:!!!|\?\?\?\+?|===\+?)[ \t]+\S)")
_CODE_SPAN = re.compile(r"(?<!`)(`+)(?!`)(.+?)(?<!`)\1(?!`)", re.DOTALL)


@dataclass(frozen=True)
class Line:
    """One line of a page: its 0-based index, its text, and whether it is code (fence lines included)."""

    index: int
    text: str
    code: bool


def _indent(line: str) -> int:
    width = 0
    for ch in line:
        if ch == " ":
            width += 1
        elif ch == "\t":
            width += 4 - width % 4
        else:
            break
    return width


def walk(text: str) -> tuple[Line, ...]:
    """Each line of ``text``, marked code or not, by superfences' and Python-Markdown's rules.

    Remembered by the text: a build asks for each page's lines several times (claims, lint, the checks a
    page uses), and ``mkdocs serve`` again on every rebuild, where only the edited page has changed."""
    return _walk(text)


@functools.lru_cache(maxsize=PAGES_REMEMBERED)
def _walk(text: str) -> tuple[Line, ...]:
    return tuple(_lines(text))


def _lines(text: str) -> Iterator[Line]:
    fence: str | None = None
    containers: list[int] = []       # content indents of the open list items / admonitions / tabs
    code_indent: int | None = None   # the indent of an open indented code block
    blank_before = True
    for idx, line in enumerate(text.split("\n")):
        if fence is not None:
            stripped = line.strip()
            if stripped and set(stripped) == {fence[0]} and len(stripped) >= len(fence):
                fence = None
            yield Line(idx, line, True)
            continue
        blank = not line.strip()
        ind = _indent(line)
        if code_indent is not None:
            if blank or ind >= code_indent:
                yield Line(idx, line, True)
                blank_before = blank
                continue
            code_indent = None
        if blank:
            blank_before = True
            yield Line(idx, line, False)
            continue
        # leave the containers this line is not inside (a lazy continuation line keeps them)
        if blank_before:
            while containers and ind < containers[-1]:
                containers.pop()
        base = containers[-1] if containers else 0
        if blank_before and ind >= base + 4:
            code_indent = base + 4
            yield Line(idx, line, True)
            blank_before = False
            continue
        fm = _FENCE_OPEN.match(line)
        if fm and not (fm.group("fence")[0] == "`" and "`" in fm.group("rest")):
            fence = fm.group("fence")
            yield Line(idx, line, True)
            blank_before = False
            continue
        cm = _CONTAINER.match(line)
        if cm:
            while containers and ind < containers[-1]:
                containers.pop()
            containers.append(len(cm.group("indent")) + 4)
        blank_before = False
        yield Line(idx, line, False)


_LIST_ITEM = re.compile(r"^[ \t]*(?:[-*+]|\d+[.)])[ \t]+\S")
_ORDERED_ITEM = re.compile(r"^[ \t]*\d+[.)][ \t]")


def list_ordinals(lines: list[Line] | tuple[Line, ...]) -> set[int]:
    """Indices of the lines whose leading number is an ordered list's marker, as Python-Markdown reads a list.

    A list starts only where a block starts (at the top, after a blank line, a heading or code): a line
    ``2048. tokens`` inside a paragraph does not interrupt it, and the reader reads 2048. Once a list is open,
    each item line that follows it (after its lazy continuation lines or a blank line) is an item too, until
    a line at the list's indent that is no item closes it. The marker's number is no quantity: the list
    numbers its items itself."""
    out: set[int] = set()
    block_start, in_list = True, False
    for ln in lines:
        text = ln.text
        if ln.code:
            block_start = True
            continue
        if not text.strip():
            block_start = True
            continue
        item = _LIST_ITEM.match(text)
        if item and (block_start or in_list):
            in_list = True
            if _ORDERED_ITEM.match(text):
                out.add(ln.index)
        elif block_start and _indent(text) == 0:
            in_list = False
        block_start = heading(text) is not None
    return out


def code_spans(line: str) -> list[tuple[int, int]]:
    """Character ranges of ``line`` inside inline code spans (backticks included)."""
    return [(m.start(), m.end()) for m in _CODE_SPAN.finditer(line)]


def paragraph_code_spans(lines: list[Line]) -> dict[int, list[tuple[int, int]]]:
    """Code-span ranges per line index, where a span may run across the lines of one paragraph.

    Python-Markdown reads ```a\nb``` inside a paragraph as one code span; a blank line or a
    code block ends the paragraph, and with it any span left open.
    """
    out: dict[int, list[tuple[int, int]]] = {}
    para: list[Line] = []

    def flush() -> None:
        if not para:
            return
        text = "\n".join(ln.text for ln in para)
        starts = []
        pos = 0
        for ln in para:
            starts.append(pos)
            pos += len(ln.text) + 1
        for m in _CODE_SPAN.finditer(text):
            for ln, at in zip(para, starts, strict=True):
                a, b = max(m.start(), at), min(m.end(), at + len(ln.text))
                if a < b or (a == b and m.start() <= at < m.end()):
                    out.setdefault(ln.index, []).append((a - at, b - at))
        para.clear()

    for ln in lines:
        if ln.code or not ln.text.strip():
            flush()
        else:
            para.append(ln)
    flush()
    return out


def math_ranges(line: str, state: str) -> tuple[list[tuple[int, int]], str]:
    """Character ranges of ``line`` that are TeX math, and the math left open at its end.

    ``state`` is ``""`` (text), ``"$"`` (inline math continued from the line before) or
    ``"$$"`` (a display block still open). An escaped ``\\$`` is a dollar sign, not math.
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


def inside(pos: int, ranges: list[tuple[int, int]]) -> bool:
    """Whether ``pos`` falls in one of ``ranges``."""
    return any(a <= pos < b for a, b in ranges)


def heading(line: str) -> tuple[int, str] | None:
    """``(level, title)`` of an ATX heading (attribute list and closing hashes removed), or None."""
    hm = _HEADING.match(line)
    return (len(hm.group(1)), hm.group(2).strip()) if hm else None


def h2(line: str) -> str | None:
    """The title of a level-2 heading, or None."""
    found = heading(line)
    return found[1] if found and found[0] == 2 else None


def check_file_name(name: str) -> str:
    """A check named in front matter, a fence or a claim, as a file name: ``x`` and ``x.py`` are one check."""
    name = name.strip()
    return name if name.endswith(".py") else name + ".py"
