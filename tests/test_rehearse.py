"""``nox -s rehearse`` (tools/rehearse.py): every claim verified again under each condition, one row per condition.

A book whose number holds only without ``ATEN_CPU_CAPABILITY`` passes quietly and under a busy neighbour, and
fails under the forced instruction sets, with its fault printed."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

TINY = Path(__file__).parent / "fixtures" / "tiny"
TOOL = Path(__file__).resolve().parents[1] / "tools" / "rehearse.py"


def rehearse(root: Path, conditions: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(TOOL), "--root", str(root), "--conditions", conditions],
                          capture_output=True, text=True, timeout=300, check=False)


def test_a_claim_that_holds_only_on_the_default_dispatch_fails_the_rehearsal(tmp_path: Path) -> None:
    root = tmp_path / "book"
    shutil.copytree(TINY, root, ignore=shutil.ignore_patterns("site", ".cache", "__pycache__"))
    check = root / "checks" / "i1_a01_embedding.py"
    check.write_text(check.read_text(encoding="utf-8").replace(
        'value("fp32_mb", table.nbytes / 1e6)',
        'import os\nvalue("fp32_mb", table.nbytes / 1e6 * (2 if os.environ.get("ATEN_CPU_CAPABILITY") else 1))'),
        encoding="utf-8")
    ok = rehearse(root, "quiet,busy")
    assert ok.returncode == 0, ok.stdout + ok.stderr
    rows = [line.split() for line in ok.stdout.splitlines()[1:3]]   # ... checks claims faults "N s"
    assert [(r[0], r[-5], r[-3]) for r in rows] == [("quiet", "2", "0"), ("busy", "2", "0")]
    assert " spinning neighbour(s) " in ok.stdout.splitlines()[2]
    bad = rehearse(root, "quiet,avx2")
    assert bad.returncode == 1
    table = bad.stdout.splitlines()
    assert table[1].split()[0] == "quiet" and table[1].split()[-3] == "0"
    assert table[2].split()[:2] == ["avx2", "ATEN_CPU_CAPABILITY=avx2"] and table[2].split()[-3] != "0"
    assert "\navx2: faults\n" in bad.stdout
    assert "problems/I.1.A01.md:32: claim 'fp32_mb' reads 65.5" in bad.stdout
