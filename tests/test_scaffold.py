"""`numbook new`: the scaffold of a problem builds clean, strictly, until the author writes a wrong claim."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from numbook.cli import main
from numbook.cli.scaffold import check_name, slugify

TINY = Path(__file__).parent / "fixtures" / "tiny"


def copy_tiny(tmp_path: Path) -> Path:
    root = tmp_path / "tiny"
    shutil.copytree(TINY, root, ignore=shutil.ignore_patterns("site", ".cache", "__pycache__"))
    return root


def build(root: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1")
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(root / "site")],
                          cwd=root, capture_output=True, text=True, env=env, timeout=300, check=False)


def warnings(proc: subprocess.CompletedProcess[str]) -> list[str]:
    return [ln.split("-  ", 1)[1] for ln in proc.stderr.splitlines() if ln.startswith("WARNING")]


def test_check_names_follow_the_id_and_title() -> None:
    assert slugify("Micro-batches and the mean of means, again") == "micro_batches_and_the_mean"
    assert check_name("I.4.B09", "Micro-batches and the mean of means") == "i4_b09_micro_batches_and_the_mean.py"
    assert check_name("II.12.A01", "Fits?") == "ii12_a01_fits.py"


@pytest.mark.slow  # a real build
def test_the_scaffold_builds_strict_and_fails_on_the_first_wrong_claim(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = copy_tiny(tmp_path)
    assert main(["new", "I.1.A03", "Positions in a batch: a count", "--root", str(root)]) == 0
    check = "checks/i1_a03_positions_in_a_batch_a.py"
    assert capsys.readouterr().out.splitlines()[:2] == ["wrote problems/I.1.A03.md", f"wrote {check}"]
    page = (root / "problems/I.1.A03.md").read_text(encoding="utf-8")
    assert page.startswith('---\nid: I.1.A03\ntitle: "Positions in a batch: a count"\n'
                           "check: i1_a03_positions_in_a_batch_a.py\n")
    for section in ("Statement", "Given", "Find", "Strategy", "Solution", "Answer", "Check — numeric",
                    "Check — sanity", "Where this breaks", "Variation"):
        assert f"\n## {section}\n" in page
    assert subprocess.run([sys.executable, str(root / check)], capture_output=True, text=True,
                          check=True).stdout == "B = 4 sequences of T = 512 tokens: 2,048 positions\n"

    proc = build(root)
    assert proc.returncode == 0, proc.stderr
    html = (root / "site/problems/I.1.A03/index.html").read_text(encoding="utf-8")
    assert "I.1.A03 · Positions in a batch: a count</h1>" in html
    assert 'data-claim="positions"' in html and 'tabindex="0">2,048</span> positions' in html
    assert "B = 4 sequences of T = 512 tokens: 2,048 positions" in html          # the check's printed output
    assert "I.1.A03 · Positions in a batch: a count" in \
        (root / "site/index.html").read_text(encoding="utf-8")                     # in the generated nav
    assert main(["lint", "--root", str(root)]) == 0

    (root / "problems/I.1.A03.md").write_text(page.replace("[[2,048|positions]]", "[[2,049|positions]]"),
                                              encoding="utf-8")
    proc = build(root)
    assert proc.returncode == 1
    assert warnings(proc) == [
        f"problems/I.1.A03.md:35: claim 'positions' reads 2,049, {check} computed 2048 (compared exact)"
    ]


def test_an_existing_id_is_refused_and_nothing_is_written(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = copy_tiny(tmp_path)
    before = sorted(p.relative_to(root).as_posix() for p in root.rglob("*"))
    assert main(["new", "I.1.A01", "Another embedding", "--root", str(root)]) == 1
    assert capsys.readouterr().err == "numbook new: problem ID 'I.1.A01' already exists: problems/I.1.A01.md\n"
    assert sorted(p.relative_to(root).as_posix() for p in root.rglob("*")) == before


def test_an_existing_check_file_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = copy_tiny(tmp_path)
    (root / "checks/i1_a03_reuse.py").write_text("", encoding="utf-8")
    assert main(["new", "I.1.A03", "Reuse", "--root", str(root)]) == 1
    assert capsys.readouterr().err == "numbook new: checks/i1_a03_reuse.py already exists\n"
    assert not (root / "problems/I.1.A03.md").exists()


@pytest.mark.parametrize("bad", ["I.1.3", "I.1.A3", "i.1.A03", "I.1.A003", "1.1.A01", "I.1"])
def test_a_malformed_id_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str], bad: str) -> None:
    root = copy_tiny(tmp_path)
    assert main(["new", bad, "Anything", "--root", str(root)]) == 1
    assert capsys.readouterr().err == (
        f"numbook new: '{bad}' is not a problem ID like I.4.B07 (a Roman part, a chapter number, "
        "a capital series letter and two digits)\n")
    assert not list((root / "problems").glob("*A03*"))
