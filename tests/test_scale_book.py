"""The scale test's generated book (tools/scale_book.py) is a real book of this project's kind: it verifies and
builds strict, and each page carries the navigation of its own chapter only (navigation.prune), so a page does
not grow with the book."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent


def scale_book() -> Any:
    spec = importlib.util.spec_from_file_location("scale_book", ROOT / "tools" / "scale_book.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.slow
def test_a_generated_book_builds_strict_and_a_page_lists_only_its_own_chapters_problems(tmp_path: Path) -> None:
    sb = scale_book()
    root = tmp_path / "book"
    sb.make_book(root, 30)              # three chapters of ten
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1")
    verify = subprocess.run([sys.executable, "-m", "numbook.cli", "verify", "--no-progress", "--record-times"],
                            cwd=root, env=env, capture_output=True, text=True, timeout=600)
    assert verify.returncode == 0, verify.stdout[-2000:] + verify.stderr[-2000:]
    assert "30 checks, 300 claims verified, 0 faults" in verify.stdout
    record = json.loads((root / "checks" / "runtimes.json").read_text(encoding="utf-8"))["seconds"]
    assert record["checks/i2_a02_table.py"] > record["checks/i1_a01_table.py"] + 0.3   # one check in twenty waits 0.4 s
    build = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict"], cwd=root, env=env,
                           capture_output=True, text=True, timeout=600)
    assert build.returncode == 0, build.stderr[-3000:]
    page = (root / "site" / "problems" / "I.2.A05" / "index.html").read_text(encoding="utf-8")
    assert 'href="../I.2.A06/"' in page and "I.2.A06 · Table 16" in page      # its own chapter, listed
    assert "I.1.A03 · Table 3" not in page and "I.3.A07 · Table 27" not in page   # another chapter's: not listed
    assert "md-nav__item--pruned" in page                                   # but reachable, by its first page
    index = json.loads((root / "site" / "search" / "search_index.json").read_text(encoding="utf-8"))["docs"]
    mine = [d for d in index if d["location"].startswith("problems/I.2.A05/")]
    assert [d["title"] for d in mine][:3] == ["I.2.A05 · Table 15", "Statement", "Solution"]
    assert not any("<table" in d["text"] for d in index)
