"""Shared pytest options, and the book built once for every test that reads the built site.

The suite runs on every core (``nox -s tests`` passes ``-n auto`` to pytest-xdist). One strict build of
the book serves every test that reads the built site, on every worker. It starts in the background as
soon as a worker has collected a test that needs it, and those tests run last, so the other tests run
while the book builds; a test that comes to need the site before the build has finished waits for it.

The book's ``alone`` checks measure the machine, so nothing may run beside them: the build holds the lock
file of the session exclusively while one runs (``NUMBOOK_ALONE_LOCK``, ``numbook.alone``), and every
test holds it shared while it runs.

The session's shared folder (``NUMBOOK_TESTS_DIR``, made once by the first pytest process; pytest-xdist's
workers inherit it) holds the lock file and the build: ``site/``, ``build.log``, ``build.pid`` and, once the
build has ended, ``build.rc``.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from numbook import alone

ROOT = Path(__file__).resolve().parents[1]
SHARED_ENV = "NUMBOOK_TESTS_DIR"
BUILD_TIMEOUT = 1800   # seconds: a cold build on 2 cores takes about 4 minutes
# the build, and the file its exit code goes to once it has ended (written by the build's own shell, so that
# it is written even when the worker that started the build has finished its tests and exited)
_BUILD = ('"$0" -m mkdocs build --strict -d "$1/site" > "$1/build.log" 2>&1; '
          'echo $? > "$1/build.rc.tmp"; mv "$1/build.rc.tmp" "$1/build.rc"')

_made = pytest.StashKey[str]()


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--update-golden", action="store_true", default=False,
                     help="rewrite tests/golden/*.html from what the extensions render now")


def _shared() -> Path:
    return Path(os.environ[SHARED_ENV])


def _lock() -> str:
    return str(_shared() / "machine.lock")


def pytest_configure(config: pytest.Config) -> None:
    """The session's shared folder, made before pytest-xdist starts its workers (they inherit the variable)."""
    if hasattr(config, "workerinput") or os.environ.get(SHARED_ENV):
        return
    path = tempfile.mkdtemp(prefix="numbook-tests-")
    os.environ[SHARED_ENV] = path
    config.stash[_made] = path


def pytest_unconfigure(config: pytest.Config) -> None:
    """The first process ends last: it stops a build still running (a session stopped early) and removes the folder."""
    path = config.stash.get(_made, None)
    if not path:
        return
    pid = Path(path) / "build.pid"
    if pid.is_file() and not (Path(path) / "build.rc").exists():
        with contextlib.suppress(ProcessLookupError, PermissionError, ValueError):
            os.killpg(int(pid.read_text(encoding="utf-8")), signal.SIGKILL)
    shutil.rmtree(path, ignore_errors=True)
    os.environ.pop(SHARED_ENV, None)


def _needs_site(item: pytest.Item) -> bool:
    return "site_dir" in getattr(item, "fixturenames", ())


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The tests that read the built book run last (a stable sort: the others keep their order)."""
    items.sort(key=_needs_site)


def _start_build() -> None:
    """Start the book's strict build in the background, unless a worker of this session started it already."""
    shared = _shared()
    try:
        os.close(os.open(shared / "build.pid", os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        return
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1")
    env[alone.ALONE_LOCK_ENV] = _lock()   # its alone checks keep every test of the session off the machine
    proc = subprocess.Popen(["sh", "-c", _BUILD, sys.executable, str(shared)], cwd=ROOT, env=env,
                            stdin=subprocess.DEVNULL, start_new_session=True)
    (shared / "build.pid").write_text(str(proc.pid), encoding="utf-8")


def pytest_collection_finish(session: pytest.Session) -> None:
    if os.environ.get("NUMBOOK_SITE_DIR") or session.config.option.collectonly or SHARED_ENV not in os.environ:
        return
    if any(_needs_site(item) for item in session.items):
        _start_build()


@pytest.fixture(autouse=True)
def _off_the_cores_while_a_check_measures() -> Iterator[None]:
    """Each test runs while no ``alone`` check of the book's build runs (and the build waits for it)."""
    if SHARED_ENV not in os.environ:
        yield
        return
    with alone.shared(_lock()):
        yield


@pytest.fixture(scope="session")
def site_dir() -> Path:
    """The book, built with ``mkdocs build --strict`` once per test session and read by every worker (the site
    tests and the browser tests); ``NUMBOOK_SITE_DIR`` names a built site to use instead."""
    prebuilt = os.environ.get("NUMBOOK_SITE_DIR")
    if prebuilt:
        return Path(prebuilt)
    _start_build()   # started at collection already, unless this test asked for the site some other way
    shared = _shared()
    deadline = time.monotonic() + BUILD_TIMEOUT
    while not (shared / "build.rc").exists():
        if time.monotonic() > deadline:
            pytest.fail(f"the book's build did not end in {BUILD_TIMEOUT} s (its log: {shared / 'build.log'})")
        time.sleep(0.5)
    rc = int((shared / "build.rc").read_text(encoding="utf-8"))
    log = (shared / "build.log").read_text(encoding="utf-8", errors="replace")
    assert rc == 0, f"mkdocs build --strict of the book ended with {rc}:\n{log[-6000:]}"
    return shared / "site"
