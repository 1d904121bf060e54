"""The machine to itself: a lock that keeps other programs off the cores while an ``alone`` check measures.

Inside one build the runner already runs ``alone`` checks one at a time with nothing beside them. Other
programs on the same machine (the test suite's other workers, a second build) do not know that. When
``NUMBOOK_ALONE_LOCK`` names a file, the runner holds it exclusively while an ``alone`` check runs
(:func:`exclusive`), and a program that wraps its own work in :func:`shared` waits for that check to
finish before it starts, and is waited for before the check starts.

Two files make the lock fair: ``PATH`` is held shared by the work that runs, and ``PATH.gate`` is held
by whoever wants it exclusively, so that a stream of shared holders taking turns cannot starve it.
``flock`` locks belong to an open file, so they end with the process that held them, even when it is
killed.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator

__all__ = ["ALONE_LOCK_ENV", "exclusive", "shared"]

ALONE_LOCK_ENV = "NUMBOOK_ALONE_LOCK"


@contextlib.contextmanager
def exclusive(path: str | None = None) -> Iterator[None]:
    """Hold the machine: wait until no :func:`shared` holder runs and keep new ones out until the end.

    ``path`` defaults to ``$NUMBOOK_ALONE_LOCK``; with neither, nothing is locked.
    """
    path = path if path is not None else os.environ.get(ALONE_LOCK_ENV)
    if not path:
        yield
        return
    with open(f"{path}.gate", "a") as gate, open(path, "a") as held:
        fcntl.flock(gate, fcntl.LOCK_EX)    # shared holders that come now wait at the gate
        fcntl.flock(held, fcntl.LOCK_EX)    # those already running finish first
        yield


@contextlib.contextmanager
def shared(path: str) -> Iterator[None]:
    """Run beside other shared holders, never beside an :func:`exclusive` one."""
    with open(f"{path}.gate", "a") as gate, open(path, "a") as held:
        fcntl.flock(gate, fcntl.LOCK_EX)    # waits while an exclusive holder holds or waits for the machine
        fcntl.flock(held, fcntl.LOCK_SH)
        fcntl.flock(gate, fcntl.LOCK_UN)    # through the gate: the next one may pass
        yield
