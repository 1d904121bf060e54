"""The book itself: built strictly, and one changed digit on a real page fails verification."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def site(site_dir: Path) -> Path:
    return site_dir   # the one strict build of the session (tests/conftest.py)


@pytest.mark.slow
def test_the_book_builds_strict_and_b07_shows_executed_output(site: Path) -> None:
    page = (site / "problems/I.4.B07/index.html").read_text(encoding="utf-8")
    assert re.search(r"<h1[^>]*>I\.4\.B07 · From a logit tensor to one scalar<a class=\"headerlink\"", page)
    assert 'class="nb-stamp"' in page and "torch 2.13.0" in page
    assert 'href="../I.4.B04/"' in page                           # Draws on leads somewhere real
    assert len(re.findall(r'class="nb-claim"', page)) > 20
    assert "nb-claim-bad" not in page


@pytest.mark.slow
def test_no_page_requests_a_third_party_host(site: Path) -> None:
    for html in site.rglob("*.html"):
        text = html.read_text(encoding="utf-8")
        for url in re.findall(r'(?:src|href)="(https?://[^"]+)"', text):
            # links a reader may follow are fine; nothing the page loads may be remote
            assert not re.search(r"\.(js|css|woff2?|ttf)(\?|$)", url), f"{html}: loads {url}"
        assert "fonts.googleapis.com" not in text and "cdn.jsdelivr.net" not in text, html


def _book_copy(tmp_path: Path) -> Path:
    root = tmp_path / "book"
    root.mkdir()
    # src, servebench: hashes the cache holds; overrides: the theme's custom_dir
    for name in ("problems", "checks", "docs", "overrides", "tools", "src", "servebench"):
        shutil.copytree(ROOT / name, root / name)
    shutil.copy(ROOT / "mkdocs.yml", root / "mkdocs.yml")
    if (ROOT / ".cache").is_dir():
        shutil.copytree(ROOT / ".cache", root / ".cache")   # warm cache: only verification reruns
    return root


@pytest.mark.slow
@pytest.mark.parametrize("page", ["problems/I.4.B07.md", "problems/I.4.B04.md"])
def test_one_changed_digit_on_a_real_page_fails_verify_with_one_line(tmp_path: Path, page: str, site_dir: Path) -> None:
    root = _book_copy(tmp_path)   # after the session's build (site_dir): its result cache is warm
    path = root / page
    lines = path.read_text(encoding="utf-8").split("\n")
    for i, line in enumerate(lines):
        m = re.search(r"\[\[(\d*[1-8])(\.\d+)?\|([a-z_]\w*)\]\]", line)   # a claim with a digit to bump
        if m and "free" not in m.group(3):
            digit = m.group(1)
            bumped = digit[:-1] + str(int(digit[-1]) + 1)
            lines[i] = line[:m.start(1)] + bumped + line[m.end(1):]
            break
    else:
        pytest.fail(f"no claim to mutate in {page}")
    path.write_text("\n".join(lines), encoding="utf-8")
    proc = subprocess.run([sys.executable, "-m", "numbook.cli", "verify"], cwd=root, capture_output=True, text=True,
                          timeout=1800, check=False)
    assert proc.returncode == 1
    faults = proc.stderr.strip().splitlines()
    assert len(faults) == 1, proc.stderr
    assert faults[0].startswith(f"{page}:{i + 1}: claim '{m.group(3)}' reads {bumped}{m.group(2) or ''}, checks/")


def test_the_books_perturbation_record_is_clean_and_covers_every_check_as_it_is_now() -> None:
    """`numbook verify --perturb` must have nudged every check of the book as it is now (rerun it and commit
    checks/perturb.json after a change): no dead input, no constant claim, no failure, nothing stale."""
    from numbook.core.book import Book
    from numbook.core.result import read_header
    from numbook.mkdocs.config import load_layout
    from numbook.run.frozen import changed_reads
    from numbook.run.perturb import load_report, report_path, stale
    from numbook.run.runner import Runner

    layout = load_layout(ROOT)
    runner = Runner(ROOT, "checks", None)
    book = Book.scan(ROOT, ROOT / layout.docs_dir, ROOT / layout.problems_dir)
    record = load_report(report_path(runner.checks_dir))
    assert record is not None, "no checks/perturb.json: run `numbook verify --perturb`"
    checks = sorted(p for p in runner.checks_dir.glob("*.py") if not p.name.startswith("_"))   # _x.py: helpers
    assert {f"checks/{c}" for c in book.checks()} <= {f"checks/{p.name}" for p in checks}
    on_cpu = [f"checks/{p.name}" for p in checks if read_header(p.read_text(encoding="utf-8")).requires != "cuda"]
    assert sorted(record.checked) == on_cpu
    assert stale(record, lambda reads: changed_reads(reads, runner.root, runner.file_hash)) == {}
    assert record.clean, record.status()


@pytest.mark.slow
def test_the_search_index_holds_what_a_reader_reads(site: Path) -> None:
    import json

    docs = json.loads((site / "search" / "search_index.json").read_text(encoding="utf-8"))["docs"]
    texts = {d["location"]: "" for d in docs}
    for d in docs:
        texts[d["location"]] += d["text"]
    # math is its rendered text: no tool markup, and TeX only where the author guide shows it as code
    assert not any("\\class" in d["text"] or "\\cssId" in d["text"] for d in docs)
    assert {d["location"].split("#")[0] for d in docs if "\\" in d["text"]} <= {"author-guide/"}
    # the run report's folds and tables are out, its summary in
    report = [d for d in docs if d["location"].startswith("report/")]
    assert report and sum(len(d["text"]) for d in report) < 3000 and "claims verified" in report[0]["text"]
    # notebook code cells are out, their prose in
    notebook = " ".join(t for loc, t in texts.items() if loc.startswith("lessons/notebooks/lesson-1/"))
    assert "import torch" not in notebook and notebook.strip()
    # a problem's hidden solution is findable, and its entry says where it is hidden
    solution = [d for d in docs if d["location"] == "problems/I.4.B07/#solution"]
    assert solution and solution[0]["text"].startswith("<p>(hidden under “Show the solution”)</p>")
    assert any(d["location"] == "problems/I.4.B07/#answer" and "65,536,000" in d["text"] for d in docs)


@pytest.mark.slow
def test_the_home_page_lists_every_chapter_with_its_problem_count(site: Path) -> None:
    home = (site / "index.html").read_text(encoding="utf-8")
    chapters = sorted(p.stem for p in (ROOT / "problems").glob("*.md") if p.stem.count(".") == 1)
    assert chapters
    for cid in chapters:
        n = len(list((ROOT / "problems").glob(f"{cid}.*.md")))
        assert re.search(rf'<a href="problems/{re.escape(cid)}/">{re.escape(cid)} · [^<]+</a> '
                         rf'<span class="nb-contents__n">\({n} problems?\)</span>', home), cid
    parts = sorted({c.split(".")[0] for c in chapters})
    assert len(re.findall(r'<section class="nb-contents__part">', home)) == len(parts)
