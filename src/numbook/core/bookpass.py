"""The book's one verification pass: every page verified once, for ``numbook verify`` and for the build.

:func:`verify_book` verifies each page of a :class:`~numbook.core.book.Book` (its claims, sections,
relation sentences, front matter copies and quick checks) and keeps one
:class:`~numbook.core.verify.PageReport` per page, by the page's site path. Both readers of the book
call it: the CLI prints the reports' faults; the MkDocs plugin reports them before any page renders
and hands each page's report to the Markdown extension, which renders its records instead of verifying
the page again. The ledger, the run report and ``mkdocs serve --dirty`` read the same reports: a report
keeps the results it read, so the pages a new result changes are found from the reports.

- :func:`page_context`: the one way to make a page's context from its book entry.
- :func:`converted_text`: the text verified is the text the Markdown extension is given, so a record's
  row and columns point into the lines it rewrites, and line numbers in messages are the file's own.
  (The frame the build puts around a problem, its H1 and Draws on / Used by, goes into the page as
  elements after the conversion has parsed it: ``numbook.html.frame``.)
- :func:`check_page`: one page, verified (``numbook.core.verify``), its quick checks read
  (``numbook.core.quizzes``), and the checks its ```` ```check ```` fences show read too.
- :class:`BuildResults`: the results of one build by the name a page gives a check: those the runner
  ran before the pages, and any other check a page names, asked of the runner once and kept.

Under ``mkdocs serve`` the plugin passes the last build's reports: a page whose text and context are
unchanged, and whose checks' results are the ones it read, keeps its report.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

from numbook.core.book import Book, Entry
from numbook.core.diagnostics import Diagnostic
from numbook.core.page import read_fields
from numbook.core.quizzes import quiz_faults
from numbook.core.result import CheckResult
from numbook.core.structure import walk
from numbook.core.verify import CHECK_FENCE, PageContext, PageReport, Results, verify_page

__all__ = ["BuildResults", "page_context", "converted_text", "check_page", "verify_book", "read_changed"]

_ANY_CHECK_FENCE = re.compile(r"^\s*(?:`{3,}|~{3,})\s*check\b")


def page_context(entry: Entry, root: Path) -> PageContext:
    """The context a page of the book is verified in: its path, check, front matter lines and rules."""
    return PageContext(entry.path, entry.check, line_offset=entry.offset, first_line=entry.offset + 1,
                       check_line=entry.lines.get("check", 1), problem=entry.problem,
                       scan_numbers=entry.scan_numbers, description=entry.description,
                       description_line=entry.lines.get("description", 1),
                       fields=read_fields(entry.meta, entry.lines),
                       last_line=entry.offset + len(entry.body.split("\n")), root=root)


def converted_text(body: str, tab_length: int = 4) -> str:
    """A page's body as the Markdown extension is given it: as Python-Markdown's first preprocessor
    (``normalize_whitespace``) leaves it, with two blank lines added at the end, tabs expanded and lines of
    spaces emptied. Its rows are the body's own. (Should Python-Markdown ever hand on another text, the
    extension verifies the text it is given instead: ``numbook.html.extension``.)"""
    text = body.replace("\x02", "").replace("\x03", "").replace("\r\n", "\n").replace("\r", "\n") + "\n\n"
    return re.sub(r"(?<=\n) +\n", "\n", text.expandtabs(tab_length))


def check_page(text: str, ctx: PageContext, results: Results) -> PageReport:
    """A page verified: its markers, sections and sentences, its quick checks' key rules (read from the Markdown,
    with the records of the claims the options bind), and the results of the checks its fences show."""
    report = verify_page(text, ctx, results)
    report.diagnostics += [Diagnostic(ctx.path, ctx.line_offset + line, message)
                           for line, message in quiz_faults(text, report.records)]
    for ln in walk(text):
        if ln.code and _ANY_CHECK_FENCE.match(ln.text):
            named = CHECK_FENCE.match(ln.text)
            shown = named.group(1) if named else ctx.check
            if shown and shown not in report.read:
                report.read[shown] = results.result(shown)
    return report


def read_changed(report: PageReport, results: Results) -> bool:
    """Whether a check the page read has another result now (it ran again, or the cache holds another)."""
    return any(results.result(name) != res for name, res in report.read.items())


def verify_book(book: Book, results: Results, previous: Mapping[str, PageReport] | None = None
                ) -> dict[str, PageReport]:
    """Every page of the book verified once, by site path, in the book's order. A page whose front matter failed
    is left out: that is its one fault, not one per claim below it. ``previous`` (the reports of an earlier pass
    over the same book) lends its report to a page whose text, context and results are unchanged."""
    reports: dict[str, PageReport] = {}
    for uri, entry in book.entries.items():
        if entry.failed:
            continue
        ctx = page_context(entry, book.root)
        text = converted_text(entry.body)
        report = previous.get(uri) if previous is not None else None
        if report is None or report.text != text or report.context != ctx or read_changed(report, results):
            report = check_page(text, ctx, results)
        reports[uri] = report
    return reports


class BuildResults:
    """The results of one build's checks, by the name a page gives each check (a :class:`Results`).

    Those the runner ran before the pages come first (``run_many``, in parallel); a check only a marker or a
    fence names is asked of the runner when a page first names it, and kept, so every page reads one result."""

    def __init__(self, runner: Results, ran: Mapping[str, CheckResult]) -> None:
        self.runner = runner
        self.by_name: dict[str, CheckResult] = dict(ran)

    def result(self, check: str, /) -> CheckResult:
        if check not in self.by_name:
            self.by_name[check] = self.runner.result(check)
        return self.by_name[check]

    def unique(self) -> list[CheckResult]:
        """Each check's result once (a check may be named two ways: ``x`` and ``x.py``), in order of its path."""
        return sorted({res.check: res for res in self.by_name.values()}.values(), key=lambda res: res.check)
