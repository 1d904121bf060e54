"""Shared pytest options, and the book built once for every test that reads the built site.

The suite runs on every core (``nox -s tests`` passes ``-n auto`` to pytest-xdist). One strict build of
the book serves every test that reads the built site, on every worker. When the collected tests need it,
the build runs first, with nothing beside it: its checks use every core already, and its ``alone`` checks
measure the machine (a test beside them would slow what they time). Then the tests run, the ones that
read the site last.

The session's shared folder (``NUMBOOK_TESTS_DIR``, made once by the first pytest process; pytest-xdist's
workers inherit it) holds the build: ``site/``, ``build.log``, ``build.pid`` and, once the build has
ended, ``build.rc``.
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
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED_ENV = "NUMBOOK_TESTS_DIR"
BUILD_TIMEOUT = 1800   # seconds: a cold build on 2 cores takes about 4 minutes
_builds: list[subprocess.Popen[bytes]] = []   # the build this process started, held until it has ended
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


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    """How long the book's build took, and what numbook said of its checks and notebooks: most of a cold
    session's time, and the first thing to read when the suite got slower."""
    path = config.stash.get(_made, None)
    done = Path(path) / "build.rc" if path else None
    if done is None or not done.is_file():
        return
    shared = done.parent
    seconds = done.stat().st_mtime - (shared / "build.pid").stat().st_mtime
    log = (shared / "build.log").read_text(encoding="utf-8", errors="replace").splitlines()
    said = [ln.split(" - ", 1)[-1].strip() for ln in log
            if ("numbook: " in ln and "numbook: [" not in ln) or "Documentation built" in ln]   # not its progress
    terminalreporter.write_sep("-", "the book's strict build, shared by the tests that read the site")
    terminalreporter.write_line(f"exit {done.read_text(encoding='utf-8').strip()} after {seconds:.1f} s")
    for line in said[-3:]:
        terminalreporter.write_line(line)


def _needs_site(item: pytest.Item) -> bool:
    return "site_dir" in getattr(item, "fixturenames", ())


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The tests that read the built book run last (a stable sort: the others keep their order), so that a
    session stopped early (-x) has run the others first."""
    items.sort(key=_needs_site)


def _start_build() -> None:
    """Start the book's strict build in the background, unless a worker of this session started it already."""
    shared = _shared()
    try:
        os.close(os.open(shared / "build.pid", os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        return
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1")
    proc = subprocess.Popen(["sh", "-c", _BUILD, sys.executable, str(shared)], cwd=ROOT, env=env,
                            stdin=subprocess.DEVNULL, start_new_session=True)
    _builds.append(proc)
    (shared / "build.pid").write_text(str(proc.pid), encoding="utf-8")


def _wait_for_build() -> bool:
    """Wait until the build has ended (True), or for BUILD_TIMEOUT seconds (False)."""
    done = _shared() / "build.rc"
    deadline = time.monotonic() + BUILD_TIMEOUT
    while not done.exists():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.5)
    for proc in _builds:
        proc.wait()
    return True


def pytest_collection_finish(session: pytest.Session) -> None:
    """Every worker collects the same tests: one starts the build, and all wait for it before their first test."""
    if os.environ.get("NUMBOOK_SITE_DIR") or session.config.option.collectonly or SHARED_ENV not in os.environ:
        return
    if any(_needs_site(item) for item in session.items):
        _start_build()
        _wait_for_build()


@pytest.fixture(scope="session")
def site_dir() -> Path:
    """The book, built with ``mkdocs build --strict`` once per test session and read by every worker (the site
    tests and the browser tests); ``NUMBOOK_SITE_DIR`` names a built site to use instead."""
    prebuilt = os.environ.get("NUMBOOK_SITE_DIR")
    if prebuilt:
        return Path(prebuilt)
    _start_build()   # built before the first test already, unless this test asked for the site some other way
    shared = _shared()
    if not _wait_for_build():
        pytest.fail(f"the book's build did not end in {BUILD_TIMEOUT} s (its log: {shared / 'build.log'})")
    rc = int((shared / "build.rc").read_text(encoding="utf-8"))
    log = (shared / "build.log").read_text(encoding="utf-8", errors="replace")
    assert rc == 0, f"mkdocs build --strict of the book ended with {rc}:\n{log[-6000:]}"
    return shared / "site"
