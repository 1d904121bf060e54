"""The MkDocs plugin: a thin layer over the runner, the book's verification pass and the Markdown extension.

It adds the pages of ``problems/`` to the site, runs every check once (in parallel) and verifies
every page once (``numbook.core.bookpass``, as ``numbook verify`` does) before any page renders,
and hands the Markdown extension each page it converts, with the page's report and its frame
(``numbook.html.session``). It builds the Problems navigation (``numbook.mkdocs.nav``), writes the
ledger and the run report from the same reports, and watches problems/ and checks/ under
``mkdocs serve`` (``numbook.mkdocs.serve``), where a dirty rebuild also rebuilds the pages whose
checks have new results. Every content fault is a warning under ``mkdocs.plugins`` with
``path:line``, so ``mkdocs build --strict`` fails on it.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import time
import xml.etree.ElementTree as etree
from pathlib import Path
from typing import Any

import jinja2
from mkdocs.config.defaults import MkDocsConfig
from mkdocs.exceptions import PluginError
from mkdocs.plugins import BasePlugin, CombinedEvent, event_priority
from mkdocs.structure.files import File, Files, InclusionLevel
from mkdocs.structure.nav import Navigation
from mkdocs.structure.pages import Page

import numbook.run.standalone as standalone
from numbook import __version__
from numbook.core.book import Book
from numbook.core.bookpass import BuildResults, page_context, read_changed, verify_book
from numbook.core.diagnostics import Diagnostic, Reporter, log
from numbook.core.ledger import build_ledger, write_ledger
from numbook.core.lint import label_faults, orphan_faults, structure_faults
from numbook.core.result import Source
from numbook.core.verify import PageReport
from numbook.html.extension import check_formatter, check_validator
from numbook.html.frame import frame_of
from numbook.html.mathrender import MathError, MathRenderer, NodeMissing, render_page
from numbook.html.render import to_html
from numbook.html.session import Session, SessionPage
from numbook.mkdocs.config import EXTENSION_MISSING, NumbookConfig, memory_option
from numbook.mkdocs.nav import add_problems
from numbook.mkdocs.runreport import report_markdown
from numbook.mkdocs.searchview import search_view
from numbook.mkdocs.serve import TEMPLATES, remember_listings, watch_sooner
from numbook.run.frozen import changed_reads
from numbook.run.perturb import load_report, report_path, stale
from numbook.run.runner import CACHED_ONLY_ENV, CheckResult, Runner

__all__ = ["NumbookPlugin", "NumbookConfig"]



class NumbookPlugin(BasePlugin[NumbookConfig]):
    """Executable, verified problem pages."""

    supports_multiple_instances = False

    def __init__(self) -> None:
        self.runner: Runner | None = None
        self.book = Book(Path("."))
        self.results: BuildResults   # the build's results, by the name a page gives a check (on_config)
        self.reports: dict[str, PageReport] = {}   # site path -> the page's report from the book's pass
        self.timings: dict[str, float] = {}
        self._shown: str | None = None   # a page's HTML while the search plugin reads its search view
        self.serving = False
        self.dirty = False
        self.session = Session()
        # the plugin object outlives a rebuild under `mkdocs serve` (it has on_startup): the reports and results
        # the pages were last built with, so a rebuild verifies again only the pages whose text or results
        # changed, and a dirty rebuild rebuilds those pages and the run report
        self.built: dict[str, PageReport] = {}
        self.built_with: dict[str, CheckResult] = {}
        # math is drawn at build time, by one MathJax process under Node for the build (and every rebuild)
        self.math = MathRenderer()
        self.math_s = 0.0

    # -- configuration -----------------------------------------------------------------------
    def on_startup(self, *, command: str, dirty: bool) -> None:
        self.serving = command == "serve"
        self.dirty = dirty

    def on_config(self, config: MkDocsConfig) -> MkDocsConfig | None:
        # serve shows a page's faults on the page and keeps serving; a build fails on them
        reporter = Reporter(level=logging.INFO if self.serving else logging.WARNING)
        cfg_file = Path(config.config_file_path or "")
        self.render_key = hashlib.sha256(
            (cfg_file.read_bytes() if cfg_file.is_file() else b"") + __version__.encode()).hexdigest()[:16]
        root = Path(config.config_file_path or ".").resolve().parent
        if getattr(self, "root", root) != root:
            self.built, self.built_with = {}, {}   # another book in the same process: nothing was built here
        self.root = root
        self.runner = Runner(root, os.path.relpath(self.config.checks_dir, root),
                             self.config.cache_dir or None, float(self.config.timeout), self.config.jobs,
                             self.config.execute, memory=memory_option(self.config.memory))
        self.results = BuildResults(self.runner, {})
        if "numbook" not in config.markdown_extensions:
            raise PluginError(EXTENSION_MISSING)
        cache = self.runner.cache_dir / "html" if self.runner.cache_dir is not None else None
        self.math.cache_dir = self.runner.cache_dir / "math" if self.runner.cache_dir is not None else None
        self.math_s = 0.0
        self.session = Session(reporter, html_cache=cache, render_key=self.render_key,
                               run_yourself=self.config.run_yourself)
        config.mdx_configs.setdefault("numbook", {})["session"] = self.session
        if "pymdownx.superfences" not in config.markdown_extensions:
            config.markdown_extensions.append("pymdownx.superfences")
        if "pymdownx.details" not in config.markdown_extensions:
            config.markdown_extensions.append("pymdownx.details")   # the run report folds each check
        if self.serving:   # MkDocs lists the theme's files right after making its environment, before any event
            made, book_root = config.theme.get_env, root

            def get_env() -> jinja2.Environment:
                env = made()
                remember_listings(env, book_root)
                return env

            config.theme.get_env = get_env  # type: ignore[method-assign]
        fences = config.mdx_configs.setdefault("pymdownx.superfences", {}).setdefault("custom_fences", [])
        if not any(f.get("name") == "check" for f in fences):
            fences.append({"name": "check", "class": "check", "validator": check_validator,
                           "format": check_formatter})
        return config

    # -- files and checks --------------------------------------------------------------------
    def on_files(self, files: Files, *, config: MkDocsConfig) -> Files:
        started = time.perf_counter()
        problems = Path(self.config.problems_dir)
        for path in sorted(problems.rglob("*.md")):
            uri = f"{problems.name}/{path.relative_to(problems).as_posix()}"
            files.append(File(uri, str(problems.parent), config.site_dir, config.use_directory_urls,
                              inclusion=InclusionLevel.NOT_IN_NAV))
        self.book = Book(self.root)
        for f in files.documentation_pages():
            if f.abs_src_path:
                self.book.add(f.src_uri, Path(f.abs_src_path))
        assert self.runner is not None
        # every structural fault numbook verify finds fails the build too: one rule set, lint's
        self.session.reporter.report(structure_faults(self.book, problems.name))
        self.results = BuildResults(self.runner, self.runner.run_many(self.book.checks(), progress=_progress))
        self.timings["checks_s"] = time.perf_counter() - started
        # every page verified once, as numbook verify does; under serve, a page whose text and results are those
        # it was last built with keeps its report
        self.reports = verify_book(self.book, self.results, self.built)
        self.session.results = self.results
        self.session.book = self.book
        self.session.reporter.report([d for rep in self.reports.values() for d in rep.diagnostics])
        self.timings["pages_s"] = time.perf_counter() - started - self.timings["checks_s"]
        if self.config.report and files.get_file_from_path(self.config.report) is None:
            files.append(File.generated(config, self.config.report, content="# Run report\n",
                                        inclusion=InclusionLevel.NOT_IN_NAV))
        if self.dirty:
            self._rebuild_dependents(files)
        return files

    def _rebuild_dependents(self, files: Files) -> None:
        """``mkdocs serve --dirty`` rebuilds the pages whose source changed; a page is rebuilt too where a check its
        report read (its own, one its markers or fences name) has another result than when the page was last
        built: one that ran again, and one served from the cache (a failure shows its fault box, a fixed check
        clears it). The run report is rebuilt when any check's result is another."""
        ran = {name for name, res in self.results.by_name.items() if self.built_with.get(name) != res}
        report = files.get_file_from_path(self.config.report) if self.config.report else None
        if report is not None and report.generated_by == "numbook":   # generated, so always "modified":
            dest = report.abs_dest_path   # rebuilt when a check ran, or when it was never written
            report.is_modified = lambda: bool(ran) or not os.path.isfile(dest)  # type: ignore[method-assign]
        for f in files.documentation_pages():
            built, now = self.built.get(f.src_uri), self.reports.get(f.src_uri)
            if now is not None and now.read and (built is None or read_changed(built, self.results)):
                f.is_modified = lambda: True  # type: ignore[method-assign]

    def _report_page(self, files: Files) -> Page | None:
        f = files.get_file_from_path(self.config.report) if self.config.report else None
        return f.page if f is not None and f.generated_by == "numbook" else None

    def on_env(self, env: jinja2.Environment, *, config: MkDocsConfig, files: Files) -> jinja2.Environment | None:
        # mkdocs serve makes a new theme environment for every rebuild, which compiles the theme's templates
        # again (a third of an edit's rebuild here): keep what they compiled to for the next rebuild
        if env.bytecode_cache is None:
            env.bytecode_cache = TEMPLATES
        return env

    def on_nav(self, nav: Navigation, *, config: MkDocsConfig, files: Files) -> Navigation | None:
        add_problems(nav, self.book, files, title=self.config.nav_title, after=self.config.nav_after,
                     report=self._report_page(files))
        return nav

    # -- pages -------------------------------------------------------------------------------
    def on_page_markdown(self, markdown: str, *, page: Page, config: MkDocsConfig, files: Files) -> str | None:
        uri = page.file.src_uri
        if page is self._report_page(files):
            self.session.page = None
            page.meta["hide"] = ["toc"]  # a wide table: give it the room of the table of contents
            assert self.runner is not None
            record = load_report(report_path(self.runner.checks_dir))
            runner = self.runner
            changed = stale(record, lambda reads: changed_reads(reads, runner.root, runner.file_hash)) if record else {}
            return report_markdown(self.book, self.reports, self.results, uri, perturbed=record, stale=changed)
        entry = self.book.entries.get(uri)
        if entry is None:
            self.session.page = None
            return markdown
        # the page MkDocs converts next, as the Markdown extension reads it: its context, its report, its frame
        self.session.page = SessionPage(page_context(entry, self.root), self.reports.get(uri),
                                        frame_of(self.book, entry, markdown), verify=not entry.failed, uri=uri)
        if entry.failed:
            return markdown  # a page whose front matter failed: that one fault, not one per claim below it
        if getattr(entry.meta, "lesson", None) and "/// lesson-nav" in markdown:
            # the lesson's own navigation names previous and next: the theme's footer would say it twice
            page.meta["hide"] = [*page.meta.get("hide", []), "footer"]
        if entry.problem:
            page.meta["title"] = f"{entry.pmeta.id} · {entry.pmeta.title}"   # the browser tab shows the ID
        return markdown

    def on_page_content(self, html: str, *, page: Page, config: MkDocsConfig, files: Files) -> str | None:
        self.session.page = None   # converted: a conversion from here on is of no page of the book
        entry = self.book.entries.get(page.file.src_uri)
        if not self.serving or entry is None:
            return html
        faults = self.session.reporter.for_path(entry.path)
        return (to_html(_fault_banner(faults)) + html) if faults else html

    @event_priority(100)   # before the search plugin indexes the page ...
    def _search_view_in(self, context: Any, *, page: Page, config: MkDocsConfig, nav: Navigation) -> Any:
        self._shown = page.content
        if page.content is not None:
            entry = self.book.entries.get(page.file.src_uri)
            page.content = search_view(page.content, report=page.file.src_uri == self.config.report
                                       and page.file.generated_by == "numbook",
                                       problem=entry is not None and entry.problem and not entry.failed)
        return context

    @event_priority(-100)  # ... and the page itself back, after it (numbook.mkdocs.searchview)
    def _search_view_out(self, context: Any, *, page: Page, config: MkDocsConfig, nav: Navigation) -> Any:
        shown, self._shown = self._shown, None
        if shown is not None:
            page.content = re.sub(r'\s?data-search-\w+="[^"]+"', "", shown)   # as the search plugin leaves a page
        return context

    on_page_context = CombinedEvent(_search_view_in, _search_view_out)

    def on_post_page(self, output: str, *, page: Page, config: MkDocsConfig) -> str | None:
        """Every equation of the page drawn as SVG (``numbook.html.mathrender``): math that reads without scripts."""
        started = time.perf_counter()
        try:
            out, _ = render_page(output, self.math)
        except NodeMissing as exc:
            raise PluginError(str(exc)) from None
        except MathError as exc:
            src = Path(page.file.abs_src_path) if page.file.abs_src_path else None
            path = os.path.relpath(src, self.root) if src is not None else page.file.src_uri
            self.session.reporter.report([Diagnostic(path, _line_of(src, exc.tex), str(exc))])
            return output
        finally:
            self.math_s += time.perf_counter() - started
        return out

    def on_shutdown(self) -> None:
        self.math.close()

    def on_serve(self, server: Any, *, config: MkDocsConfig, builder: Any) -> Any:
        server.watch(str(self.config.problems_dir))
        server.watch(str(self.config.checks_dir))
        watch_sooner(server)
        return server

    def on_post_build(self, *, config: MkDocsConfig) -> None:
        assert self.runner is not None
        self.built, self.built_with = self.reports, dict(self.results.by_name)
        self.session.reporter.report(orphan_faults(self.book, self.runner.checks_dir)
                                     + label_faults(self.book, self.runner.checks_dir))
        if self.config.run_yourself and self.config.execute:
            self.session.reporter.report(_run_yourself(self.book, self.results, self.runner, config,
                                                       int(self.config.timeout)))
        faults = self.session.reporter.faults
        if faults and config.strict and not self.serving and not log.isEnabledFor(logging.WARNING):
            # --quiet hides warnings from --strict's counter; a wrong number must still fail the build
            raise PluginError(f"{len(faults)} faults in checks and claims; the first: {faults[0]}")
        if self.config.ledger and self.reports and not self.dirty:   # not on each edit under serve (0.1 s)
            write_ledger(Path(config.site_dir) / self.config.ledger, build_ledger(self.reports.values()))
        _search_stats(Path(config.site_dir))
        unique = self.results.unique()   # one check may be named two ways
        ran = [r for r in unique if r.ok and r.source is Source.RAN]
        cached = sum(r.source is Source.CACHE for r in unique)
        log.info(f"numbook: {len(unique)} checks ({len(ran)} ran, {cached} from cache) "
                 f"in {self.timings.get('checks_s', 0):.2f} s; {len(self.reports)} pages verified "
                 f"in {self.timings.get('pages_s', 0):.2f} s; math drawn in {self.math_s:.2f} s")


def _run_yourself(book: Book, results: BuildResults, runner: Runner, config: MkDocsConfig,
                  timeout: int) -> list[Diagnostic]:
    """Write each problem's check as a script and an executed notebook next to its page."""
    site_url = standalone.public_url(config.site_url or "").rstrip("/")   # never a local default (127.0.0.1)
    jobs: list[standalone.Job] = []
    for _, entry in sorted(book.problems.items()):
        if not entry.check:
            continue
        res = results.result(entry.check)
        if not res.ok or res.source is Source.FROZEN:
            continue   # a failed check is already a fault; a GPU check cannot run on a reader's CPU
        page = File(entry.uri, "", "", config.use_directory_urls)
        jobs.append(standalone.Job(entry.path, entry.lines.get("check", 1), entry.pmeta.id, entry.pmeta.title,
                                   runner.root / res.check, Path(config.site_dir) / Path(page.dest_uri).parent,
                                   f"{site_url}/{page.url}" if site_url else "", res))
    may_run = not os.environ.get(CACHED_ONLY_ENV)
    if not may_run:
        log.info(f"numbook: notebooks not in the cache are written without outputs ({CACHED_ONLY_ENV})")
    started = time.perf_counter()
    # each notebook runs in its check's sandbox, and must print what its check printed for the page
    found, offered = standalone.offer_all(jobs, runner, run=may_run, timeout=timeout)
    spent = [o.spent for o in offered]
    log.info(f"numbook: {len(jobs)} problems offered as a script and a notebook "
             f"in {time.perf_counter() - started:.2f} s ({sum(x > 0 for x in spent)} notebooks ran, "
             f"{sum(spent):.2f} s of notebook run time)")
    return found


def _search_stats(site: Path) -> None:
    """What the search index holds, in the build's log (the search plugin writes it first: it is listed first)."""
    index = site / "search" / "search_index.json"
    if not index.is_file():
        return
    raw = index.read_text(encoding="utf-8")
    docs = json.loads(raw).get("docs", [])
    tex = sum("\\" in d.get("text", "") for d in docs)
    log.info(f"numbook: search index {len(raw) / 1e3:.0f} kB, {len(docs)} entries, {tex} with a backslash")

def _line_of(src: Path | None, tex: str) -> int:
    """The first line of the page's source that holds the start of an equation's TeX (1 when none does)."""
    if src is None or not src.is_file():
        return 1
    probe = tex.strip()[:24]
    for n, line in enumerate(src.read_text(encoding="utf-8").splitlines(), 1):
        if probe and probe in line:
            return n
    return 1


def _progress(done: int, total: int, res: CheckResult, running: list[str]) -> None:
    """One line per finished check while the build waits for them: no minutes of silence. A result from the cache
    kept no one waiting and gets none (a thousand of them would be a thousand lines on every rebuild under serve);
    the build's summary counts them."""
    how = res.source
    if how is Source.CACHE and res.ok:
        return
    still = f" · still running: {', '.join(running[:3])}{' …' if len(running) > 3 else ''}" if running else ""
    log.info(f"numbook: [{done}/{total}] {res.check} {res.status} {res.elapsed_s:.1f} s ({how}){still}")


def _fault_banner(faults: list[Diagnostic]) -> etree.Element:
    """Under ``mkdocs serve``: the faults of this page, on the page, until the next good edit."""
    div = etree.Element("div", {"class": "admonition failure nb-faults", "role": "alert"})
    title = etree.SubElement(div, "p", {"class": "admonition-title"})
    title.text = f"{len(faults)} fault(s) on this page: a build would fail"
    ul = etree.SubElement(div, "ul")
    for d in faults:
        li = etree.SubElement(ul, "li")
        code = etree.SubElement(li, "code")
        code.text = f"{d.path}:{d.line}"
        code.tail = " " + d.message
    return div
