"""The run report page: one row per check of the build, with status, time, device, source and claims."""

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
    html = (site / "report/index.html").read_text(encoding="utf-8")
    body = html.split("<tbody>", 1)[1].split("</tbody>", 1)[0]
    return [[re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", cell)).strip() for cell in re.findall(r"<td>(.*?)</td>", tr,
                                                                                               re.S)]
            for tr in re.findall(r"<tr>(.*?)</tr>", body, re.S)]


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
        ["i1_a01_embedding.py", "ok", "cpu: test", "ran", "9", "I.1.A01"],
        ["i1_a02_reuse.py", "ok", "cpu: test", "ran", "4", "I.1.A02"],
    ]
    assert all(re.fullmatch(r"\d+\.\d\d s", r[2]) for r in first)
    html = (root / "site/report/index.html").read_text(encoding="utf-8")
    assert '<h1 id="run-report">Run report</h1>' in html
    assert "2 checks, 2 ran for this build" in html and "13 claims verified" in html
    assert '<a href="../problems/I.1.A01/">I.1.A01</a>' in html
    assert "Run report" in (root / "site/index.html").read_text(encoding="utf-8")  # in the nav

    proc = build(root)  # warm: nothing runs, both rows come from the cache with their original run times
    assert proc.returncode == 0, proc.stderr
    second = rows(root / "site")
    assert [r[4] for r in second] == ["cache", "cache"]
    assert [r[2] for r in second] == [r[2] for r in first]
    assert "0 ran for this build" in (root / "site/report/index.html").read_text(encoding="utf-8")
