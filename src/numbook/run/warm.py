"""The warm parent: a process that imported the heavy libraries once and forks one child per check.

Every check imports torch, and on a 2-core machine that import costs about as much as the check
itself (1.3-1.8 s of the 2-4 s most checks take). The runner therefore starts, once, a process

    python -X utf8 -m numbook.run.warm torch numpy

that imports the libraries named (only installed packages: never a project file, whose reads the
sandbox must see, and never a library that reads its settings from the environment at import, such
as matplotlib) and then waits for requests on its standard input, one JSON object per line:

    {"id": 7, "check": "/abs/checks/x.py", "cwd": "/tmp/numbook-x/work", "env": {...},
     "stdout": "/tmp/numbook-x/stdout.txt", "stderr": "/tmp/numbook-x/stderr.txt"}

For each it forks a child that becomes what ``python -X utf8 -m numbook.run.sandbox CHECK`` would be:
its own session (so the runner can kill its process group on a timeout), the check's folder,
exactly the environment the runner built (the parent's is dropped), its output in the two files,
standard input from /dev/null, fresh seeds for the random generators a fresh interpreter would
seed from the operating system, and then the sandbox's ``main``: memory limit, audit hook, the
check as ``__main__``. The parent answers ``{"id": 7, "pid": N}`` when the child exists and
``{"id": 7, "rc": R}`` when it has ended (R as ``subprocess`` gives it: negative for a signal).

The parent is single-threaded (a fork copies only the calling thread, so no lock can be held by
a thread that is gone) and ends when its standard input closes. It initialises no GPU: a check
that needs one runs in a fresh process, as does any check whose header passes environment
variables through, since the libraries here read theirs when they were imported.

The runner's side is :class:`WarmParent` (one started process and the thread that reads its
answers) and :func:`parent`, which starts one per environment and set of libraries and shares it
between the runners and threads of a process; every one is closed when the process exits.
``NUMBOOK_WARM=0`` (or the older name ``NUMBOOK_ZYGOTE=0``) runs every check in a fresh interpreter.

:func:`run_notebook` runs a notebook's cells in one IPython shell, as a kernel does: the
run-it-yourself notebooks (numbook.run.standalone) call it from a script the sandbox runs like a check.
This module imports nothing else of numbook: it runs in the check's process.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

__all__ = ["main", "run_notebook", "WarmParent", "parent", "close_all", "switched_off", "WARM_ENV", "OLD_WARM_ENV"]

WARM_ENV = "NUMBOOK_WARM"
"""Set to 0 to run every check in a fresh interpreter instead of a child of the warm parent."""
OLD_WARM_ENV = "NUMBOOK_ZYGOTE"
"""The older name of WARM_ENV, still read where WARM_ENV is not set."""


# -- the warm parent's process ----------------------------------------------------------------------------------

def _child(req: dict[str, Any]) -> None:
    """In the forked child: become the check's process and run it; never returns."""
    code = 1
    try:
        os.close(_PROTO)   # the answers are the parent's to write
        os.setsid()
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        for fd, path in ((1, req["stdout"]), (2, req["stderr"])):
            out = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            os.dup2(out, fd)
            os.close(out)
        os.close(null)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        os.chdir(req["cwd"])
        os.environ.clear()
        os.environ.update(req["env"])
        import random

        tempfile.tempdir = None   # TMPDIR is the check's now: tempfile must read it again
        random.seed()             # a fresh interpreter seeds from the OS; a fork would share its parent's draw
        numpy = sys.modules.get("numpy")
        if numpy is not None:
            numpy.random.seed()
        import numbook.run.sandbox as sandbox

        try:
            sandbox.main([req["check"]])
            code = 0
        except SystemExit as exc:
            if exc.code is None:
                code = 0
            elif isinstance(exc.code, int):
                code = exc.code
            else:
                print(exc.code, file=sys.stderr)
                code = 1
    except BaseException:   # the machinery itself failed: say so where the runner reads the check's errors
        with contextlib.suppress(BaseException):
            import traceback

            traceback.print_exc()
    finally:
        # what an interpreter does when it ends: join the threads the check started, then run its exit
        # handlers (numbook.check writes the check's values in one)
        with contextlib.suppress(BaseException):
            threading._shutdown()  # type: ignore[attr-defined]
        with contextlib.suppress(BaseException):
            atexit._run_exitfuncs()
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(BaseException):
                stream.flush()
        os._exit(code)


def _lines(text: str) -> list[str]:
    return text.splitlines(keepends=True)


def run_notebook(cells: list[str], out: str) -> None:
    """Run a notebook's code cells in order in one IPython shell, as a Jupyter kernel runs them, and
    write each cell's outputs as nbformat 4 data (stream text, and the value of a last expression as
    an execute_result formatted by IPython) to ``out``; a cell that raises ends the run with its error."""
    from IPython.core.displayhook import DisplayHook
    from IPython.core.interactiveshell import InteractiveShell
    from IPython.utils.capture import capture_output

    results: list[dict[str, Any]] = []

    # IPython is typed where the book's environment has it, Any where the lint session's has none: both pass
    class KernelDisplayHook(DisplayHook):  # type: ignore[misc,unused-ignore]  # kept, as ipykernel's hook publishes
        def start_displayhook(self) -> None:
            pass

        def write_output_prompt(self) -> None:
            pass

        def write_format_data(self, format_dict: dict[str, Any], md_dict: dict[str, Any] | None = None) -> None:
            results.append({"output_type": "execute_result", "execution_count": self.prompt_count,
                            "data": {k: _lines(v) if isinstance(v, str) else v for k, v in format_dict.items()},
                            "metadata": md_dict or {}})

        def finish_displayhook(self) -> None:
            pass

    shell = InteractiveShell.instance(displayhook_class=KernelDisplayHook, colors="NoColor")
    done: list[dict[str, Any]] = []
    error = None
    for source in cells:
        results.clear()
        with capture_output() as cap:
            run = shell.run_cell(source, store_history=True)  # type: ignore[no-untyped-call,unused-ignore]
        outputs: list[dict[str, Any]] = []
        for name, text in (("stdout", cap.stdout), ("stderr", cap.stderr)):
            if text and not (name == "stdout" and run.error_in_exec is not None):   # stdout then holds the traceback
                outputs.append({"output_type": "stream", "name": name, "text": _lines(text)})
        outputs += [{"output_type": "display_data", "data": o.data, "metadata": o.metadata or {}} for o in cap.outputs]
        outputs += results
        done.append({"execution_count": run.execution_count, "outputs": outputs})
        exc = run.error_in_exec or run.error_before_exec
        if exc is not None:
            error = f"{type(exc).__name__}: {exc}"
            break
    with open(out, "w", encoding="utf-8") as fh:
        json.dump({"cells": done, "error": error}, fh)


_PROTO = 1   # the fd the answers go to: standard output as started, moved off fd 1 by main()


def _say(obj: dict[str, Any]) -> None:
    data = (json.dumps(obj) + "\n").encode()
    while data:
        data = data[os.write(_PROTO, data):]


def main(argv: list[str] | None = None) -> None:
    global _PROTO
    names = sys.argv[1:] if argv is None else argv
    # answers go to a copy of standard output; fd 1 itself goes to /dev/null, so that a library that
    # prints while it is imported cannot write into the answers
    sys.stdout.flush()
    _PROTO = os.dup(1)
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 1)
    os.close(null)
    loaded = []
    for name in names:
        try:
            importlib.import_module(name)
            loaded.append(name)
        except Exception:   # noqa: BLE001 - a library that does not import is imported by the check, or not
            pass
    _say({"ready": loaded})
    children: dict[int, Any] = {}
    pending = b""
    stdin = sys.stdin.fileno()
    while True:
        readable, _, _ = select.select([stdin], [], [], 0.02 if children else 1.0)
        if readable:
            chunk = os.read(stdin, 1 << 16)
            if not chunk:
                break
            pending += chunk
            while b"\n" in pending:
                line, pending = pending.split(b"\n", 1)
                req = json.loads(line)
                pid = os.fork()
                if pid == 0:
                    _child(req)
                children[pid] = req["id"]
                _say({"id": req["id"], "pid": pid})
        while children:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            ident = children.pop(pid, None)
            if ident is not None:
                _say({"id": ident, "rc": os.waitstatus_to_exitcode(status)})
    for pid in children:   # the runner is gone: so are its checks
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)



# -- the runner's side ------------------------------------------------------------------------------------------

def switched_off() -> bool:
    """Whether WARM_ENV (or, where it is not set, OLD_WARM_ENV) is 0: every check runs in a fresh interpreter."""
    return os.environ.get(WARM_ENV, os.environ.get(OLD_WARM_ENV)) == "0"


class WarmParent:
    """The runner's side of one warm parent: the process, and the answers to its requests, shared by the threads
    that run checks."""

    def __init__(self, env: dict[str, str], preload: tuple[str, ...]) -> None:
        # `python -m` puts its working folder first on sys.path while the preload is imported: an empty folder
        # of its own, so that no file left in a shared one (a numpy.py in /tmp) can stand in for a library
        self.home = tempfile.mkdtemp(prefix="numbook-warm-")
        try:
            self.proc = subprocess.Popen([sys.executable, "-X", "utf8", "-m", "numbook.run.warm", *preload],
                                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                         env=env, cwd=self.home, start_new_session=True)
        except OSError:
            shutil.rmtree(self.home, ignore_errors=True)
            raise
        assert self.proc.stdout is not None and self.proc.stdin is not None
        first = self.proc.stdout.readline()
        self.ready = bool(first) and "ready" in json.loads(first)
        self._write = threading.Lock()
        self._cond = threading.Condition()
        self._replies: dict[int, dict[str, Any]] = {}
        self._next = 0
        self.alive = self.ready
        if self.ready:
            threading.Thread(target=self._read, name="numbook-warm-parent", daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            reply = json.loads(line)
            with self._cond:
                self._replies.setdefault(reply["id"], {}).update(reply)
                self._cond.notify_all()
        with self._cond:
            self.alive = False
            self._cond.notify_all()
        self.proc.stdout.close()   # the parent is gone: its pipe is this thread's to close

    def start(self, cwd: Path, env: dict[str, str], stdout: Path, stderr: Path, check: Path | str
              ) -> tuple[int, int] | None:
        """(request id, pid) of a forked child running ``check`` in ``cwd``; None where the parent is gone."""
        with self._cond:
            if not self.alive:
                return None
            self._next += 1
            ident = self._next
        req = {"id": ident, "cwd": str(cwd), "env": env, "stdout": str(stdout), "stderr": str(stderr),
               "check": str(check)}
        try:
            with self._write:
                assert self.proc.stdin is not None
                self.proc.stdin.write((json.dumps(req) + "\n").encode())
                self.proc.stdin.flush()
        except OSError:
            return None
        with self._cond:
            self._cond.wait_for(lambda: "pid" in self._replies.get(ident, {}) or not self.alive)
            pid = self._replies.get(ident, {}).get("pid")
        return None if pid is None else (ident, int(pid))

    def wait(self, ident: int, timeout: float | None) -> int | None:
        """The child's exit code (negative for a signal); None on a timeout or when the parent is gone.

        ``ident`` is one that :meth:`start` answered with a pid: its replies are kept until its exit code is read."""
        with self._cond:
            replies = self._replies[ident]
            self._cond.wait_for(lambda: "rc" in replies or not self.alive, timeout=timeout)
            rc = replies.get("rc")
            if rc is not None:
                del self._replies[ident]
        return None if rc is None else int(rc)

    def close(self, grace: float = 5.0) -> None:
        """Close its input (it ends by itself when it sees that), and kill it if it has not ended after ``grace`` s."""
        with contextlib.suppress(OSError):   # a flush into a pipe whose reader died
            assert self.proc.stdin is not None
            self.proc.stdin.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=grace)
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()   # reaped here: a Popen dropped while its process runs warns (a ResourceWarning)
        if not self.ready:   # no reader thread was started to close its answers' pipe at the end
            assert self.proc.stdout is not None
            self.proc.stdout.close()
        shutil.rmtree(self.home, ignore_errors=True)


_PARENTS: dict[str, WarmParent] = {}
_PARENTS_GUARD = threading.Lock()


def parent(env: dict[str, str], preload: tuple[str, ...]) -> WarmParent | None:
    """The warm parent for this environment and these libraries (started on first use, shared by every runner of
    the process); None where it does not start or is not ready."""
    stamp = json.dumps([sys.executable, env, preload], sort_keys=True)
    with _PARENTS_GUARD:
        warm = _PARENTS.get(stamp)
        if warm is None or not warm.alive:
            if warm is not None:
                warm.close()
            try:
                warm = WarmParent(env, preload)
            except (OSError, ValueError):
                return None
            if not warm.ready:
                warm.close()
                return None
            if not _PARENTS:
                atexit.register(close_all)
            _PARENTS[stamp] = warm
        return warm


def close_all() -> None:
    """Close every warm parent of this process (at its exit)."""
    with _PARENTS_GUARD:
        for warm in _PARENTS.values():
            warm.close()
        _PARENTS.clear()


if __name__ == "__main__":
    main()
