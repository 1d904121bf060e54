"""The book's one verification pass (numbook.core.bookpass) and what reads its reports: the Markdown extension
renders a page's report without verifying it again, and the frame a build puts around a problem is the HTML
the Markdown frame it replaces made."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import markdown
import pytest
from markdown.preprocessors import NormalizeWhitespace

import numbook.html.extension as extension_module
from _results import Fixed
from numbook.core.book import Book
from numbook.core.bookpass import BuildResults, check_page, converted_text, page_context, verify_book
from numbook.core.diagnostics import Reporter
from numbook.core.ledger import build_ledger
from numbook.core.verify import PageContext
from numbook.html.extension import NumbookExtension
from numbook.html.frame import Frame, Link
from numbook.html.session import Session, SessionPage
from numbook.run.runner import CheckResult

DEMO = CheckResult("checks/demo.py", "ok", values={"fp32_mb": 262.144, "w": 7.5}, inputs={"B": 4},
                   stdout="printed\n")
OTHER = CheckResult("checks/other.py", "ok", values={"w": 7.5}, stdout="other\n")
SHOWN = CheckResult("checks/shown.py", "ok", stdout="shown\n")


def table(**results: CheckResult) -> Fixed:
    known = {"demo.py": DEMO, "other.py": OTHER, "shown.py": SHOWN}
    known.update({f"{k}.py": v for k, v in results.items()})
    return Fixed(known.__getitem__)


def book(tmp_path: Path, **pages: str) -> Book:
    root = tmp_path / "book"
    (root / "docs").mkdir(parents=True, exist_ok=True)
    (root / "problems").mkdir(exist_ok=True)
    for name, text in pages.items():
        (root / "docs" / f"{name}.md").write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return Book.scan(root, root / "docs", root / "problems")


PAGE = """
---
check: demo.py
---
# A page

It takes [[262.1|fp32_mb]] MB, and [[7.5|other:w]] wide.

```check path="shown.py"
```
"""


@pytest.mark.parametrize("text", ["a\n\tb\n   \nc", "x\r\ny\rz", "\x02stx\x03 and tabs\tinside\n", "", "  \n\t\n"])
def test_the_text_verified_is_the_text_the_extension_is_given(text: str) -> None:
    md = markdown.Markdown()
    assert converted_text(text) == "\n".join(NormalizeWhitespace(md).run(text.split("\n")))


def test_every_page_is_verified_once_and_its_report_names_the_checks_it_reads(tmp_path: Path) -> None:
    b = book(tmp_path, page=PAGE, bad="---\ncheck: [\n---\nBroken.\n", plain="# Plain\n\nNo check.\n")
    reports = verify_book(b, table())
    assert list(reports) == ["page.md", "plain.md"]   # the failed front matter is that page's one fault
    rep = reports["page.md"]
    assert rep.context == page_context(b.entries["page.md"], b.root)
    assert rep.text == converted_text(b.entries["page.md"].body)
    assert rep.diagnostics == [] and rep.claims == {"checks/demo.py": 1, "checks/other.py": 1}
    assert rep.checks == {"checks/demo.py", "checks/other.py", "checks/shown.py"}   # the fence's check too
    assert [e.name for e in build_ledger(reports.values())] == ["fp32_mb", "w"]


def test_a_page_keeps_its_report_until_its_text_or_a_result_it_read_changes(tmp_path: Path) -> None:
    b = book(tmp_path, page=PAGE, plain="# Plain\n\nNo check.\n")
    first = verify_book(b, table())
    again = verify_book(b, table(), first)
    assert again["page.md"] is first["page.md"] and again["plain.md"] is first["plain.md"]
    shown_again = CheckResult("checks/shown.py", "ok", stdout="printed again\n")
    moved = verify_book(b, table(shown=shown_again), first)
    assert moved["page.md"] is not first["page.md"]            # the fence shows another output
    assert moved["plain.md"] is first["plain.md"]
    (b.root / "docs" / "plain.md").write_text("# Plain\n\nEdited.\n", encoding="utf-8")
    edited = verify_book(book(tmp_path), table(), first)
    assert edited["plain.md"] is not first["plain.md"] and edited["page.md"] is first["page.md"]


def test_the_build_asks_the_runner_once_for_a_check_only_a_marker_names() -> None:
    asked: list[str] = []

    class Runner:
        def result(self, check: str, /) -> CheckResult:
            asked.append(check)
            return OTHER

    results = BuildResults(Runner(), {"demo.py": DEMO})
    assert results.result("demo.py") is DEMO and results.result("other.py") is OTHER
    assert results.result("other.py") is OTHER and asked == ["other.py"]
    assert [r.check for r in results.unique()] == ["checks/demo.py", "checks/other.py"]


def test_the_extension_renders_the_report_it_is_given_and_verifies_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    ctx = PageContext("docs/x.md", "demo.py")
    text = "It takes [[262.1|fp32_mb]] MB."
    report = check_page(converted_text(text), ctx, table())

    def verify_again(*args: object) -> None:
        raise AssertionError("verified a page the book's pass verified")

    monkeypatch.setattr(extension_module, "check_page", verify_again)
    session = Session(Reporter(), results=table(), page=SessionPage(ctx, report))
    html = markdown.Markdown(extensions=[NumbookExtension(session=session)]).convert(text)
    assert 'data-claim="fp32_mb"' in html and 'tabindex="0">262.1</span> MB.' in html
    assert session.reporter.faults == []


def test_a_text_changed_after_the_pass_is_verified_as_converted() -> None:
    ctx = PageContext("docs/x.md", "demo.py")
    report = check_page(converted_text("It takes [[262.1|fp32_mb]] MB."), ctx, table())
    session = Session(Reporter(), results=table(), page=SessionPage(ctx, report))
    markdown.Markdown(extensions=[NumbookExtension(session=session)]).convert("It takes [[262.9|fp32_mb]] MB.")
    assert [str(d) for d in session.reporter.faults] == [
        "docs/x.md:1: claim 'fp32_mb' reads 262.9, checks/demo.py computed 262.144 (compared to 1 decimal place(s))"]


BODY = """## Statement

Width $w = [[7.5|w]]$ and memory [[262.1|fp32_mb]] MB.[^1]

[^1]: A footnote.

## Variation

More.
"""
EXTENSIONS = ["toc", "footnotes", "tables", "attr_list", "md_in_html", "pymdownx.superfences", "pymdownx.arithmatex"]
CONFIGS = {"toc": {"permalink": True}, "pymdownx.arithmatex": {"generic": True}}
LEGEND = ('<p class="nb-legend" data-search-exclude="">Numbers with a dotted underline were computed by this page\'s '
          "check for this build: hover, focus or tap one to see the value, the check, the device and the date. A ✓ "
          "marks a statement the check asserted, with both sides it compared.</p>")


def _convert(text: str, page: SessionPage) -> str:
    session = Session(Reporter(), results=table(), page=page)
    return markdown.Markdown(extensions=[NumbookExtension(session=session), *EXTENSIONS],
                             extension_configs=CONFIGS).convert(text)


def _elements(html: str) -> list[str]:
    """The tags and texts of ``html``, without the line breaks between elements (tools/sitediff.py's reading)."""
    return [t for t in re.findall(r"<[^>]*>|[^<]+", html) if t.strip()]


def _after_h1(html: str, snippet: str) -> str:
    """How the build put the legend into a page's HTML before it was an element: the reference here."""
    at = html.find("</h1>")
    if at < 0:
        return snippet + html
    at += len("</h1>")
    rest = html[at:]
    if rest.lstrip().startswith('<p class="nb-conventions">'):
        at += rest.find("</p>") + len("</p>")
    return html[:at] + snippet + html[at:]


@pytest.mark.parametrize("conventions", ["", "MB are 10⁶ bytes."])
def test_the_frame_is_the_html_the_markdown_frame_made(conventions: str) -> None:
    """Elements in the tree, not Markdown around the body: the same HTML, element for element, as the frame the
    build used to write as Markdown around the body (its H1, the conventions as raw HTML, Draws on and Used by)
    with the legend put after the H1 and the conventions, and the page's index of math claims after Used by.
    (Python-Markdown ended the raw conventions with one more line break than the element has.)"""
    head = "# I.1.A02 · Two `@` tables\n\n"
    head += f'<p class="nb-conventions">{conventions}</p>\n\n' if conventions else ""
    tail = ("\n## Draws on\n\n- [I.1.A01 · One table](I.1.A01.md)\n\n## Used by\n\n"
            "- [I.1.A03 · Three](I.1.A03.md)\n- [I.1.A04 · Four $n$](I.1.A04.md)\n")
    framed = PageContext("problems/I.1.A02.md", "demo.py", line_offset=6 - head.count("\n"))
    before = _after_h1(_convert(head + BODY + tail, SessionPage(framed)), LEGEND)
    frame = Frame("I.1.A02 · Two `@` tables", conventions, True, (Link("I.1.A01 · One table", "I.1.A01.md"),),
                  False, (Link("I.1.A03 · Three", "I.1.A03.md"), Link("I.1.A04 · Four $n$", "I.1.A04.md")), True)
    ctx = PageContext("problems/I.1.A02.md", "demo.py", line_offset=6)
    after = _convert(BODY, SessionPage(ctx, check_page(converted_text(BODY), ctx, table()), frame))
    assert after.index("Used by") < after.index('class="nb-claims"') < after.index('<div class="footnote">')
    assert _elements(after) == _elements(before)


def test_a_page_without_an_h1_gets_the_legend_first_and_a_problem_with_no_links_says_so() -> None:
    ctx = PageContext("problems/I.1.A01.md", "demo.py")
    html = _convert("Text.", SessionPage(ctx, None, Frame(legend=True)))
    assert html == LEGEND + "<p>Text.</p>"
    html = _convert("Text.", SessionPage(ctx, None, Frame(problem=True, first_principles=True)))
    assert html.endswith('<h2 id="draws-on">Draws on<a class="headerlink" href="#draws-on" title="Permanent link">'
                         "&para;</a></h2>\n<p>Nothing earlier in the book: this problem starts from first "
                         "principles.</p>")
