"""Shards: verify --shard K/N writes a bundle, numbook merge combines them, and the build then runs no check."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from numbook.run.runner import shard

TINY = Path(__file__).parent / "fixtures" / "tiny"


def test_shards_are_deterministic_and_cover_every_check_once() -> None:
    checks = [f"c{i}.py" for i in range(7)]
    parts = [shard(list(reversed(checks)), k, 3) for k in (1, 2, 3)]
    assert parts == [["c0.py", "c3.py", "c6.py"], ["c1.py", "c4.py"], ["c2.py", "c5.py"]]
    with pytest.raises(ValueError, match="K must be between 1 and N"):
        shard(checks, 4, 3)


def _copy(tmp_path: Path, name: str) -> Path:
    root = tmp_path / name
    shutil.copytree(TINY, root)
    cfg = root / "mkdocs.yml"
    cfg.write_text(cfg.read_text(encoding="utf-8").replace('cache_dir: ""', "cache_dir: .cache/numbook"),
                   encoding="utf-8")
    return root


def _run(root: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", *args], cwd=root, capture_output=True, text=True, timeout=300,
                          check=False, env=dict(os.environ, NO_MKDOCS_2_WARNING="1", **env))


@pytest.mark.slow
def test_two_shards_merged_build_the_book_without_running_a_check(tmp_path: Path) -> None:
    a, b = _copy(tmp_path, "runner-a"), _copy(tmp_path, "runner-b")
    for k in (1, 2):
        proc = _run(a, "numbook.cli", "verify", "--shard", f"{k}/2", "--bundle", str(tmp_path / f"s{k}.json"))
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.strip().endswith(f"wrote {tmp_path / f's{k}.json'}")
    refused = _run(b, "mkdocs", "build", "--strict", NUMBOOK_CACHED_ONLY="1")
    assert refused.returncode == 1
    assert "has no result in the merged results and NUMBOOK_CACHED_ONLY forbids running it" in refused.stderr
    merged = _run(b, "numbook.cli", "merge", str(tmp_path / "s1.json"), str(tmp_path / "s2.json"))
    assert merged.returncode == 0 and merged.stdout.startswith("merged 2 results from 2 bundles")
    built = _run(b, "mkdocs", "build", "--strict", NUMBOOK_CACHED_ONLY="1")
    assert built.returncode == 0, built.stderr
    assert "numbook: 2 checks (0 ran, 2 from cache)" in built.stderr
