"""``mkdocs serve`` after a bad edit: the page shows its faults, the server keeps answering, a good edit heals it."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from test_build import A01, copy_tiny, edit

pytestmark = pytest.mark.slow


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as resp:  # noqa: S310 (a local test server)
        return str(resp.read().decode("utf-8"))


def _wait_for(url: str, want: bool, needle: str, deadline: float) -> str:
    page = ""
    while time.monotonic() < deadline:
        try:
            page = _get(url)
        except OSError:
            page = ""
        if page and (needle in page) == want:
            return page
        time.sleep(0.5)
    raise AssertionError(f"{needle!r} {'never appeared' if want else 'never went away'} at {url}")


@contextlib.contextmanager
def serving(root: Path, *args: str) -> Iterator[int]:
    """``mkdocs serve ARGS`` on the book at ``root``, on a free port (yielded), stopped afterwards."""
    port = _free_port()
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1")
    proc = subprocess.Popen([sys.executable, "-m", "mkdocs", "serve", *args, "-a", f"127.0.0.1:{port}"], cwd=root,
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        yield port
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()


def test_serve_shows_faults_on_the_page_and_recovers_on_the_next_good_edit(tmp_path: Path) -> None:
    root = copy_tiny(tmp_path)
    with serving(root, "--strict") as port:
        url = f"http://127.0.0.1:{port}/problems/I.1.A01/"
        _wait_for(url, True, "The memory of an embedding table", time.monotonic() + 120)
        edit(root, A01, "In fp32 that is [[65.5|fp32_mb]]", "In fp32 that is [[65.7|fp32_mb]]")
        page = _wait_for(url, True, "nb-faults", time.monotonic() + 60)
        assert "<code>problems/I.1.A01.md:32</code> claim 'fp32_mb' reads 65.7, checks/i1_a01_embedding.py " \
               "computed 65.536" in page
        edit(root, A01, "In fp32 that is [[65.7|fp32_mb]]", "In fp32 that is [[65.5|fp32_mb]]")
        _wait_for(url, False, "nb-faults", time.monotonic() + 60)


def test_serve_dirty_rebuilds_a_page_whose_check_changed_though_the_page_did_not(tmp_path: Path) -> None:
    root = copy_tiny(tmp_path)
    with serving(root, "--dirty", "--no-strict") as port:
        url = f"http://127.0.0.1:{port}/problems/I.1.A01/"
        _wait_for(url, True, "The memory of an embedding table", time.monotonic() + 120)
        report = f"http://127.0.0.1:{port}/report/"   # the generated run report is written by the first build
        _wait_for(report, True, "What this build did with each check", time.monotonic() + 30)
        time.sleep(1.0)   # the watcher settles after the first build
        check = root / "checks" / "i1_a01_embedding.py"
        check.write_text(check.read_text(encoding="utf-8") + '\nprint("printed by the edited check")\n',
                         encoding="utf-8")
        _wait_for(url, True, "printed by the edited check", time.monotonic() + 60)   # only the check was edited
