"""The page as the search index reads it: what a reader reads, not the markup it is made of.

The theme's search plugin indexes a page from its HTML when the page's context is made. The plugin hands it this
view of the page instead of the page itself (and gives the page back afterwards, ``NumbookPlugin.on_page_context``):

- math is its rendered text (``numbook.html.plaintext.plain``): ``31,999``, not
  ``\\class{nb-claim}{\\cssId{…}{31{,}999}}``;
- a closed ``<details>`` block (a problem's Solution and Answer, a "Variation answers" fold) is its own entry,
  under the heading it sits under, whose text starts with where it is hidden: ``(hidden under “Show the
  solution”) …``. A reader who follows such a hit lands on a page where the words are not shown until that fold
  is opened; the snippet names the control to open. (Its toggle text, "Show the solution Hide the solution", is
  no text of the entry.)
- notebook code cells (mkdocs-jupyter pages) are left out: their source is Python, not prose, and it is on the
  page for running, not for finding;
- what the page marks ``data-search-exclude`` (check output, quiz explanations, model answers) is left out
  whole (the theme's own reading of the mark stops at the first closing tag of the same name inside it);
- on the run report, the folds and tables (hundreds of rows of check names, times and input values) are left
  out; its summary stays findable;
- tables are left out on every page: rows of figures and names a reader scans on the page, not words to search
  for (the index stays about the prose, and its size per page stays flat as pages grow tables);
- on a problem page, the fixed sections that say the same kind of thing are read with the one before them, so a
  page is a few entries, not fifteen: Given, Find and Strategy with the Statement (the page's first entry),
  Check — sanity with Check — numeric, Draws on and Used by with the Variation. A reader's browser builds the
  index from every entry when search first opens, and the number of entries costs as well as their words: on a
  generated book of a thousand problems (tools/scale_book.py), its index as 16,004 entries took 1.40–1.50 s to
  a first result and the same words as 7,104 entries 0.92–0.96 s, five runs each on one machine.

Every step is a function of the HTML alone, so a test gives HTML and reads the view.
"""

from __future__ import annotations

import html as _html
import re

from numbook.html.plaintext import plain

__all__ = ["search_view", "hidden_prefix", "READ_WITH_THE_ONE_BEFORE"]

_MATH = re.compile(r'(<(span|div) class="arithmatex">)\s*\\[(\[](.*?)\\[)\]]\s*(</\2>)', re.S)
_HEADING = re.compile(r'<h([1-6])\b[^>]*\bid="([^"]+)"[^>]*>(.*?)</h\1>', re.S)
_DETAILS = re.compile(r"<details\b[^>]*>|</details>")
_SUMMARY = re.compile(r"\s*<summary\b[^>]*>(.*?)</summary>", re.S)
_CODE_CELL = re.compile(r'<(?P<tag>div) class="jp-Cell jp-CodeCell\b')
_TAG = re.compile(r"<[^>]+>")


def _text(fragment: str) -> str:
    """The text of an HTML fragment, on one line (a heading's permalink sign dropped)."""
    fragment = re.sub(r'<a class="headerlink"[^>]*>.*?</a>', "", fragment, flags=re.S)
    return re.sub(r"\s+", " ", _html.unescape(_TAG.sub(" ", fragment))).strip()


def hidden_prefix(summary_html: str) -> str:
    """The words an entry from a closed fold starts with: the control a reader opens to see it."""
    shown = re.search(r'<span class="nb-show">(.*?)</span>', summary_html, re.S)   # a problem's reveal
    label = _text(shown.group(1) if shown else summary_html) or "Details"
    return f"(hidden under “{label}”)"


def _math(m: re.Match[str]) -> str:
    return f"{m.group(1)}{_html.escape(plain(_html.unescape(m.group(3))), quote=False)}{m.group(4)}"


def _end_of(page: str, start: int) -> int:
    """Where the ``<details>`` opened just before ``start`` closes (the end of the page if it does not)."""
    depth = 1
    for m in _DETAILS.finditer(page, start):
        depth += -1 if m.group(0) == "</details>" else 1
        if depth == 0:
            return m.start()
    return len(page)


def _folds(page: str) -> str:
    """Each closed ``<details>``: its summary replaced by where it is hidden, and a heading of the section it sits
    in when other text of that section comes before it (so that it is an entry of its own, at the section's
    address); a heading inside the fold starts an entry that says so too."""
    out: list[str] = []
    at = 0
    for m in _DETAILS.finditer(page):
        if m.start() < at or m.group(0) == "</details>":
            continue    # inside a fold already read: read with it
        summary = _SUMMARY.match(page, m.end())
        if re.search(r"\bopen\b", m.group(0)) or summary is None:
            continue    # an open fold is read as it is shown
        end = _end_of(page, summary.end())
        heading = None
        for h in _HEADING.finditer(page, 0, m.start()):
            heading = h
        insert = ""
        if heading is not None and _text(page[heading.end():m.start()]):
            level = heading.group(1)
            insert = f'<h{level} id="{heading.group(2)}">{_html.escape(_text(heading.group(3)))}</h{level}>'
        prefix = f"<p>{_html.escape(hidden_prefix(summary.group(1)), quote=False)}</p> "
        body = re.sub(r"(<h[1-6]\b[^>]*\bid=\"[^\"]+\"[^>]*>.*?</h[1-6]>)", r"\1" + prefix.replace("\\", r"\\"),
                      page[summary.end():end], flags=re.S)
        out += [page[at:m.end()], insert, prefix, body]
        at = end
    out.append(page[at:])
    return "".join(out)


def _drop(page: str, start: re.Pattern[str]) -> str:
    """The page without each element that ``start`` opens (its group ``tag`` names the tag), up to its own
    closing tag.

    Left out, not marked: the theme's search parser tells elements apart by their tag alone, so its
    ``data-search-exclude`` on a ``<div>`` ends at the first ``</div>`` inside it (a page's own marks are read
    here the same way, and their elements left out whole)."""
    out: list[str] = []
    at = 0
    for m in start.finditer(page):
        if m.start() < at:
            continue    # inside an element already left out
        tag = m.group("tag")
        pair = re.compile(rf"<{tag}\b[^>]*>|</{tag}>")
        depth = 0
        end = len(page)
        for t in pair.finditer(page, m.start()):
            depth += -1 if t.group(0).startswith("</") else 1
            if depth == 0:
                end = t.end()
                break
        out.append(page[at:m.start()])
        at = end
    out.append(page[at:])
    return "".join(out)


_MARKED = re.compile(r"<(?P<tag>[a-z][a-z0-9-]*)\b[^>]*\sdata-search-exclude\b[^>]*>")
_REPORT = re.compile(r"<(?P<tag>details)\b")


_TABLE = re.compile(r"<(?P<tag>table)\b")
_H2 = re.compile(r'<h2\b([^>]*)>(.*?)</h2>', re.S)
READ_WITH_THE_ONE_BEFORE = frozenset({"Given", "Find", "Strategy", "Check — sanity", "Draws on", "Used by"})
"""The sections of a problem page that the search index reads with the section before them."""


def _merged(page: str) -> str:
    """A problem page with the headings of :data:`READ_WITH_THE_ONE_BEFORE` made paragraphs of their words: the
    theme's search parser starts an entry at a heading (with an ``id``) and reads any heading's words as the title
    of the entry it is in, so as paragraphs their sections join the entry before, their names as its text."""
    def one(m: re.Match[str]) -> str:
        title = _text(m.group(2))
        return f"<p>{_html.escape(title, quote=False)}</p>" if title in READ_WITH_THE_ONE_BEFORE else m.group(0)
    return _H2.sub(one, page)


def search_view(page: str, *, report: bool = False, problem: bool = False) -> str:
    """The HTML of a page as the search index should read it (see the module's description)."""
    view = _MATH.sub(_math, page)
    view = _drop(_drop(_drop(view, _MARKED), _CODE_CELL), _TABLE)
    if report:
        return _drop(view, _REPORT)
    return _folds(_merged(view) if problem else view)
