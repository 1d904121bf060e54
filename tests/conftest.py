"""Shared pytest options, and the book built once for every test that reads the built site."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--update-golden", action="store_true", default=False,
                     help="rewrite tests/golden/*.html from what the extensions render now")


@pytest.fixture(scope="session")
def site_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The book, built with ``mkdocs build --strict`` once per test session (the site tests and the
    browser tests read the same one); ``NUMBOOK_SITE_DIR`` names a built site to use instead."""
    prebuilt = os.environ.get("NUMBOOK_SITE_DIR")
    if prebuilt:
        return Path(prebuilt)
    out = tmp_path_factory.mktemp("site")
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1")
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(out)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=1800, check=False)
    assert proc.returncode == 0, proc.stderr[-6000:]
    return out
