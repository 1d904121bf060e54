"""The MkDocs plugin: a thin layer over the runner and the Markdown extension.

It adds the pages of ``problems/`` to the site, runs every check once (in parallel) before
any page renders, tells the Markdown extension which page it is rendering, builds the
Problems navigation, writes the Draws on / Used by sections, and watches problems/ and
checks/ under ``mkdocs serve``. Every content fault is a warning under ``mkdocs.plugins``
with ``path:line``, so ``mkdocs build --strict`` fails on it.
"""

from __future__ import annotations

import hashlib
import logging
import os
import time
import xml.etree.ElementTree as etree
from pathlib import Path
from typing import Any

import jinja2
from mkdocs.config.defaults import MkDocsConfig
from mkdocs.exceptions import PluginError
from mkdocs.plugins import BasePlugin
from mkdocs.structure.files import File, Files, InclusionLevel
from mkdocs.structure.nav import Navigation, Section
from mkdocs.structure.pages import Page

import numbook.run.standalone as standalone
from numbook import __version__
from numbook.core.book import Book, Entry, id_key
from numbook.core.diagnostics import Diagnostic, Reporter, log
from numbook.core.ledger import build_ledger, write_ledger
from numbook.core.lint import label_faults, orphan_faults, structure_faults
from numbook.core.page import ChapterMeta, read_fields
from numbook.core.result import Source
from numbook.core.verify import PageContext
from numbook.html.extension import check_formatter, check_validator
from numbook.html.render import to_html
from numbook.html.session import Session
from numbook.mkdocs.config import EXTENSION_MISSING, NumbookConfig, memory_option
from numbook.mkdocs.runreport import report_markdown
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
        self.results: dict[str, CheckResult] = {}
        self.claims: dict[str, int] = {}
        self.timings: dict[str, float] = {}
        self.serving = False
        self.dirty = False
        self.session = Session()
        # the plugin object outlives a rebuild under `mkdocs serve` (it has on_startup): what each check's
        # result was when the pages were last built, so a dirty rebuild knows whose numbers or faults changed
        self.built_with: dict[str, tuple[Any, ...]] = {}

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
            self.built_with = {}   # another book in the same process: nothing was built with these results
        self.root = root
        self.runner = Runner(root, os.path.relpath(self.config.checks_dir, root),
                             self.config.cache_dir or None, float(self.config.timeout), self.config.jobs,
                             self.config.execute, memory=memory_option(self.config.memory))
        if "numbook" not in config.markdown_extensions:
            raise PluginError(EXTENSION_MISSING)
        cache = self.runner.cache_dir / "html" if self.runner.cache_dir is not None else None
        # a check's fence (its source and output: a fifth of the site's HTML, none of it searched) is put
        # into the page after Material's search plugin has parsed the page (on_post_page)
        self.session = Session(reporter, html_cache=cache, render_key=self.render_key,
                               run_yourself=self.config.run_yourself, defer_fences=True)
        config.mdx_configs.setdefault("numbook", {})["session"] = self.session
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
        self.results = self.runner.run_many(self.book.checks(), progress=_progress)
        self.timings["checks_s"] = time.perf_counter() - started
        if self.config.report and files.get_file_from_path(self.config.report) is None:
            files.append(File.generated(config, self.config.report, content="# Run report\n",
                                        inclusion=InclusionLevel.NOT_IN_NAV))
        if self.dirty:
            self._rebuild_dependents(files)
        return files

    def _rebuild_dependents(self, files: Files) -> None:
        """``mkdocs serve --dirty`` rebuilds the pages whose source changed; a page whose check (or a check it
        binds claims to) has another result than when the page was last built is rebuilt too: one that ran
        again, and one served from the cache (a failure shows its fault box, a fixed check clears it)."""
        for name in self.built_with:   # a check the pages named only in claims ([[…|other:x]]) is compared too
            self._result(name)
        ran = {name for name, res in self.results.items() if self.built_with.get(name) != _identity(res)}
        report = files.get_file_from_path(self.config.report) if self.config.report else None
        if report is not None and report.generated_by == "numbook":   # generated, so always "modified":
            dest = report.abs_dest_path   # rebuilt when a check ran, or when it was never written
            report.is_modified = lambda: bool(ran) or not os.path.isfile(dest)  # type: ignore[method-assign]
        if not ran:
            return
        stems = {Path(name).stem for name in ran}
        for f in files.documentation_pages():
            entry = self.book.entries.get(f.src_uri)
            if entry is None:
                continue
            uses = (entry.check in ran) or any(f"|{s}:" in entry.body or f"|{s}.py:" in entry.body
                                               or f"sanity:{s}:" in entry.body for s in stems)
            if uses:
                f.is_modified = lambda: True  # type: ignore[method-assign]

    def _report_page(self, files: Files) -> Page | None:
        f = files.get_file_from_path(self.config.report) if self.config.report else None
        return f.page if f is not None and f.generated_by == "numbook" else None

    def on_env(self, env: jinja2.Environment, *, config: MkDocsConfig, files: Files) -> jinja2.Environment | None:
        # mkdocs serve makes a new theme environment for every rebuild, which compiles the theme's templates
        # again (a third of an edit's rebuild here): keep what they compiled to for the next rebuild
        if env.bytecode_cache is None:
            env.bytecode_cache = _TEMPLATES
        return env

    # -- navigation --------------------------------------------------------------------------
    def on_nav(self, nav: Navigation, *, config: MkDocsConfig, files: Files) -> Navigation | None:
        report_page = self._report_page(files)
        if report_page is not None:
            report_page.title = "Run report"
            nav.items.append(report_page)
        book = self.book
        if not book.problems and not book.chapters:
            _relink(nav)
            return nav
        parts: dict[str, Section] = {}
        chapters: dict[str, Section] = {}
        for cid in sorted(set(book.chapters) | {pid.rsplit(".", 1)[0] for pid in book.problems}, key=id_key):
            part = cid.split(".")[0]
            if part not in parts:
                parts[part] = Section(f"Part {part}", [])
            ch = book.chapters.get(cid)
            ch_file = files.get_file_from_path(ch.uri) if ch else None
            ch_page = ch_file.page if ch_file is not None else None
            title = f"{cid} · {ch.title}" if ch else f"Chapter {cid}"
            sec = Section(title, [])
            if ch_page is not None:
                ch_page.title = "Overview"
                sec.children.append(ch_page)
            chapters[cid] = sec
            parts[part].children.append(sec)
        for pid in sorted(book.problems, key=id_key):
            entry = book.problems[pid]
            f = files.get_file_from_path(entry.uri)
            page = f.page if f else None
            if page is None:
                continue
            page.title = f"{pid} · {entry.title}"
            chapters[pid.rsplit(".", 1)[0]].children.append(page)
        top = Section(self.config.nav_title, list(parts.values()))
        titles = [getattr(item, "title", None) for item in nav.items]
        at = titles.index(self.config.nav_after) + 1 if self.config.nav_after in titles else len(nav.items)
        nav.items.insert(at, top)
        _relink(nav)
        return nav

    # -- pages -------------------------------------------------------------------------------
    def on_page_markdown(self, markdown: str, *, page: Page, config: MkDocsConfig, files: Files) -> str | None:
        uri = page.file.src_uri
        if page is self._report_page(files):
            page.meta["hide"] = ["toc"]  # a wide table: give it the room of the table of contents
            assert self.runner is not None
            record = load_report(report_path(self.runner.checks_dir))
            runner = self.runner
            changed = stale(record, lambda reads: changed_reads(runner, reads)) if record else {}
            # MkDocs converts the report last (it is the last file): every other page has been verified
            return report_markdown(self.book, self.results, self._result, uri, perturbed=record, stale=changed,
                                   known=self.session.claims)
        entry = self.book.entries.get(uri)
        if entry is None or entry.failed:
            return markdown  # a page whose front matter failed: that one fault, not one per claim below it
        if getattr(entry.meta, "lesson", None) and "/// lesson-nav" in markdown:
            # the lesson's own navigation names previous and next: the theme's footer would say it twice
            page.meta["hide"] = [*page.meta.get("hide", []), "footer"]
        ctx = PageContext(entry.path, entry.check, self._result, line_offset=entry.offset,
                          first_line=entry.offset + 1, check_line=entry.lines.get("check", 1),
                          problem=entry.problem, scan_numbers=entry.scan_numbers,
                          description=entry.description, description_line=entry.lines.get("description", 1),
                          fields=read_fields(entry.meta, entry.lines),
                          last_line=entry.offset + len(entry.body.split("\n")),
                          root=self.root)
        if entry.problem:
            page.meta["title"] = f"{entry.pmeta.id} · {entry.pmeta.title}"   # the browser tab shows the ID
            head, markdown = self._problem_frame(markdown, entry)
            ctx.line_offset -= head  # the lines the frame put before the body
        elif isinstance(entry.meta, ChapterMeta) and not markdown.lstrip().startswith("# "):
            markdown = f"# {entry.meta.chapter} · {entry.meta.title}\n\n{markdown}"
            ctx.line_offset -= 2
        self.session.pages[uri] = ctx
        return markdown

    def _result(self, check: str) -> CheckResult:
        assert self.runner is not None
        res = self.results.get(check) or self.runner.result(check)
        self.results[check] = res
        return res

    def _problem_frame(self, markdown: str, entry: Entry) -> tuple[int, str]:
        """The H1 and precision line before the body, Draws on and Used by after it."""
        meta, book = entry.pmeta, self.book
        head = f"# {meta.id} · {meta.title}\n\n"
        if meta.conventions:
            head += to_html(_conventions(meta.conventions)) + "\n\n"
        tail = ["", "## Draws on", ""]
        tail += [f"- [{t} · {book.problems[t].title}]({_rel(entry.uri, book.problems[t].uri)})"
                 for t in meta.draws_on if t in book.problems]
        if not meta.draws_on:
            tail.append("Nothing earlier in the book: this problem starts from first principles.")
        users = book.users(meta.id)
        if users:
            tail += ["", "## Used by", ""]
            tail += [f"- [{u} · {book.problems[u].title}]({_rel(entry.uri, book.problems[u].uri)})"
                     for u in users]
        return head.count("\n"), head + markdown + "\n".join(tail) + "\n"

    def on_page_content(self, html: str, *, page: Page, config: MkDocsConfig, files: Files) -> str | None:
        entry = self.book.entries.get(page.file.src_uri)
        if entry is not None and entry.check and not entry.failed:
            html = _after_h1(html, to_html(_legend()))
        if not self.serving:
            return html
        faults = self.session.reporter.for_path(entry.path) if entry is not None else []
        return (to_html(_fault_banner(faults)) + html) if faults else html

    def on_post_page(self, output: str, *, page: Page, config: MkDocsConfig) -> str | None:
        return self.session.fill(output)

    def on_serve(self, server: Any, *, config: MkDocsConfig, builder: Any) -> Any:
        server.watch(str(self.config.problems_dir))
        server.watch(str(self.config.checks_dir))
        _poll_faster(server)
        return server

    def on_post_build(self, *, config: MkDocsConfig) -> None:
        assert self.runner is not None
        self.built_with = {name: _identity(res) for name, res in self.results.items()}
        self.session.reporter.report(orphan_faults(self.book, self.runner.checks_dir)
                                     + label_faults(self.book, self.runner.checks_dir))
        if self.config.run_yourself and self.config.execute:
            self.session.reporter.report(self._run_yourself(config))
        faults = self.session.reporter.faults
        if faults and config.strict and not self.serving and not log.isEnabledFor(logging.WARNING):
            # --quiet hides warnings from --strict's counter; a wrong number must still fail the build
            raise PluginError(f"{len(faults)} faults in checks and claims; the first: {faults[0]}")
        if self.config.ledger and self.session.records and not self.dirty:   # a dirty build renders a few pages
            write_ledger(Path(config.site_dir) / self.config.ledger, build_ledger(self.session.records, self._result))
        unique = {r.check: r for r in self.results.values()}.values()  # one check may be named two ways
        ran = [r for r in unique if r.ok and r.source is Source.RAN]
        cached = sum(r.source is Source.CACHE for r in unique)
        log.info(f"numbook: {len(unique)} checks ({len(ran)} ran, {cached} from cache) "
                 f"in {self.timings.get('checks_s', 0):.2f} s")

    def _run_yourself(self, config: MkDocsConfig) -> list[Diagnostic]:
        """Write each problem's check as a script and an executed notebook next to its page."""
        assert self.runner is not None
        runner = self.runner
        site_url = (config.site_url or "").rstrip("/")
        jobs: list[standalone.Job] = []
        for _, entry in sorted(self.book.problems.items()):
            if not entry.check:
                continue
            res = self._result(entry.check)
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
        found, offered = standalone.offer_all(jobs, runner, run=may_run, timeout=int(self.config.timeout))
        spent = [o.spent for o in offered]
        log.info(f"numbook: {len(jobs)} problems offered as a script and a notebook "
                 f"in {time.perf_counter() - started:.2f} s ({sum(x > 0 for x in spent)} notebooks ran, "
                 f"{sum(spent):.2f} s of notebook run time)")
        return found


class _CompiledTemplates(jinja2.BytecodeCache):
    """Compiled theme templates, kept in memory for the life of the process (``mkdocs serve``'s rebuilds).

    Jinja keys each entry by the template's name and file and checks it against a checksum of the template's
    source, so an edited template is compiled again. What a template compiles to also depends on its
    environment's settings (extensions, delimiters, autoescape): they are part of the key here, so two
    projects built in one process never share code compiled for the other's environment."""

    def __init__(self) -> None:
        self.store: dict[tuple[str, str], bytes] = {}

    @staticmethod
    def _key(bucket: jinja2.bccache.Bucket) -> tuple[str, str] | None:
        """None where the environment decides autoescaping per template by a function (MkDocs does not): the
        template's name is not in the bucket to ask it with, so such templates are compiled every time."""
        env = bucket.environment
        if not isinstance(env.autoescape, bool):
            return None
        settings = (sorted(env.extensions), env.block_start_string, env.block_end_string, env.variable_start_string,
                    env.variable_end_string, env.comment_start_string, env.comment_end_string,
                    env.line_statement_prefix, env.line_comment_prefix, env.trim_blocks, env.lstrip_blocks,
                    env.newline_sequence, env.keep_trailing_newline, env.optimized, env.is_async, env.autoescape,
                    env.finalize is None)
        return bucket.key, repr(settings)

    def load_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
        key = self._key(bucket)
        code = self.store.get(key) if key is not None else None
        if code is not None:
            bucket.bytecode_from_string(code)

    def dump_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
        key = self._key(bucket)
        if key is not None:
            self.store[key] = bucket.bytecode_to_string()

    def clear(self) -> None:
        self.store.clear()


_TEMPLATES = _CompiledTemplates()


def _poll_faster(server: Any, interval: float = 0.1) -> None:
    """MkDocs' file watcher polls every 0.5 s: on average a quarter of a second of every edit's wait
    before the rebuild even starts. Poll every 0.1 s instead (a snapshot of a few hundred files). This
    reaches into MkDocs' LiveReloadServer (its observer and watched paths); if those ever change, the
    watcher keeps MkDocs' own interval."""
    try:
        from watchdog.observers.polling import PollingObserver

        watched = dict(server._watched_paths)
        for path, n in watched.items():
            for _ in range(n):
                server.unwatch(path)
        server.observer = PollingObserver(timeout=interval)
        for path, n in watched.items():
            for _ in range(n):
                server.watch(path)
    except (AttributeError, ImportError, KeyError, TypeError):
        log.debug("numbook: the file watcher keeps MkDocs' polling interval")


def _identity(res: CheckResult) -> tuple[Any, ...]:
    """What tells one result of a check from another: a run, or the cache entry it was served from."""
    return (res.status, res.key, res.source_hash, res.ran_at, res.elapsed_s, res.stdout, res.stderr, res.source)


def _progress(done: int, total: int, res: CheckResult, running: list[str]) -> None:
    """One line per finished check while the build waits for them: no minutes of silence."""
    how = res.source
    still = f" · still running: {', '.join(running[:3])}{' …' if len(running) > 3 else ''}" if running else ""
    log.info(f"numbook: [{done}/{total}] {res.check} {res.status} {res.elapsed_s:.1f} s ({how}){still}")


def _legend() -> etree.Element:
    """How to read the marks, said once per page that has a check."""
    p = etree.Element("p", {"class": "nb-legend", "data-search-exclude": ""})
    p.text = ("Numbers with a dotted underline were computed by this page's check for this build: hover, focus or "
              "tap one to see the value, the check, the device and the date. A ✓ marks a statement the check "
              "asserted, with both sides it compared.")
    return p


def _after_h1(html: str, snippet: str) -> str:
    """``snippet`` after the page's H1 (and after its conventions line, which belongs to the title)."""
    at = html.find("</h1>")
    if at < 0:
        return snippet + html
    at += len("</h1>")
    rest = html[at:]
    if rest.lstrip().startswith('<p class="nb-conventions">'):
        at += rest.find("</p>") + len("</p>")
    return html[:at] + snippet + html[at:]


def _conventions(text: str) -> etree.Element:
    p = etree.Element("p", {"class": "nb-conventions"})
    p.text = text
    return p


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


def _rel(src: str, dst: str) -> str:
    return os.path.relpath(dst, os.path.dirname(src) or ".").replace(os.sep, "/")


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
