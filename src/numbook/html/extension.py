"""The Python-Markdown side of the book: claims in the prose and the ``check`` fence.

    markdown_extensions:
      - numbook            # claims: [[262.1|fp32_mb]], [[sanity:name]], [[2024|free]]
      - pymdownx.superfences:
          custom_fences:
            - {name: check, class: check, validator: !!python/name:numbook.html.extension.check_validator,
               format: !!python/name:numbook.html.extension.check_formatter}

The MkDocs plugin adds the ``check`` fence itself and hands the extension a ``session``
(``numbook.html.session``): before each conversion, the page with its context, its report from
the book's verification pass (``numbook.core.bookpass``) and its frame. Without the plugin, the
extension's own config names the page, its check and the project root, or a ``context`` object
(and its ``results``) is passed directly.

The flow is one way. The claim preprocessor renders the records of the page's report
(``numbook.html.render``) as stashed elements, so later stages (the quiz key rule in
``numbook.html.components.keys``) read records, never HTML. It verifies the text itself
(``numbook.core.bookpass.check_page``) only where no report is for the text it is given: outside
MkDocs, or where a plugin after numbook changed the page's Markdown. The frame (a problem's H1, its
conventions, Draws on and Used by) and the legend go into the page's tree as elements
(``numbook.html.frame``), and a check fence is the HTML its formatter returns: nothing here reads back
HTML it wrote.
"""

from __future__ import annotations

import hashlib
import os
import re
import xml.etree.ElementTree as etree
from pathlib import Path
from typing import Any

from markdown import Markdown
from markdown.extensions import Extension
from markdown.preprocessors import Preprocessor
from markdown.treeprocessors import Treeprocessor
from markdown_exec import base_format

from numbook.core.bookpass import check_page
from numbook.core.diagnostics import Diagnostic, log
from numbook.core.result import DEFAULT_CACHE_DIR, Source
from numbook.core.units import name_unit, parse_unit
from numbook.core.verify import PageContext, Record, RecordKind, Results, failure_message
from numbook.html.frame import put_frame, put_legend
from numbook.html.render import cell_interval, claim_index, element, interval, rewrite, tex, to_html
from numbook.html.session import Session, SessionPage
from numbook.run.runner import CheckResult, Runner

__all__ = ["NumbookExtension", "check_formatter", "check_validator", "makeExtension", "extension_of", "report"]


class ClaimPreprocessor(Preprocessor):
    """Renders the records of the page's report on the lines of the page (verifying them first where no
    report is for these lines)."""

    def __init__(self, md: Markdown, ext: NumbookExtension) -> None:
        super().__init__(md)
        self.ext = ext

    def run(self, lines: list[str]) -> list[str]:
        if getattr(self.md, "_original_md", None) is not None:
            return lines  # markdown-exec's inner conversion of already rendered text
        self.ext.claim_index = None
        page = self.ext.page()
        if page is None or not page.verify:
            return lines
        text = "\n".join(lines)
        rep = page.report
        if rep is None or rep.text != text:
            if rep is not None:
                log.debug(f"numbook: {page.context.path} changed after the book's pass: verified as converted")
            rep = check_page(text, page.context, self.ext.results())
            self.ext.session.reporter.report(rep.diagnostics)
        self.math: list[tuple[str, Record]] = []
        out = rewrite(rep.text, rep.records, self.emit, self.behind)
        if any(rec.kind == RecordKind.CLAIM for _, rec in self.math):
            self.ext.claim_index = self.md.htmlStash.store(claim_index(self.math))
        return out.split("\n")

    def emit(self, rec: Record) -> str:
        if rec.math:
            ident = f"nb-mc-{rec.line}-{rec.start}"   # unique on the page: its line in the file and its column
            self.math.append((ident, rec))
            return tex(rec, ident if rec.kind == RecordKind.CLAIM else "")
        el = element(rec)
        if el is None:
            return ""
        placeholder = self.md.htmlStash.store(to_html(el))
        self.ext.stashed[len(self.md.htmlStash.rawHtmlBlocks) - 1] = rec
        return placeholder

    def behind(self, rec: Record) -> str:
        """A measured value's interval after its claim and unit (``numbook.html.render.interval``), stashed."""
        el = interval(rec)
        if el is None:
            return ""
        placeholder = self.md.htmlStash.store(to_html(el))
        self.ext.intervals[len(self.md.htmlStash.rawHtmlBlocks) - 1] = rec
        return placeholder


REVEAL = {"Solution": "Show the solution", "Answer": "Show the answer"}


class RevealTreeprocessor(Treeprocessor):
    """On problem pages, put the body of Solution and Answer behind a reveal: try first, then look."""

    def __init__(self, md: Markdown, ext: NumbookExtension) -> None:
        super().__init__(md)
        self.ext = ext

    def run(self, root: etree.Element) -> None:
        page = self.ext.page()
        if page is None or not page.context.problem or getattr(self.md, "_original_md", None) is not None:
            return
        children = list(root)
        i = 0
        while i < len(children):
            el = children[i]
            title = (el.text or "").strip() if el.tag == "h2" else ""  # not the permalink's "¶"
            if title in REVEAL:
                j = i + 1
                while j < len(children) and children[j].tag not in ("h1", "h2"):
                    j += 1
                body = children[i + 1:j]
                if body:
                    details = etree.Element("details", {"class": "nb-reveal"})
                    summary = etree.SubElement(details, "summary")
                    show = etree.SubElement(summary, "span", {"class": "nb-show"})
                    show.text = REVEAL[title]
                    hide = etree.SubElement(summary, "span", {"class": "nb-hide"})
                    hide.text = REVEAL[title].replace("Show", "Hide", 1)
                    for child in body:
                        root.remove(child)
                        details.append(child)
                    root.insert(list(root).index(el) + 1, details)
                children = list(root)
                i = children.index(el) + 2
                continue
            i += 1


class FrameTreeprocessor(Treeprocessor):
    """Puts the page's frame around the blocks of its Markdown (``numbook.html.frame.put_frame``).

    It runs right after the block parser, before the footnotes are added at the end of the page and before
    the inline processor reads the frame's titles."""

    def __init__(self, md: Markdown, ext: NumbookExtension) -> None:
        super().__init__(md)
        self.ext = ext
        self.conventions: etree.Element | None = None   # the legend goes after it (LegendTreeprocessor)

    def run(self, root: etree.Element) -> None:
        self.conventions = None
        page = self.ext.page()
        if page is None or page.frame is None or getattr(self.md, "_original_md", None) is not None:
            return
        self.conventions = put_frame(root, page.frame)


class ClaimIndexTreeprocessor(Treeprocessor):
    """Puts the page's index of math claims (``numbook.html.render.claim_index``) last, after the frame's Draws on
    and Used by and before the footnotes: a raw HTML block, as the claim preprocessor stashed it."""

    def __init__(self, md: Markdown, ext: NumbookExtension) -> None:
        super().__init__(md)
        self.ext = ext

    def run(self, root: etree.Element) -> None:
        if self.ext.claim_index is not None and getattr(self.md, "_original_md", None) is None:
            etree.SubElement(root, "p").text = self.ext.claim_index


class CellIntervalTreeprocessor(Treeprocessor):
    """In a table cell, a measured value's interval shows compactly (``numbook.html.render.cell_interval``): the
    stashed suffix of each claim whose placeholder sits in a ``td`` or ``th`` is replaced by the short form."""

    def __init__(self, md: Markdown, ext: NumbookExtension) -> None:
        super().__init__(md)
        self.ext = ext

    def run(self, root: etree.Element) -> None:
        if not self.ext.intervals:
            return
        stash = self.md.htmlStash
        wanted = {stash.get_placeholder(i): i for i in self.ext.intervals}
        for cell in (el for el in root.iter() if el.tag in ("td", "th")):
            text = "".join(cell.itertext())
            for placeholder, i in wanted.items():
                if placeholder in text:
                    el = cell_interval(self.ext.intervals[i])
                    if el is not None:
                        stash.rawHtmlBlocks[i] = to_html(el)


class EmptyHeaderTreeprocessor(Treeprocessor):
    """A table's empty header cell (the corner of ``| | p50 | p99 |``) heads nothing: it becomes a ``td``, so
    that assistive technology is not handed a column header without a name (axe: empty-table-header)."""

    def run(self, root: etree.Element) -> None:
        for head in root.iter("thead"):
            for cell in head.iter("th"):
                if len(cell) == 0 and not "".join(cell.itertext()).strip():
                    cell.tag = "td"


class LegendTreeprocessor(Treeprocessor):
    """Puts the legend after the page's H1 and its conventions (``numbook.html.frame.put_legend``), once
    Python-Markdown has indented the tree for output."""

    def __init__(self, md: Markdown, ext: NumbookExtension, frame: FrameTreeprocessor) -> None:
        super().__init__(md)
        self.ext = ext
        self.frame = frame

    def run(self, root: etree.Element) -> None:
        page = self.ext.page()
        if page is None or page.frame is None or not page.frame.legend:
            return
        if getattr(self.md, "_original_md", None) is None:
            put_legend(root, self.frame.conventions)


class NumbookExtension(Extension):
    """Claims and check fences. The page comes from the plugin's session, a ``context``, or the config."""

    def __init__(self, **kwargs: Any) -> None:
        self.config = {
            "session": ["", "The build's numbook.html.session.Session (set by the MkDocs plugin)."],
            "context": ["", "A numbook.core.verify.PageContext for the page being converted (programmatic use)."],
            "results": ["", "The numbook.core.verify.Results the context's claims are verified against (with "
                            "'context'; by default the runner of the configured root)."],
            "root": [".", "Project root (the folder holding checks/), when no plugin sets the page."],
            "checks_dir": ["checks", "Folder of the check scripts, relative to the root."],
            "cache_dir": [DEFAULT_CACHE_DIR, "Result cache, relative to the root ('' for none)."],
            "page_path": ["", "The page's path, for messages (no plugin)."],
            "check": ["", "The page's check, relative to checks_dir (no plugin)."],
            "line_offset": [0, "Lines of front matter before the Markdown (no plugin)."],
            "problem": [False, "Apply the problem-page rules (Given, sections, unbound numbers)."],
        }
        super().__init__(**kwargs)
        self.stashed: dict[int, Record] = {}   # htmlStash index -> the record stashed there (components.keys)
        self.intervals: dict[int, Record] = {}   # htmlStash index -> the claim whose interval suffix is there
        self.claim_index: str | None = None    # the placeholder of the page's index of math claims
        self._results: Results | None = None
        session = self.getConfig("session")
        self.session: Session = session if isinstance(session, Session) else Session()
        if not isinstance(session, Session):
            self.session.default = self._configured_context()

    def _configured_context(self) -> PageContext | None:
        given, results = self.getConfig("context"), self.getConfig("results")
        if hasattr(results, "result"):
            self._results = results
        cfg = self.getConfigs()
        if not isinstance(given, PageContext) and not cfg["page_path"]:
            return None
        if isinstance(given, PageContext):
            return given
        problem = bool(cfg["problem"])
        return PageContext(cfg["page_path"], cfg["check"] or None, root=Path(cfg["root"]).resolve(),
                           line_offset=int(cfg["line_offset"]), problem=problem, scan_numbers=problem)

    def page(self) -> SessionPage | None:
        """The page being converted (see ``numbook.html.session``), or None."""
        return self.session.current()

    def results(self) -> Results:
        """The results the page's claims and fences read: the build's, else those configured, else the runner of
        the configured root (made when first asked for)."""
        found = self.session.results if self.session.results is not None else self._results
        if found is None:
            cfg = self.getConfigs()
            found = self._results = Runner(Path(cfg["root"]), cfg["checks_dir"], cfg["cache_dir"] or None)
        return found

    def extendMarkdown(self, md: Markdown) -> None:  # noqa: N802 (Python-Markdown's API)
        md.registerExtension(self)
        # after normalize_whitespace (30), which strips the STX/ETX of stashed placeholders
        md.preprocessors.register(ClaimPreprocessor(md, self), "numbook_claims", 29)
        frame = FrameTreeprocessor(md, self)
        md.treeprocessors.register(frame, "numbook_frame", 55)          # after the blocks, before the footnotes (50)
        md.treeprocessors.register(ClaimIndexTreeprocessor(md, self), "numbook_claim_index", 54)
        md.treeprocessors.register(CellIntervalTreeprocessor(md, self), "numbook_cell_intervals", 53)
        md.treeprocessors.register(EmptyHeaderTreeprocessor(md), "numbook_empty_header", 52)
        md.treeprocessors.register(LegendTreeprocessor(md, self, frame), "numbook_legend", 9)   # after prettify (10)
        md.treeprocessors.register(RevealTreeprocessor(md, self), "numbook_reveal", 1)

    def reset(self) -> None:
        self.stashed = {}
        self.intervals = {}


def extension_of(md: Markdown) -> NumbookExtension | None:
    """The numbook extension registered on ``md``, if any."""
    return next((e for e in md.registeredExtensions if isinstance(e, NumbookExtension)), None)


def report(md: Markdown, line: int | None, message: str) -> None:
    """Report a fault found while converting ``md`` as ``path:line: message``, on the build's one road.

    ``line`` counts from the first line of the converted text; the page's front matter is added.
    """
    ext = extension_of(md)
    session = ext.session if ext is not None else Session()
    page = session.current()
    path = page.context.path if page is not None else "<markdown>"
    shown = line + (page.context.line_offset if page is not None else 0) if line is not None else 0
    session.reporter.report([Diagnostic(path, shown, message)])


def check_validator(language: str, inputs: dict[str, str], options: dict[str, Any], attrs: dict[str, Any],
                    md: Markdown) -> bool:
    """Accept ```` ```check ```` and ```` ```check path="other.py" ````."""
    options["path"] = inputs.pop("path", "")
    return not inputs or all(k in ("title",) for k in inputs)


_FROZEN_TITLE = ("The raw measurements were made on the GPU named here, with that driver and those versions, on that "
                 "date, from the check source with that hash. This build has no usable GPU: it ran the check on its "
                 "CPU with those measurements and derived every value and sanity from them.")


def _stamp(res: CheckResult) -> etree.Element:
    frozen = res.source is Source.FROZEN   # measured on a GPU by an earlier run and committed, derived here:
    p = etree.Element("p", {"class": "nb-stamp nb-stamp-frozen" if frozen else "nb-stamp"})
    if frozen:   # never shown as a live GPU run
        p.set("title", _FROZEN_TITLE)
    label = etree.SubElement(p, "span", {"class": "nb-stamp-label"})
    label.text = "Frozen GPU measurements" if frozen else "Executed"
    label.tail = " " + res.stamp()
    return p


def _measured(res: CheckResult) -> etree.Element | None:
    """The measured values of a check that carry an interval, under its stamp: each value with its samples,
    repeats and interval, and what was measured."""
    spreads = [(name, spread) for name in res.values if (spread := res.spread(name)) is not None]
    if not spreads:
        return None
    p = etree.Element("p", {"class": "nb-stamp nb-stamp-measured"})
    label = etree.SubElement(p, "span", {"class": "nb-stamp-label"})
    label.text = "Measured"
    parts = []
    for name, spread in spreads:
        declared = res.units.get(name)
        unit = (parse_unit(declared) if declared else name_unit(name))
        symbol = unit.symbol if unit is not None else (declared or "")
        x = res.values[name]
        point = f"{x:.6g}" if isinstance(x, float) else str(x)
        u = f" {symbol}" if symbol else ""
        what = res.measured.get(name, "")
        parts.append(f"{name} = {point}{u}, {spread.level_words} CI {spread.lo:.6g}–{spread.hi:.6g}{u} "
                     f"(n = {spread.n}, {spread.repeats_words}; {spread.kind}{'; ' + what if what else ''})")
    label.tail = " " + " · ".join(parts)
    return p


_COLUMNS = re.compile(r"\S {2,}\S")   # two or more spaces between words: aligned columns, a table row


def is_prose(line: str) -> bool:
    """A printed line that is a sentence, not a table row or a text plot: it may wrap on screen."""
    body = line.strip()
    return len(body) > 40 and not _COLUMNS.search(body) and "|" not in body


def _output(res: CheckResult) -> str:
    """The check's output: table rows keep their columns (the block scrolls, and shows that it does);
    sentences wrap at the column's width with a hanging indent (class ``nb-prose``)."""
    pre = etree.Element("pre", {"class": "nb-output"})
    code = etree.SubElement(pre, "code")
    code.text = ""
    last: etree.Element | None = None
    for line in res.stdout.rstrip().split("\n"):
        if is_prose(line):
            last = etree.SubElement(code, "span", {"class": "nb-prose"})
            last.text, last.tail = line, "\n"
        elif last is None:
            code.text += line + "\n"
        else:
            last.tail = (last.tail or "") + line + "\n"
    if last is None:
        code.text = code.text[:-1]
    else:
        last.tail = (last.tail or "")[:-1]
    measured = _measured(res)
    return to_html(pre) + to_html(_stamp(res)) + (to_html(measured) if measured is not None else "")


def _libraries(session: Session, ctx: PageContext, path: Path) -> list[str] | None:
    """The libraries the page's download needs (numbook.run.standalone.requirements); None where it is not
    offered, or cannot be (the plugin reports why)."""
    if not (session.run_yourself and ctx.problem and path.is_file()):
        return None
    from numbook.run.standalone import StandaloneError, requirements

    try:
        return requirements(path, path.parent, ctx.root)
    except (StandaloneError, OSError):
        return None


def _run_yourself(session: Session, ctx: PageContext, res: CheckResult, libs: list[str] | None) -> str:
    """Links to the check as a script and as a notebook, written next to the page (numbook.run.standalone):
    relative to the page, and naming the libraries they need."""
    if not (session.run_yourself and ctx.problem) or libs is None or res.source is Source.FROZEN:
        return ""   # a frozen GPU check is not offered: a reader's CPU cannot run it
    from numbook.run.standalone import pip_line

    stem = Path(res.check).stem
    p = etree.Element("p", {"class": "nb-run-yourself"})
    b = etree.SubElement(p, "strong")
    b.text = "Run it yourself:"
    b.tail = " the check as a "
    a = etree.SubElement(p, "a", {"href": f"{stem}.py", "download": ""})
    a.text = "script"
    a.tail = " or as a "
    a2 = etree.SubElement(p, "a", {"href": f"{stem}.ipynb", "download": ""})
    a2.text = "notebook"
    a2.tail = ", run for this build. Change a given() and run it again. It needs Python 3.11 or later and "
    if libs:
        a2.tail += f"{', '.join(libs)}: "
        code = etree.SubElement(p, "code", {"class": "nb-pip"})
        code.text = pip_line(libs)
        code.tail = "; not numbook."
    else:
        a2.tail += "nothing beyond the standard library; not numbook."
    return to_html(p)


def _failed(text: str) -> str:
    div = etree.Element("div", {"class": "admonition failure nb-check-failed"})
    title = etree.SubElement(div, "p", {"class": "admonition-title"})
    title.text = "The check did not produce a result"
    code = etree.SubElement(etree.SubElement(div, "pre"), "code")
    code.text = text
    return to_html(div)


def check_formatter(src: str, language: str, css_class: str, options: dict[str, Any], md: Markdown,
                    **kwargs: Any) -> str:
    """Show a check's source and the output it printed for this build, with its stamp."""
    ext = extension_of(md)
    page = ext.page() if ext is not None else None
    ctx = page.context if page is not None else None
    name = options.get("path") or (ctx.check if ctx else None)
    if ext is None or ctx is None or not name:
        if ext is not None:
            report(md, None, "a ```check fence on a page with no check: add 'check:' to the front matter")
        return _failed("No check for this page.")
    res = ext.results().result(name)
    if not res.ok:
        msg, _ = failure_message(res, name)
        return _failed(res.stderr.strip() or msg)
    path = (ctx.root or Path(".")) / res.check
    source = path.read_text(encoding="utf-8") if path.is_file() else ""
    output = _output(res)
    # only the page's own check is offered (the plugin writes no other): a fence that shows another check
    # (```check path=...) links to nothing
    own = not options.get("path") or Path(str(options["path"])).name == Path(ctx.check or "").name
    offered = ext.session.run_yourself and ctx.problem and own and path.is_file()
    if offered:   # what the run-it-yourself line names comes from the helpers and the harness too
        from numbook.run.standalone import sources_stamp

        output_key = f"{output}\0run yourself {sources_stamp(path.parent, ctx.root)}"
    else:
        output_key = output
    cached = _fence_cache(ext.session, source, output_key)
    if cached is not None and cached.is_file():
        return cached.read_text(encoding="utf-8")
    libs = _libraries(ext.session, ctx, path) if offered else None
    rendered = str(base_format(language="python", run=lambda *a, **k: output, code=source, md=md, html=True,
                               source="tabbed-right", tabs=(f"Source · {res.check}", "Output"),
                               update_toc=False))
    # the reader's search finds the prose, not the check's printed trace and source. A <section>: Material's
    # search parser ends an exclusion at the first closing tag of the same name, and the tabs are all <div>s
    links = _run_yourself(ext.session, ctx, res, libs)
    rendered = f'<section class="nb-check" data-search-exclude="">{rendered}{links}</section>'
    if cached is not None:
        cached.parent.mkdir(parents=True, exist_ok=True)
        tmp = cached.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(rendered, encoding="utf-8")
        tmp.replace(cached)
    return rendered


def _fence_cache(session: Session, source: str, output: str) -> Path | None:
    """Where the rendered fence for this source and output lives (highlighting a check costs ~50 ms)."""
    if session.html_cache is None:
        return None
    h = hashlib.sha256("\0".join(["fence-5", session.render_key, source, output]).encode("utf-8")).hexdigest()
    return session.html_cache / f"{h[:24]}.html"


def makeExtension(**kwargs: Any) -> NumbookExtension:  # noqa: N802 (Python-Markdown's API)
    return NumbookExtension(**kwargs)
