"""The tool apart from the book: numbook installed alone, in a fresh environment with no torch, builds
the tiny book strictly. The book's dependencies (torch, numpy, matplotlib, the notebook build) are
the book's dependency groups, never the tool's."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TINY = Path(__file__).parent / "fixtures" / "tiny"

# pip's and uv's words when no index answers (offline, no DNS, a proxy that refuses), as opposed to a broken package
_UNREACHABLE = ("No matching distribution found", "Could not find a version that satisfies",
                "Failed to establish a new connection", "Temporary failure in name resolution",
                "Network is unreachable", "Max retries exceeded", "ProxyError", "Connection refused",
                "Failed to fetch", "dns error")   # uv's


def _run(args: list[str | Path], **kw: object) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
    env["NO_MKDOCS_2_WARNING"] = "1"
    return subprocess.run([str(a) for a in args], capture_output=True, text=True, env=env, check=False,
                          **kw)  # type: ignore[call-overload]


@pytest.mark.slow
def test_the_tiny_book_builds_with_the_tool_alone_and_no_torch(tmp_path: Path) -> None:
    # the tool's sources only, so pip's build leaves nothing in the checkout
    tool = tmp_path / "tool"
    tool.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, tool / name)
    shutil.copytree(ROOT / "src" / "numbook", tool / "src" / "numbook",
                    ignore=shutil.ignore_patterns("__pycache__"))

    venv = tmp_path / "venv"
    py = venv / "bin" / "python"
    uv = shutil.which("uv")
    # uv where it is installed (.ci/run installs it): 4 s here where venv and pip take 30 s. Either way a fresh
    # environment of this Python with no --system-site-packages (torch may be there), and the tool from its sources
    if uv:
        made = _run([uv, "venv", "-q", "--python", sys.executable, venv], timeout=300)
    else:
        made = _run([sys.executable, "-m", "venv", venv], timeout=300)
    assert made.returncode == 0, made.stderr
    if uv:
        pip = _run([uv, "pip", "install", "-q", "--python", py, tool, "mkdocs-material>=9.5"], timeout=900)
    else:
        pip = _run([py, "-m", "pip", "install", "-q", "--disable-pip-version-check", tool, "mkdocs-material>=9.5"],
                   timeout=900)
    if pip.returncode != 0 and any(s in pip.stderr for s in _UNREACHABLE):
        pytest.skip("pip cannot reach a package index to install the tool: " + pip.stderr.strip().splitlines()[-1])
    assert pip.returncode == 0, pip.stderr[-3000:]

    probe = _run([py, "-c", "import torch"], timeout=120)
    assert probe.returncode != 0 and "No module named 'torch'" in probe.stderr, "the tool pulled in torch"

    root = tmp_path / "tiny"
    shutil.copytree(TINY, root, ignore=shutil.ignore_patterns("site", ".cache", "__pycache__"))
    proc = _run([py, "-m", "mkdocs", "build", "--strict", "-d", root / "site"], cwd=root, timeout=600)
    assert proc.returncode == 0, proc.stderr[-5000:]
    page = (root / "site/problems/I.1.A01/index.html").read_text(encoding="utf-8")
    assert 'data-claim="fp32_mb"' in page and 'tabindex="0">65.5</span> MB' in page
    assert "table (32000, 512): 16,384,000 elements, 65,536,000 bytes in fp32" in page
    assert "torch absent" in page  # the provenance stamp names what the check ran with
