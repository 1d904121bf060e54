"""A GPU check awaiting its first GPU run is not an unused check; once frozen, a page must use it."""

from __future__ import annotations

from pathlib import Path

from numbook.core.book import Book
from numbook.core.lint import orphan_faults


def test_a_gpu_check_awaits_its_first_freeze_then_must_be_used(tmp_path: Path) -> None:
    checks = tmp_path / "checks"
    checks.mkdir()
    (checks / "g.py").write_text("# numbook: requires=cuda\nimport numbook.check\n", encoding="utf-8")
    (checks / "c.py").write_text("import numbook.check\n", encoding="utf-8")
    book = Book(tmp_path)
    assert [str(d) for d in orphan_faults(book, checks)] == [
        "checks/c.py:1: no page uses this check: name it in a page's 'check:', bind a claim to it as [[…|c:name]], "
        "or rename it _c.py if it is a helper"]
    (checks / "frozen").mkdir()
    (checks / "frozen" / "g.json").write_text("{}", encoding="utf-8")
    assert [d.path for d in orphan_faults(book, checks)] == ["checks/c.py", "checks/g.py"]


def test_a_quick_check_answered_by_the_text_before_it_is_reported(tmp_path: Path) -> None:
    from numbook.core.lint import quiz_faults

    page = tmp_path / "docs" / "l.md"
    page.parent.mkdir()
    quiz = ("/// quiz | What shape has `A @ B`?\n- [ ] (3, 5)\n    No.\n- [x] [[(4, 5)|ab]]\n    Yes.\n///\n")
    page.write_text("---\ncheck: l.py\n---\n\nFor $A$ of shape (4, 3) and $B$ of shape (3, 5), $C$ has shape "
                    "[[(4, 5)|ab]].\n\n" + quiz, encoding="utf-8")
    book = Book(tmp_path)
    entry = book.add("l.md", page)
    assert [str(d) for d in quiz_faults(entry)] == [
        "docs/l.md:7: quick check answered by the text before it: its answer '(4, 5)' stands in the 300 characters "
        "above; ask the reader to predict it, one step further"]
    page.write_text("---\ncheck: l.py\n---\n\nA product keeps the outer axes.\n\n" + quiz, encoding="utf-8")
    assert quiz_faults(book.add("l.md", page)) == []


def test_a_page_without_front_matter_uses_the_checks_its_fences_and_claims_name(tmp_path: Path) -> None:
    checks = tmp_path / "checks"
    checks.mkdir()
    for name in ("shown", "bound", "unused"):
        (checks / f"{name}.py").write_text("import numbook.check\n", encoding="utf-8")
    page = tmp_path / "docs" / "guide.md"
    page.parent.mkdir()
    page.write_text('# Guide\n\n```check path="shown.py"\n```\n\nIt is [[3|bound:n]].\n', encoding="utf-8")
    book = Book(tmp_path)
    book.add("guide.md", page)
    assert [d.path for d in orphan_faults(book, checks)] == ["checks/unused.py"]

