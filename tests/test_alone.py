"""The machine to itself: an ``alone`` check keeps off every program that shares ``NUMBOOK_ALONE_LOCK``."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from _project import project
from numbook import alone
from numbook.runner import Runner

HOLD = """
import sys, time
from numbook import alone
how, path, hold = sys.argv[1], sys.argv[2], float(sys.argv[3])
asked = time.time()
print("asking", flush=True)
with (alone.shared(path) if how == "shared" else alone.exclusive(path)):
    entered = time.time()
    print("in", flush=True)
    time.sleep(hold)
    left = time.time()
print(asked, entered, left, flush=True)
"""


def _hold(how: str, lock: Path, seconds: float) -> subprocess.Popen[str]:
    """A process that holds the lock ``how`` for ``seconds``; it prints "asking" as it asks for it, "in"
    once it holds it, then (when it has let go) the times it asked, entered and left."""
    return subprocess.Popen([sys.executable, "-c", HOLD, how, str(lock), str(seconds)], stdout=subprocess.PIPE,
                            text=True)


def _asking(proc: subprocess.Popen[str]) -> None:
    assert proc.stdout is not None and proc.stdout.readline() == "asking\n"


def _inside(proc: subprocess.Popen[str]) -> None:
    _asking(proc)
    assert proc.stdout is not None and proc.stdout.readline() == "in\n"


def _times(proc: subprocess.Popen[str]) -> tuple[float, float, float]:
    out, _ = proc.communicate(timeout=60)
    asked, entered, left = map(float, out.splitlines()[-1].split())
    return asked, entered, left


STAMP = "import time\nfrom numbook.check import value\nvalue('t0', time.time())\n"


def test_an_alone_check_waits_for_the_shared_holders_and_another_check_does_not(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    lock = tmp_path / "machine.lock"
    monkeypatch.setenv(alone.ALONE_LOCK_ENV, str(lock))
    root = project(tmp_path, plain=STAMP, measures="# numbook: alone\n" + STAMP)
    runner = Runner(root, cache_dir=None)
    holder = _hold("shared", lock, 1.5)
    _inside(holder)
    plain = runner.result("plain.py")
    measures = runner.result("measures.py")
    done = time.time()
    _, _, left = _times(holder)
    assert plain.values["t0"] < left <= measures.values["t0"]
    assert measures.elapsed_s <= done - left + 0.01   # its time is its run's, counted once it had the machine


def test_a_shared_holder_that_comes_while_the_machine_is_held_waits_until_it_is_given_back(tmp_path: Path) -> None:
    lock = tmp_path / "machine.lock"
    held = _hold("exclusive", lock, 1.0)
    _inside(held)
    with alone.shared(str(lock)):
        entered = time.time()
    _, _, left = _times(held)
    assert entered >= left


def test_shared_holders_run_side_by_side(tmp_path: Path) -> None:
    lock = tmp_path / "machine.lock"
    first = _hold("shared", lock, 1.0)
    _inside(first)
    with alone.shared(str(lock)):
        entered = time.time()
    assert entered < _times(first)[2]


def test_a_waiting_alone_run_goes_before_shared_holders_that_come_after_it(tmp_path: Path) -> None:
    """The gate: without it, a stream of shared holders taking turns would keep the machine from an alone run."""
    lock = tmp_path / "machine.lock"
    first = _hold("shared", lock, 1.5)
    _inside(first)
    waits = _hold("exclusive", lock, 0.5)
    _asking(waits)                        # it asks while the first shared holder still runs
    time.sleep(0.1)
    later = _hold("shared", lock, 0.0)    # a shared holder that comes after it asked
    _, _, f_out = _times(first)
    _, w_in, w_out = _times(waits)
    l_asked, l_in, _ = _times(later)
    assert f_out <= w_in
    assert l_asked < w_in and l_in >= w_out, "the later shared holder went before the waiting alone run"


def test_without_a_lock_file_an_alone_run_locks_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(alone.ALONE_LOCK_ENV, raising=False)
    monkeypatch.chdir(tmp_path)
    lock = tmp_path / "machine.lock"
    holder = _hold("exclusive", lock, 1.0)
    _inside(holder)
    with alone.exclusive():
        entered = time.time()
    assert entered < _times(holder)[2]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["machine.lock", "machine.lock.gate"]   # the holder's
