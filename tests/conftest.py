"""Shared pytest options, and the book built once for every test that reads the built site.

The suite runs on every core (``nox -s tests`` passes ``-n auto --dist loadgroup`` to pytest-xdist).
The tests that read the built book form one group, ``book``, so that one worker builds it and reads it
while the others run the rest. The book's ``alone`` checks measure the machine, so nothing may run
beside them: the build locks the file named in ``NUMBOOK_TESTS_LOCK`` (made here, once per session)
while one runs (``numbook.alone``), and every test holds that lock shared while it runs.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from numbook import alone

ROOT = Path(__file__).resolve().parents[1]
LOCK_ENV = "NUMBOOK_TESTS_LOCK"
BOOK_GROUP = "book"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--update-golden", action="store_true", default=False,
                     help="rewrite tests/golden/*.html from what the extensions render now")


def pytest_configure(config: pytest.Config) -> None:
    """The session's lock file, made before pytest-xdist starts its workers (they inherit the variable)."""
    if hasattr(config, "workerinput") or os.environ.get(LOCK_ENV):
        return
    fd, path = tempfile.mkstemp(prefix="numbook-tests-", suffix=".lock")
    os.close(fd)
    os.environ[LOCK_ENV] = path
    config.stash[_made] = path


_made = pytest.StashKey[str]()


def pytest_unconfigure(config: pytest.Config) -> None:
    path = config.stash.get(_made, None)
    if path:
        for p in (path, f"{path}.gate"):
            Path(p).unlink(missing_ok=True)
        os.environ.pop(LOCK_ENV, None)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The tests that read the built book go to one worker, first (``--dist loadgroup``)."""
    for item in items:
        if "site_dir" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.xdist_group(BOOK_GROUP))
    items.sort(key=lambda item: "site_dir" not in getattr(item, "fixturenames", ()))   # stable: else as collected


@pytest.fixture(autouse=True)
def _off_the_cores_while_a_check_measures() -> Iterator[None]:
    """Each test runs while no ``alone`` check of the book's build runs (and the build waits for it)."""
    path = os.environ.get(LOCK_ENV)
    if not path:
        yield
        return
    with alone.shared(path):
        yield


@pytest.fixture(scope="session")
def site_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The book, built with ``mkdocs build --strict`` once per test session (the site tests and the
    browser tests read the same one); ``NUMBOOK_SITE_DIR`` names a built site to use instead."""
    prebuilt = os.environ.get("NUMBOOK_SITE_DIR")
    if prebuilt:
        return Path(prebuilt)
    out = tmp_path_factory.mktemp("site")
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1")
    if os.environ.get(LOCK_ENV):
        env[alone.ALONE_LOCK_ENV] = os.environ[LOCK_ENV]   # its alone checks keep the other workers' tests off
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(out)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=1800, check=False)
    assert proc.returncode == 0, proc.stderr[-6000:]
    return out
