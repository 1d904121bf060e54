"""The home page's contents: generated from the book (Markdown in, HTML out), and a fault for a wrong block."""

from __future__ import annotations

import logging
import shutil
import textwrap
from pathlib import Path

import markdown
import pytest

from numbook.core.book import Book
from numbook.core.verify import PageContext
from numbook.html.extension import NumbookExtension
from numbook.html.session import Session, SessionPage

TINY = Path(__file__).parent / "fixtures" / "tiny"
CHAPTER = "---\nchapter: I.1\ntitle: Tensors\ndescription: Counts and bytes.\n---\n\nThe chapter.\n"


def book_of(root: Path) -> Book:
    return Book.scan(root, root / "docs", root / "problems")


def render(src: str, book: Book | None, uri: str = "index.md") -> str:
    session = Session(book=book)
    session.page = SessionPage(PageContext("docs/index.md", None, line_offset=3), uri=uri)
    md = markdown.Markdown(extensions=[NumbookExtension(session=session), "numbook.components"])
    return md.convert(textwrap.dedent(src).strip("\n"))


def faults(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]


@pytest.fixture
def tiny(tmp_path: Path) -> Path:
    root = tmp_path / "tiny"
    shutil.copytree(TINY, root, ignore=shutil.ignore_patterns("site", ".cache", "__pycache__"))
    (root / "problems" / "I.1.md").write_text(CHAPTER, encoding="utf-8")
    return root


BLOCK = """
/// contents
- Part I: The first part
///
"""


def test_the_contents_lists_parts_and_chapters_with_counts_and_links(tiny: Path,
                                                                      caplog: pytest.LogCaptureFixture) -> None:
    html = render(BLOCK, book_of(tiny))
    assert faults(caplog) == []
    assert html == (
        '<div class="nb-contents">\n<section class="nb-contents__part">\n<h3>Part I · The first part</h3>\n'
        '<p class="nb-contents__count">1 chapter, 2 problems</p>\n<ul class="nb-contents__chapters">\n'
        '<li><a href="problems/I.1.md">I.1 · Tensors</a> <span class="nb-contents__n">(2 problems)</span><br />\n'
        '<span class="nb-contents__desc">Counts and bytes.</span></li>\n</ul>\n</section>\n</div>')
    # from a page one folder down, the link climbs
    assert 'href="../problems/I.1.md"' in render(BLOCK, book_of(tiny), uri="lessons/index.md")


def test_the_counts_follow_the_book_when_a_problem_and_a_part_are_added(tiny: Path) -> None:
    a02 = (tiny / "problems" / "I.1.A02.md").read_text(encoding="utf-8")
    (tiny / "problems" / "I.1.A03.md").write_text(a02.replace("I.1.A02", "I.1.A03"), encoding="utf-8")
    (tiny / "problems" / "II.2.A01.md").write_text(a02.replace("I.1.A02", "II.2.A01"), encoding="utf-8")
    html = render(BLOCK, book_of(tiny))
    assert "1 chapter, 3 problems" in html and "(3 problems)" in html
    assert "<h3>Part II</h3>" in html          # a part with no title given: its numeral
    assert "<li>II.2 · Chapter II.2 <span" in html   # a chapter with no page: no link


@pytest.mark.parametrize(("src", "fault"), [
    ("/// contnets\n///", "docs/index.md:4: /// contnets: no such block (known: contents, "),
    ("/// contents\n- Part 1: one\n///", "docs/index.md:4: /// contents: 'Part 1: one' is not 'Part X: title'"),
    ("/// contents\n- Part I: a\n- Part I: b\n///", "docs/index.md:4: /// contents: part I is named twice"),
    ("/// contents\n- Part IX: far\n///", "docs/index.md:4: /// contents: part IX is named here, but the book"),
    ("/// contents\nSome prose.\n///", "docs/index.md:4: /// contents: write only a list of part titles"),
])
def test_a_wrong_block_is_a_fault_with_its_line(tiny: Path, caplog: pytest.LogCaptureFixture, src: str,
                                               fault: str) -> None:
    render(src, book_of(tiny))
    assert any(f.startswith(fault) for f in faults(caplog)), faults(caplog)


def test_without_a_book_the_block_is_a_fault_not_an_empty_list(caplog: pytest.LogCaptureFixture) -> None:
    render(BLOCK, None)
    assert faults(caplog) == ["docs/index.md:4: /// contents: no book to list: the numbook plugin fills this block "
                              "when it builds the site"]


@pytest.mark.slow  # two real builds of the tiny book
def test_a_built_home_page_counts_a_problem_added_to_the_book(tiny: Path) -> None:
    import os
    import subprocess
    import sys

    cfg = tiny / "mkdocs.yml"
    cfg.write_text(cfg.read_text(encoding="utf-8").replace("  - numbook\n", "  - numbook\n  - numbook.components\n"),
                   encoding="utf-8")
    index = tiny / "docs" / "index.md"
    index.write_text(index.read_text(encoding="utf-8") + "\n## Contents\n" + BLOCK, encoding="utf-8")
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1", NUMBOOK_DEVICE="cpu: test")

    def home() -> str:
        proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(tiny / "site")],
                              cwd=tiny, capture_output=True, text=True, env=env, timeout=300, check=False)
        assert proc.returncode == 0, proc.stderr
        return (tiny / "site" / "index.html").read_text(encoding="utf-8")

    assert "1 chapter, 2 problems" in home()
    assert '<a href="problems/I.1/">I.1 · Tensors</a> <span class="nb-contents__n">(2 problems)</span>' in home()
    a02 = (tiny / "problems" / "I.1.A02.md").read_text(encoding="utf-8")
    (tiny / "problems" / "I.1.A03.md").write_text(a02.replace("I.1.A02", "I.1.A03"), encoding="utf-8")
    assert '<a href="problems/I.1/">I.1 · Tensors</a> <span class="nb-contents__n">(3 problems)</span>' in home()

    index.write_text(index.read_text(encoding="utf-8").replace("/// contents", "/// contnets"), encoding="utf-8")
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(tiny / "site")],
                          cwd=tiny, capture_output=True, text=True, env=env, timeout=300, check=False)
    assert proc.returncode != 0 and "docs/index.md:7: /// contnets: no such block" in proc.stderr, proc.stderr
