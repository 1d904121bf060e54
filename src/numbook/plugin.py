"""The MkDocs plugin: a thin layer over the runner and the Markdown extension.

It adds the pages of ``problems/`` to the site, runs every check once (in parallel) before
any page renders, tells the Markdown extension which page it is rendering, builds the
Problems navigation, writes the Draws on / Used by sections, and watches problems/ and
checks/ under ``mkdocs serve``. Every content fault is a warning under ``mkdocs.plugins``
with ``path:line``, so ``mkdocs build --strict`` fails on it.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from mkdocs.config import base
from mkdocs.config import config_options as c
from mkdocs.config.defaults import MkDocsConfig
from mkdocs.exceptions import PluginError
from mkdocs.plugins import BasePlugin
from mkdocs.structure.files import File, Files, InclusionLevel
from mkdocs.structure.nav import Navigation, Section
from mkdocs.structure.pages import Page

from .diagnostics import Diagnostic, log, report
from .markdown_ext import check_formatter, check_validator, set_page_context
from .page import ChapterMeta, ProblemMeta, read_meta, split_front_matter
from .runner import CheckResult, Runner
from .verify import PageContext

__all__ = ["NumbookPlugin", "NumbookConfig"]


class NumbookConfig(base.Config):
    """Options of the ``numbook`` plugin."""

    problems_dir = c.Dir(exists=True, default="problems")
    """Folder of the problem pages, relative to mkdocs.yml."""
    checks_dir = c.Dir(exists=True, default="checks")
    """Folder of the check scripts, relative to mkdocs.yml."""
    cache_dir = c.Type(str, default=".cache/numbook")
    """Result cache, relative to mkdocs.yml; empty for no cache."""
    timeout = c.Type((int, float), default=120)
    """Seconds a check may run before it is stopped (a check's header can override it)."""
    jobs = c.Type(int, default=0)
    """Checks run at once; 0 for one per CPU core."""
    execute = c.Type(bool, default=True)
    """Run the checks. Off, claims are not verified (for measuring the build's floor only)."""
    nav_title = c.Type(str, default="Problems")
    """Title of the generated navigation section of problems."""
    nav_after = c.Type(str, default="Lessons")
    """Insert that section after the nav item with this title (else at the end)."""


class _Entry:
    """One page the plugin knows the front matter of."""

    def __init__(self, file: File, meta: base.Config | None, fm_lines: dict[str, int], offset: int) -> None:
        self.file, self.meta, self.lines, self.offset = file, meta, fm_lines, offset


class NumbookPlugin(BasePlugin[NumbookConfig]):
    """Executable, verified problem pages."""

    supports_multiple_instances = False

    def __init__(self) -> None:
        self.runner: Runner | None = None
        self.entries: dict[str, _Entry] = {}      # src_uri -> entry
        self.problems: dict[str, _Entry] = {}     # problem ID -> entry
        self.chapters: dict[str, _Entry] = {}     # chapter ID -> entry
        self.results: dict[str, CheckResult] = {}
        self.claims: dict[str, int] = {}
        self.timings: dict[str, float] = {}

    # -- configuration -----------------------------------------------------------------------
    def on_config(self, config: MkDocsConfig) -> MkDocsConfig | None:
        root = Path(config.config_file_path or ".").resolve().parent
        self.root = root
        self.runner = Runner(root, os.path.relpath(self.config.checks_dir, root),
                             self.config.cache_dir or None, float(self.config.timeout), self.config.jobs,
                             self.config.execute)
        if "numbook" not in config.markdown_extensions:
            raise PluginError("the numbook plugin needs the 'numbook' Markdown extension in markdown_extensions")
        if "pymdownx.superfences" not in config.markdown_extensions:
            config.markdown_extensions.append("pymdownx.superfences")
        fences = config.mdx_configs.setdefault("pymdownx.superfences", {}).setdefault("custom_fences", [])
        if not any(f.get("name") == "check" for f in fences):
            fences.append({"name": "check", "class": "check", "validator": check_validator,
                           "format": check_formatter})
        return config

    # -- files and checks --------------------------------------------------------------------
    def on_files(self, files: Files, *, config: MkDocsConfig) -> Files:
        started = time.perf_counter()
        problems = Path(self.config.problems_dir)
        rel_dir = problems.relative_to(self.root).as_posix()
        for path in sorted(problems.rglob("*.md")):
            uri = f"{rel_dir}/{path.relative_to(problems).as_posix()}"
            files.append(File(uri, str(self.root), config.site_dir, config.use_directory_urls,
                              inclusion=InclusionLevel.NOT_IN_NAV))
        self.entries.clear()
        self.problems.clear()
        self.chapters.clear()
        diags: list[Diagnostic] = []
        for f in files.documentation_pages():
            raw = Path(f.abs_src_path or "").read_text(encoding="utf-8") if f.abs_src_path else ""
            fm = split_front_matter(raw, self._display(f))
            meta, errors = read_meta(fm, self._display(f))
            diags += errors
            entry = _Entry(f, meta, fm.lines, fm.offset)
            self.entries[f.src_uri] = entry
            if isinstance(meta, ProblemMeta):
                if meta.id in self.problems:
                    other = self._display(self.problems[meta.id].file)
                    diags.append(Diagnostic(self._display(f), fm.lines.get("id", 1),
                                            f"problem ID '{meta.id}' is also used by {other}"))
                self.problems[meta.id] = entry
            elif isinstance(meta, ChapterMeta):
                self.chapters[meta.chapter] = entry
        report(diags)
        checks = [e.meta.check for e in self.entries.values() if e.meta is not None and e.meta.get("check")]
        assert self.runner is not None
        self.results = self.runner.run_many(checks)
        self.timings["checks_s"] = time.perf_counter() - started
        return files

    def _display(self, f: File) -> str:
        """The path an author recognises: problems/x.md, or docs/x.md for docs pages."""
        if f.abs_src_path:
            try:
                return Path(f.abs_src_path).resolve().relative_to(self.root).as_posix()
            except ValueError:
                pass
        return f.src_uri

    # -- navigation --------------------------------------------------------------------------
    def on_nav(self, nav: Navigation, *, config: MkDocsConfig, files: Files) -> Navigation | None:
        if not self.problems and not self.chapters:
            return nav
        parts: dict[str, Section] = {}
        chapters: dict[str, Section] = {}
        for cid in sorted(set(self.chapters) | {pid.rsplit(".", 1)[0] for pid in self.problems}, key=_id_key):
            part = cid.split(".")[0]
            if part not in parts:
                parts[part] = Section(f"Part {part}", [])
            ch = self.chapters.get(cid)
            title = f"{cid} · {ch.meta.title}" if ch and ch.meta else f"Chapter {cid}"
            sec = Section(title, [])
            if ch and ch.file.page:
                ch.file.page.title = "Overview"
                sec.children.append(ch.file.page)
            chapters[cid] = sec
            parts[part].children.append(sec)
        for pid in sorted(self.problems, key=_id_key):
            entry = self.problems[pid]
            page = entry.file.page
            if page is None or entry.meta is None:
                continue
            page.title = f"{pid} · {entry.meta.title}"
            chapters[pid.rsplit(".", 1)[0]].children.append(page)
        top = Section(self.config.nav_title, list(parts.values()))
        titles = [getattr(item, "title", None) for item in nav.items]
        at = titles.index(self.config.nav_after) + 1 if self.config.nav_after in titles else len(nav.items)
        nav.items.insert(at, top)
        _relink(nav)
        return nav

    # -- pages -------------------------------------------------------------------------------
    def on_page_markdown(self, markdown: str, *, page: Page, config: MkDocsConfig, files: Files) -> str | None:
        entry = self.entries.get(page.file.src_uri)
        if entry is None or entry.meta is None:
            set_page_context(None)
            return markdown
        meta = entry.meta
        path = self._display(page.file)
        raw = Path(page.file.abs_src_path or "").read_text(encoding="utf-8")
        offset = raw.count("\n") - markdown.count("\n")
        problem = isinstance(meta, ProblemMeta)
        assert self.runner is not None
        ctx = PageContext(path, meta.get("check"), self._result, line_offset=offset,
                          check_line=entry.lines.get("check", 1), problem=problem)
        if problem:
            head, markdown = self._problem_frame(markdown, meta, entry, path)
            ctx.line_offset -= head  # the lines the frame put before the body
        set_page_context(ctx)
        return markdown

    def _result(self, check: str) -> CheckResult:
        assert self.runner is not None
        res = self.results.get(check) or self.runner.result(check)
        self.results[check] = res
        return res

    def _problem_frame(self, markdown: str, meta: base.Config, entry: _Entry, path: str) -> tuple[int, str]:
        """The H1 and precision line before the body, Draws on and Used by after it."""
        head = f"# {meta.id} · {meta.title}\n\n"
        if meta.precision:
            head += f'<p class="nb-precision">{meta.precision}</p>\n\n'
        tail = ["", "## Draws on", ""]
        for target in meta.draws_on:
            other = self.problems.get(target)
            if other is None or other.meta is None:
                report([Diagnostic(path, entry.lines.get("draws_on", 1),
                                   f"draws on '{target}', which is no problem in this book")])
                continue
            tail.append(f"- [{target} · {other.meta.title}]({_rel(entry.file, other.file)})")
        if not meta.draws_on:
            tail.append("Nothing earlier in the book: this problem starts from first principles.")
        users = sorted((pid for pid, e in self.problems.items() if e.meta and meta.id in e.meta.draws_on),
                       key=_id_key)
        if users:
            tail += ["", "## Used by", ""]
            tail += [f"- [{u} · {self.problems[u].meta.title}]({_rel(entry.file, self.problems[u].file)})"
                     for u in users]
        return head.count("\n"), head + markdown + "\n".join(tail) + "\n"

    def on_page_content(self, html: str, *, page: Page, config: MkDocsConfig, files: Files) -> str | None:
        set_page_context(None)
        return html

    def on_serve(self, server: Any, *, config: MkDocsConfig, builder: Any) -> Any:
        server.watch(str(self.config.problems_dir))
        server.watch(str(self.config.checks_dir))
        return server

    def on_post_build(self, *, config: MkDocsConfig) -> None:
        ran = [r for r in self.results.values() if r.ok and not r.cached and not r.frozen]
        log.info(f"numbook: {len(self.results)} checks ({len(ran)} ran, "
                 f"{sum(r.cached for r in self.results.values())} from cache) in {self.timings.get('checks_s', 0):.2f} s")


def _id_key(pid: str) -> tuple[Any, ...]:
    roman = {"I": 1, "II": 2, "III": 3, "IV": 4, "V": 5, "VI": 6, "VII": 7, "VIII": 8, "IX": 9, "X": 10}
    parts = pid.split(".")
    key: list[Any] = [roman.get(parts[0], 99)]
    for p in parts[1:]:
        key.append((0, int(p)) if p.isdigit() else (1, p))
    return tuple(key)


def _rel(src: File, dst: File) -> str:
    return os.path.relpath(dst.src_uri, os.path.dirname(src.src_uri) or ".").replace(os.sep, "/")


def _relink(nav: Navigation) -> None:
    """Recompute the page order, parents and previous/next links after inserting sections."""
    pages: list[Page] = []

    def walk(items: list[Any], parent: Section | None) -> None:
        for item in items:
            item.parent = parent
            if isinstance(item, Page):
                pages.append(item)
            elif isinstance(item, Section):
                walk(item.children, item)

    walk(nav.items, None)
    for i, page in enumerate(pages):
        page.previous_page = pages[i - 1] if i else None
        page.next_page = pages[i + 1] if i + 1 < len(pages) else None
    nav.pages = pages
