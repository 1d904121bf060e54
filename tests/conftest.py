"""Shared pytest options, and the book built once for every test that reads the built site.

The book's strict build is the longest thing the suite does, and most tests do not need it. Once the tests
are collected, the book's measuring checks (header ``alone``) run first, with nothing beside them; then the
build starts in the background, the tests that read the built site run last, and everything else runs
while the book builds.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--update-golden", action="store_true", default=False,
                     help="rewrite tests/golden/*.html from what the extensions render now")


# The checks whose header says `alone` measure time: nothing may run beside them, tests included. They run
# first, into the book's result cache, before any test; the build then finds them there.
_ALONE_FIRST = """
from pathlib import Path
from numbook.cli import load_layout
from numbook.result import read_header
from numbook.runner import Runner

def alone(path):
    try:
        return read_header(path.read_text(encoding="utf-8")).alone
    except ValueError:
        return False

root = Path.cwd()
layout = load_layout(root)
runner = Runner(root, layout.checks_dir, layout.cache_dir, layout.timeout, layout.jobs, memory=layout.memory)
runner.run_many([p.name for p in sorted(runner.checks_dir.glob("*.py")) if alone(p)])
"""


class _BookBuild:
    """``mkdocs build --strict`` of the book, started in the background once the session knows it needs it
    (after its measuring checks have run, alone)."""

    def __init__(self) -> None:
        self.out = Path(tempfile.mkdtemp(prefix="numbook-site-"))
        self.log = self.out.with_name(self.out.name + ".log")
        env = dict(os.environ, NO_MKDOCS_2_WARNING="1")
        with self.log.open("wb") as log:
            # what fails here fails the build below too, which says so; so its exit code is not looked at
            subprocess.run([sys.executable, "-c", _ALONE_FIRST], cwd=ROOT, env=env, stdout=log,
                           stderr=subprocess.STDOUT, timeout=1800, check=False)
            self.proc = subprocess.Popen([sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(self.out)],
                                         cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)

    def wait(self) -> Path:
        try:
            rc = self.proc.wait(timeout=1800)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise
        assert rc == 0, self.log.read_text(encoding="utf-8", errors="replace")[-6000:]
        return self.out

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        shutil.rmtree(self.out, ignore_errors=True)
        self.log.unlink(missing_ok=True)


_BUILD: list[_BookBuild] = []


def _needs_site(item: pytest.Item) -> bool:
    return "site_dir" in getattr(item, "fixturenames", ())


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The tests that read the built site go last, in their order, so the others run while it builds."""
    items.sort(key=_needs_site)   # a stable sort: each group keeps its order


def pytest_collection_finish(session: pytest.Session) -> None:
    if os.environ.get("NUMBOOK_SITE_DIR") or session.config.option.collectonly:
        return
    if any(_needs_site(item) for item in session.items):
        _BUILD.append(_BookBuild())


def pytest_unconfigure(config: pytest.Config) -> None:
    for build in _BUILD:
        build.stop()


@pytest.fixture(scope="session")
def site_dir() -> Path:
    """The book, built with ``mkdocs build --strict`` once per test session (the site tests and the
    browser tests read the same one); ``NUMBOOK_SITE_DIR`` names a built site to use instead."""
    prebuilt = os.environ.get("NUMBOOK_SITE_DIR")
    if prebuilt:
        return Path(prebuilt)
    if not _BUILD:   # a session that did not collect this test as needing the site (a plugin's own run)
        _BUILD.append(_BookBuild())
    return _BUILD[0].wait()
