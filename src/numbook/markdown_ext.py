"""The Python-Markdown side of the book: claims in the prose and the ``check`` fence.

    markdown_extensions:
      - numbook            # claims: [[262.1|fp32_mb]], [[sanity:name]], [[2024|free]]
      - pymdownx.superfences:
          custom_fences:
            - {name: check, class: check, validator: !!python/name:numbook.markdown_ext.check_validator,
               format: !!python/name:numbook.markdown_ext.check_formatter}

The MkDocs plugin adds the ``check`` fence itself and tells the extension, page by page,
which file it is rendering (``page_context``). Without the plugin, the extension's own
config names the page, its check and the project root.
"""

from __future__ import annotations

import contextvars
import hashlib
import html
import os
import xml.etree.ElementTree as etree
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from markdown import Markdown
from markdown.extensions import Extension
from markdown.preprocessors import Preprocessor
from markdown.treeprocessors import Treeprocessor
from markdown_exec import base_format

from .diagnostics import log, report
from .runner import CheckResult, Runner
from .verify import PageContext, PageReport, failure_message, verify_page

__all__ = ["NumbookExtension", "page_context", "current_page", "check_formatter", "check_validator", "makeExtension"]

_current: contextvars.ContextVar[PageContext | None] = contextvars.ContextVar("numbook_page", default=None)
_runners: dict[tuple[str, str, str], Runner] = {}


@contextmanager
def page_context(ctx: PageContext) -> Iterator[None]:
    """Tell the extension which page the next conversions belong to."""
    token = _current.set(ctx)
    try:
        yield
    finally:
        _current.reset(token)


def current_page() -> PageContext | None:
    """The page being rendered, as the plugin (or ``page_context``) set it; None outside a page."""
    return _current.get()


def set_page_context(ctx: PageContext | None) -> None:
    """Set (or clear) the page context without a ``with`` block (for plugin hooks)."""
    _current.set(ctx)


def _runner(root: str, checks: str, cache: str) -> Runner:
    key = (str(Path(root).resolve()), checks, cache)
    if key not in _runners:
        _runners[key] = Runner(Path(root), checks, cache or None)
    return _runners[key]


class ClaimPreprocessor(Preprocessor):
    """Binds, verifies and renders claims on the raw lines of the page."""

    def __init__(self, md: Markdown, ext: NumbookExtension) -> None:
        super().__init__(md)
        self.ext = ext

    def run(self, lines: list[str]) -> list[str]:
        ctx = self.ext.context()
        if ctx is None or getattr(self.md, "_original_md", None) is not None:
            return lines  # no page, or markdown-exec's inner conversion of already rendered text
        rep = verify_page("\n".join(lines), ctx)
        report(rep.diagnostics)
        self.ext.last_report = rep
        return rep.text.split("\n")


REVEAL = {"Solution": "Show the solution", "Answer": "Show the answer"}


class RevealTreeprocessor(Treeprocessor):
    """On problem pages, put the body of Solution and Answer behind a reveal: try first, then look."""

    def __init__(self, md: Markdown, ext: NumbookExtension) -> None:
        super().__init__(md)
        self.ext = ext

    def run(self, root: etree.Element) -> None:
        ctx = self.ext.context()
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
                    summary.text = REVEAL[title]
                    for child in body:
                        root.remove(child)
                        details.append(child)
                    root.insert(list(root).index(el) + 1, details)
                children = list(root)
                i = children.index(el) + 2
                continue
            i += 1


class NumbookExtension(Extension):
    """Claims and check fences. Config applies only where no MkDocs plugin sets the page."""

    def __init__(self, **kwargs: Any) -> None:
        self.config = {
            "root": [".", "Project root (the folder holding checks/)."],
            "checks_dir": ["checks", "Folder of the check scripts, relative to the root."],
            "cache_dir": [".cache/numbook", "Result cache, relative to the root ('' for none)."],
            "page_path": ["", "The page's path, for messages (no plugin)."],
            "check": ["", "The page's check, relative to checks_dir (no plugin)."],
            "line_offset": [0, "Lines of front matter before the Markdown (no plugin)."],
            "problem": [False, "Apply the problem-page rules (Given, sections, unbound numbers)."],
        }
        super().__init__(**kwargs)
        self.last_report: PageReport | None = None

    def context(self) -> PageContext | None:
        ctx = _current.get()
        if ctx is not None:
            return ctx
        cfg = self.getConfigs()
        if not cfg["page_path"]:
            return None
        runner = _runner(cfg["root"], cfg["checks_dir"], cfg["cache_dir"])
        return PageContext(cfg["page_path"], cfg["check"] or None, runner.result, root=runner.root,
                           line_offset=int(cfg["line_offset"]), problem=bool(cfg["problem"]))

    def extendMarkdown(self, md: Markdown) -> None:  # noqa: N802 (Python-Markdown's API)
        md.registerExtension(self)
        md.preprocessors.register(ClaimPreprocessor(md, self), "numbook_claims", 40)
        md.treeprocessors.register(RevealTreeprocessor(md, self), "numbook_reveal", 1)


def check_validator(language: str, inputs: dict[str, str], options: dict[str, Any], attrs: dict[str, Any],
                    md: Markdown) -> bool:
    """Accept ```` ```check ```` and ```` ```check path="other.py" ````."""
    options["path"] = inputs.pop("path", "")
    return not inputs or all(k in ("title",) for k in inputs)


_FROZEN_TITLE = ("Measured on the GPU named here, with that driver and those versions, on that date, from the "
                 "check source with that hash. This build has no usable GPU and did not run the check.")


def _stamp_html(res: CheckResult) -> str:
    label = "Frozen GPU result" if res.frozen else "Executed"
    if res.frozen:  # measured on a GPU by an earlier run and committed: never shown as this build's run
        return (f'<p class="nb-stamp nb-stamp-frozen" title="{_FROZEN_TITLE}"><span class="nb-stamp-label">'
                f"{label}</span> {html.escape(res.stamp())}</p>")
    return (f'<p class="nb-stamp"><span class="nb-stamp-label">{label}</span> '
            f"{html.escape(res.stamp())}</p>")


def check_formatter(src: str, language: str, css_class: str, options: dict[str, Any], md: Markdown,
                    **kwargs: Any) -> str:
    """Show a check's source and the output it printed for this build, with its stamp."""
    ctx = _current.get()
    ext = next((e for e in md.registeredExtensions if isinstance(e, NumbookExtension)), None)
    if ctx is None and ext is not None:
        ctx = ext.context()
    name = options.get("path") or (ctx.check if ctx else None)
    where = f"{ctx.path}:{ctx.check_line}" if ctx else "<page>"
    if ctx is None or not name:
        log.warning(f"{where}: a ```check fence on a page with no check: add 'check:' to the front matter")
        return '<div class="admonition failure"><p>No check for this page.</p></div>'
    res = ctx.results(name)
    if not res.ok:
        msg, _ = failure_message(res, name)
        body = html.escape(res.stderr.strip() or msg)
        return (f'<div class="admonition failure nb-check-failed"><p class="admonition-title">'
                f"The check did not produce a result</p><pre><code>{body}</code></pre></div>")
    path = (ctx.root or Path(".")) / res.check
    source = path.read_text(encoding="utf-8") if path.is_file() else ""
    output = (f'<pre class="nb-output"><code>{html.escape(res.stdout.rstrip())}</code></pre>'
              f"{_stamp_html(res)}")
    cached = _fence_cache(ctx, source, output)
    if cached is not None and cached.is_file():
        return cached.read_text(encoding="utf-8")
    rendered = str(base_format(language="python", run=lambda *a, **k: output, code=source, md=md, html=True,
                               source="tabbed-right", tabs=(f"Source · {res.check}", "Output"),
                               update_toc=False))
    if cached is not None:
        cached.parent.mkdir(parents=True, exist_ok=True)
        tmp = cached.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(rendered, encoding="utf-8")
        tmp.replace(cached)
    return rendered


def _fence_cache(ctx: PageContext, source: str, output: str) -> Path | None:
    """Where the rendered fence for this source and output lives (highlighting a check costs ~50 ms)."""
    if ctx.html_cache is None:
        return None
    h = hashlib.sha256("\0".join(["fence-1", ctx.render_key, source, output]).encode("utf-8")).hexdigest()
    return ctx.html_cache / f"{h[:24]}.html"


def makeExtension(**kwargs: Any) -> NumbookExtension:  # noqa: N802 (Python-Markdown's API)
    return NumbookExtension(**kwargs)
