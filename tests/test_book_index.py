"""The book's indexes stay right as pages are added, and cost one pass, not one per page (issue 32: a 1,000-problem
book asked every problem of every page who draws on it)."""

from __future__ import annotations

from pathlib import Path

from numbook.core.book import Book, book_path

PAGE = """---
id: {pid}
title: T
check: t.py
draws_on: [{draws}]
---

## Statement

x
"""


def add(book: Book, root: Path, pid: str, *draws: str) -> None:
    f = root / "problems" / f"{pid}.md"
    f.parent.mkdir(parents=True, exist_ok=True)
    f.write_text(PAGE.format(pid=pid, draws=", ".join(draws)), encoding="utf-8")
    book.add(f"problems/{pid}.md", f)


def test_who_draws_on_a_problem_in_id_order_each_once_and_still_right_after_another_page_is_added(
        tmp_path: Path) -> None:
    book = Book(tmp_path)
    add(book, tmp_path, "I.1.A01")
    add(book, tmp_path, "I.1.A10", "I.1.A01", "I.1.A01")   # named twice: listed once
    add(book, tmp_path, "I.1.A02", "I.1.A01")
    assert book.users("I.1.A01") == ["I.1.A02", "I.1.A10"]   # by ID (A02 before A10), not by the order added
    assert book.users("I.1.A02") == []
    add(book, tmp_path, "I.2.A01", "I.1.A02")                 # a page added after a question: asked again, right
    assert book.users("I.1.A02") == ["I.2.A01"]
    book.users("I.1.A01").append("changed by a caller")
    assert book.users("I.1.A01") == ["I.1.A02", "I.1.A10"]   # each answer is the caller's own list


def test_a_page_is_named_by_its_path_in_the_book_and_a_page_outside_by_its_own(tmp_path: Path) -> None:
    (tmp_path / "book" / "problems").mkdir(parents=True)
    (tmp_path / "book" / "problems" / "x.md").write_text("x", encoding="utf-8")
    (tmp_path / "link").symlink_to(tmp_path / "book")
    assert book_path(str(tmp_path / "link" / "problems" / "x.md"), str(tmp_path / "book")) == "problems/x.md"
    assert book_path(str(tmp_path / "elsewhere.md"), str(tmp_path / "book")) == str(tmp_path / "elsewhere.md")
