"""A GPU check awaiting its first GPU run is not an unused check; once frozen, a page must use it."""

from __future__ import annotations

from pathlib import Path

from numbook.book import Book
from numbook.lint import orphan_faults


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
