"""The run report page: one fold per check of the build, titled with its status, time, source and claims,
closed (a phone shows a list of one-line titles), with its device and pages inside."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

TINY = Path(__file__).parent / "fixtures" / "tiny"


def build(root: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1", NUMBOOK_DEVICE="cpu: test")
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(root / "site")],
                          cwd=root, capture_output=True, text=True, env=env, timeout=300, check=False)


def rows(site: Path) -> list[list[str]]:
    """Each check's fold: the parts of its title line, then its device and its pages."""
    html = (site / "report/index.html").read_text(encoding="utf-8")
    folds = re.findall(r'<details class="nb-check">\s*<summary>(.*?)</summary>(.*?)</details>', html, re.S)
    out = []
    for title, body in folds:
        items = dict(re.findall(r"<li><strong>(\w+)</strong>: (.*?)</li>", body, re.S))
        text = [re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", v)).strip() for v in (items["device"], items["pages"])]
        out.append([part.strip() for part in title.split("·")] + text)
    return out


@pytest.mark.slow  # a real build
def test_the_report_lists_every_check_and_then_its_cached_results(tmp_path: Path) -> None:
    root = tmp_path / "tiny"
    shutil.copytree(TINY, root, ignore=shutil.ignore_patterns("site", ".cache", "__pycache__"))
    cfg = root / "mkdocs.yml"
    cfg.write_text(cfg.read_text(encoding="utf-8").replace('cache_dir: ""', 'cache_dir: ".cache/numbook"'),
                   encoding="utf-8")

    proc = build(root)
    assert proc.returncode == 0, proc.stderr
    first = rows(root / "site")
    assert [[c for i, c in enumerate(r) if i != 2] for r in first] == [
        ["i1_a01_embedding.py", "ok", "ran", "9 claims", "cpu: test", "I.1.A01"],
        ["i1_a02_reuse.py", "ok", "ran", "4 claims", "cpu: test", "I.1.A02"],
    ]
    assert all(re.fullmatch(r"\d+\.\d\d s", r[2]) for r in first)
    html = (root / "site/report/index.html").read_text(encoding="utf-8")
    assert '<h1 id="run-report">Run report</h1>' in html
    assert "2 checks, 2 ran for this build" in html and "13 claims verified" in html
    assert '<a href="../problems/I.1.A01/">I.1.A01</a>' in html
    assert "Run report" in (root / "site/index.html").read_text(encoding="utf-8")  # in the nav
    assert "<table" not in html and " open" not in html   # every check folded, none failed: nothing open

    proc = build(root)  # warm: nothing runs, both rows come from the cache with their original run times
    assert proc.returncode == 0, proc.stderr
    second = rows(root / "site")
    assert [r[3] for r in second] == ["cache", "cache"]
    assert [r[2] for r in second] == [r[2] for r in first]
    assert "0 ran for this build" in (root / "site/report/index.html").read_text(encoding="utf-8")
