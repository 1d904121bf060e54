"""The Python-Markdown side of the book: claims in the prose and the ``check`` fence.

    markdown_extensions:
      - numbook            # claims: [[262.1|fp32_mb]], [[sanity:name]], [[2024|free]]
      - pymdownx.superfences:
          custom_fences:
            - {name: check, class: check, validator: !!python/name:numbook.html.extension.check_validator,
               format: !!python/name:numbook.html.extension.check_formatter}

The MkDocs plugin adds the ``check`` fence itself and hands the extension a ``session``
(``numbook.html.session``) holding each page's context. Without the plugin, the extension's
own config names the page, its check and the project root, or a ``context`` object is
passed directly.

The flow is one way: the claim preprocessor calls the verifier (``numbook.core.verify``), which
returns records and diagnostics; the diagnostics go to the session's reporter, and the
records are rendered (``numbook.html.render``) as stashed elements, so later stages (the quiz key
rule in ``numbook.html.components.keys``) read records, never HTML.
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

from numbook.core.diagnostics import Diagnostic
from numbook.core.result import DEFAULT_CACHE_DIR, Source
from numbook.core.verify import PageContext, PageReport, Record, RecordKind, failure_message, verify_page
from numbook.html.render import claim_index, element, rewrite, tex, to_html
from numbook.html.session import Session
from numbook.run.runner import CheckResult, Runner

__all__ = ["NumbookExtension", "check_formatter", "check_validator", "makeExtension", "extension_of", "report"]


class ClaimPreprocessor(Preprocessor):
    """Verifies the claims on the raw lines of the page, then renders the records."""

    def __init__(self, md: Markdown, ext: NumbookExtension) -> None:
        super().__init__(md)
        self.ext = ext

    def run(self, lines: list[str]) -> list[str]:
        ctx = self.ext.context(self.md)
        if ctx is None or getattr(self.md, "_original_md", None) is not None:
            return lines  # no page, or markdown-exec's inner conversion of already rendered text
        rep = verify_page("\n".join(lines), ctx)
        self.ext.session.reporter.report(rep.diagnostics)
        self.ext.session.records[ctx.path] = rep.records
        self.ext.session.claims[ctx.path] = rep.claims
        self.ext.last_report = rep
        self.math: list[tuple[str, Record]] = []
        out = rewrite(rep.text, rep.records, self.emit)
        if any(rec.kind == RecordKind.CLAIM for _, rec in self.math):
            out = out.rstrip("\n") + "\n\n" + self.md.htmlStash.store(claim_index(self.math)) + "\n\n"
        return out.split("\n")

    def emit(self, rec: Record) -> str:
        if rec.math:
            ident = f"nb-mc-{rec.row + 1}-{rec.start}"   # unique on the page: its line and column
            self.math.append((ident, rec))
            return tex(rec, ident if rec.kind == RecordKind.CLAIM else "")
        el = element(rec)
        if el is None:
            return ""
        placeholder = self.md.htmlStash.store(to_html(el))
        self.ext.stashed[len(self.md.htmlStash.rawHtmlBlocks) - 1] = rec
        return placeholder


REVEAL = {"Solution": "Show the solution", "Answer": "Show the answer"}


class RevealTreeprocessor(Treeprocessor):
    """On problem pages, put the body of Solution and Answer behind a reveal: try first, then look."""

    def __init__(self, md: Markdown, ext: NumbookExtension) -> None:
        super().__init__(md)
        self.ext = ext

    def run(self, root: etree.Element) -> None:
        ctx = self.ext.context(self.md)
        if ctx is None or not ctx.problem or getattr(self.md, "_original_md", None) is not None:
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


class NumbookExtension(Extension):
    """Claims and check fences. The page comes from the plugin's session, a ``context``, or the config."""

    def __init__(self, **kwargs: Any) -> None:
        self.config = {
            "session": ["", "The build's numbook.html.session.Session (set by the MkDocs plugin)."],
            "context": ["", "A numbook.core.verify.PageContext for the page being converted (programmatic use)."],
            "root": [".", "Project root (the folder holding checks/), when no plugin sets the page."],
            "checks_dir": ["checks", "Folder of the check scripts, relative to the root."],
            "cache_dir": [DEFAULT_CACHE_DIR, "Result cache, relative to the root ('' for none)."],
            "page_path": ["", "The page's path, for messages (no plugin)."],
            "check": ["", "The page's check, relative to checks_dir (no plugin)."],
            "line_offset": [0, "Lines of front matter before the Markdown (no plugin)."],
            "problem": [False, "Apply the problem-page rules (Given, sections, unbound numbers)."],
        }
        super().__init__(**kwargs)
        self.last_report: PageReport | None = None
        self.stashed: dict[int, Record] = {}
        session = self.getConfig("session")
        self.session: Session = session if isinstance(session, Session) else Session()
        if not isinstance(session, Session):
            self.session.default = self._configured_context()

    def _configured_context(self) -> PageContext | None:
        given = self.getConfig("context")
        if isinstance(given, PageContext):
            return given
        cfg = self.getConfigs()
        if not cfg["page_path"]:
            return None
        runner = Runner(Path(cfg["root"]), cfg["checks_dir"], cfg["cache_dir"] or None)
        problem = bool(cfg["problem"])
        return PageContext(cfg["page_path"], cfg["check"] or None, runner.result, root=runner.root,
                           line_offset=int(cfg["line_offset"]), problem=problem, scan_numbers=problem)

    def context(self, md: Markdown) -> PageContext | None:
        return self.session.context(md)

    def extendMarkdown(self, md: Markdown) -> None:  # noqa: N802 (Python-Markdown's API)
        md.registerExtension(self)
        # after normalize_whitespace (30), which strips the STX/ETX of stashed placeholders
        md.preprocessors.register(ClaimPreprocessor(md, self), "numbook_claims", 29)
        md.treeprocessors.register(RevealTreeprocessor(md, self), "numbook_reveal", 1)

    def reset(self) -> None:
        self.stashed = {}


def extension_of(md: Markdown) -> NumbookExtension | None:
    """The numbook extension registered on ``md``, if any."""
    return next((e for e in md.registeredExtensions if isinstance(e, NumbookExtension)), None)


def report(md: Markdown, line: int | None, message: str) -> None:
    """Report a fault found while converting ``md`` as ``path:line: message``, on the build's one road.

    ``line`` counts from the first line of the converted text; the page's front matter is added.
    """
    ext = extension_of(md)
    session = ext.session if ext is not None else Session()
    path = session.path_of(md)
    shown = line + session.offset_of(md) if line is not None else 0
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
    return to_html(pre) + to_html(_stamp(res))


def _run_yourself(session: Session, ctx: PageContext, res: CheckResult) -> str:
    """Links to the check as a script and as a notebook, written next to the page (numbook.run.standalone)."""
    if not (session.run_yourself and ctx.problem):
        return ""
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
    a2.tail = (", run for this build. Change a given() and run it again; it needs Python and the libraries it "
               "imports, not numbook.")
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
    ctx = ext.context(md) if ext is not None else None
    name = options.get("path") or (ctx.check if ctx else None)
    if ctx is None or not name:
        if ext is not None:
            report(md, None, "a ```check fence on a page with no check: add 'check:' to the front matter")
        return _failed("No check for this page.")
    res = ctx.results(name)
    if not res.ok:
        msg, _ = failure_message(res, name)
        return _failed(res.stderr.strip() or msg)
    path = (ctx.root or Path(".")) / res.check
    source = path.read_text(encoding="utf-8") if path.is_file() else ""
    output = _output(res)
    assert ext is not None
    cached = _fence_cache(ext.session, source, output + str(ext.session.run_yourself and ctx.problem))
    if cached is not None and cached.is_file():
        return ext.session.defer(cached.read_text(encoding="utf-8"))
    rendered = str(base_format(language="python", run=lambda *a, **k: output, code=source, md=md, html=True,
                               source="tabbed-right", tabs=(f"Source · {res.check}", "Output"),
                               update_toc=False))
    # the reader's search finds the prose, not the check's printed trace and source. A <section>: Material's
    # search parser ends an exclusion at the first closing tag of the same name, and the tabs are all <div>s
    links = _run_yourself(ext.session, ctx, res)
    rendered = f'<section class="nb-check" data-search-exclude="">{rendered}{links}</section>'
    if cached is not None:
        cached.parent.mkdir(parents=True, exist_ok=True)
        tmp = cached.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(rendered, encoding="utf-8")
        tmp.replace(cached)
    return ext.session.defer(rendered)


def _fence_cache(session: Session, source: str, output: str) -> Path | None:
    """Where the rendered fence for this source and output lives (highlighting a check costs ~50 ms)."""
    if session.html_cache is None:
        return None
    h = hashlib.sha256("\0".join(["fence-5", session.render_key, source, output]).encode("utf-8")).hexdigest()
    return session.html_cache / f"{h[:24]}.html"


def makeExtension(**kwargs: Any) -> NumbookExtension:  # noqa: N802 (Python-Markdown's API)
    return NumbookExtension(**kwargs)
