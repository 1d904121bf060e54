"""The bootstrap every check runs under: ``python -X utf8 -m numbook.sandbox CHECK.py``.

Before the check's first line it

- sets the memory limit the runner passes in ``NUMBOOK_MEMORY`` (bytes; ``RLIMIT_AS``, or
  ``RLIMIT_DATA`` for a GPU check, whose CUDA context reserves far more address space than it uses);
- installs an audit hook (``sys.addaudithook``) that
  - records every file under the project root the check opens for reading (imports included; a
    ``__pycache__/*.pyc`` counts as its source), with the hash of its content, one line per file
    written straight to the file named by ``NUMBOOK_READS`` (so a check that times out or crashes
    still leaves the list of what it read),
  - refuses, with a PermissionError, opening a file for writing, removing, renaming, creating a
    directory, copying or changing modes anywhere but the scratch directory ``NUMBOOK_SCRATCH``
    (the check's working directory and its TMPDIR),
  - refuses the network (connect, name lookups, urllib requests);
- runs the check as ``__main__`` with ``runpy.run_path``, its own folder first on ``sys.path``,
  so its traceback names its own file and lines.

An audit hook is a guard against careless checks, not a security boundary: code that means harm
can step around it (ctypes, a subprocess, a C extension). This module imports only the standard
library: it runs in the check's process.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import os
import runpy
import sys
import threading
from typing import Any

__all__ = ["file_hash", "Guard", "ROOT_ENV", "SCRATCH_ENV", "READS_ENV", "MEMORY_ENV", "CHECK_ENV", "LIMIT_KIND_ENV",
           "main"]

ROOT_ENV = "NUMBOOK_ROOT"          # the project root: reads under it are recorded
SCRATCH_ENV = "NUMBOOK_SCRATCH"    # the one folder a check may write in
READS_ENV = "NUMBOOK_READS"        # where the files read are listed: "<hash or ->\t<path>" lines
MEMORY_ENV = "NUMBOOK_MEMORY"      # bytes the check may use; empty for no limit
LIMIT_KIND_ENV = "NUMBOOK_MEMORY_LIMIT"  # "as" (address space) or "data"
CHECK_ENV = "NUMBOOK_CHECK"        # the check's name relative to the root, for messages

_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_TRUNC
_ALWAYS_WRITABLE = ("/dev/null", "/dev/shm")
# events that change the file system: event -> (verb, indexes of the path arguments, index of dir_fd or None)
_CHANGES: dict[str, tuple[str, tuple[int, ...], int | None]] = {
    "os.remove": ("remove", (0,), 1),
    "os.rmdir": ("remove", (0,), 1),
    "os.rename": ("rename", (0, 1), 2),
    "os.mkdir": ("create the directory", (0,), 2),
    "os.link": ("link to", (1,), 3),
    "os.symlink": ("create the link", (1,), 2),
    "os.truncate": ("truncate", (0,), None),
    "os.chmod": ("change the mode of", (0,), 2),
    "os.chown": ("change the owner of", (0,), 3),
    "os.utime": ("change the times of", (0,), 3),
    "os.chflags": ("change the flags of", (0,), None),
    "os.lchflags": ("change the flags of", (0,), None),
    "os.lchmod": ("change the mode of", (0,), None),
    "os.lchown": ("change the owner of", (0,), None),
    "os.mkfifo": ("create", (0,), 2),
    "os.mknod": ("create", (0,), 3),
    "os.setxattr": ("change the attributes of", (0,), None),
    "os.removexattr": ("change the attributes of", (0,), None),
    "shutil.copyfile": ("write", (1,), None),
    "shutil.copymode": ("change the mode of", (1,), None),
    "shutil.copystat": ("change the mode of", (1,), None),
    "shutil.copytree": ("write", (1,), None),
    "shutil.move": ("move", (0, 1), None),
    "shutil.rmtree": ("remove", (0,), 1),
    "shutil.chown": ("change the owner of", (0,), None),
    "shutil.make_archive": ("write", (0,), None),
    "shutil.unpack_archive": ("write", (1,), None),
}
_NETWORK = {"socket.connect", "socket.sendto", "socket.sendmsg", "socket.getaddrinfo", "socket.gethostbyname",
            "socket.gethostbyaddr", "socket.getnameinfo", "urllib.Request", "http.client.connect",
            "ftplib.connect", "smtplib.connect", "poplib.connect", "imaplib.open", "nntplib.connect",
            "telnetlib.Telnet.open", "webbrowser.open"}


def _text(path: Any) -> str | None:
    """A path argument as text; None for a file descriptor or anything else."""
    if isinstance(path, int) or path is None:
        return None
    try:
        return os.fsdecode(os.fspath(path))
    except TypeError:
        return None


class Guard:
    """The audit hook of one check process."""

    def __init__(self, root: str, scratch: str, reads_fd: int | None, check: str) -> None:
        self.root = os.path.realpath(root)
        self.scratch = os.path.realpath(scratch)
        self.check = check
        self.reads_fd = reads_fd
        self.seen: set[str] = set()
        self.skip = tuple(os.path.realpath(p) for p in _library_dirs())
        self.busy = threading.local()

    # -- paths -------------------------------------------------------------------------------
    def _abs(self, path: str, dir_fd: Any = None) -> str:
        if not os.path.isabs(path) and isinstance(dir_fd, int) and dir_fd >= 0:
            with contextlib.suppress(OSError):
                path = os.path.join(os.readlink(f"/proc/self/fd/{dir_fd}"), path)
        return os.path.abspath(path)

    @staticmethod
    def _under(path: str, folder: str) -> bool:
        return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)

    def _shown(self, path: str) -> str:
        return os.path.relpath(path, self.root) if self._under(path, self.root) else path

    def _writable(self, path: str) -> bool:
        real = os.path.realpath(path)
        return self._under(real, self.scratch) or any(self._under(real, d) for d in _ALWAYS_WRITABLE)

    def _refuse_write(self, verb: str, path: str) -> None:
        raise PermissionError(
            f"numbook: check '{self.check}' may not {verb} {self._shown(path)}: a check writes only in its "
            "scratch directory (its working directory and TMPDIR), which the runner deletes afterwards")

    # -- reads -------------------------------------------------------------------------------
    def _record(self, path: str) -> None:
        if self.reads_fd is None or path in self.seen:
            return
        if not self._under(path, self.root) or self._under(path, self.scratch) or path.startswith(self.skip):
            return
        self.seen.add(path)
        if path.endswith(".pyc") and os.sep + "__pycache__" + os.sep in path:
            try:
                src = importlib.util.source_from_cache(path)
            except ValueError:
                src = None
            if src and os.path.exists(src):
                self._record(src)
                return
        digest = file_hash(path)
        line = f"{digest or '-'}\t{os.path.relpath(path, self.root)}\n"
        os.write(self.reads_fd, line.encode("utf-8", "surrogateescape"))

    # -- the hook ----------------------------------------------------------------------------
    def __call__(self, event: str, args: tuple[Any, ...]) -> None:
        if event == "open":
            self._open(args)
        elif event in _CHANGES:
            verb, idxs, fd_idx = _CHANGES[event]
            dir_fd = args[fd_idx] if fd_idx is not None and len(args) > fd_idx else None
            for i in idxs:
                p = _text(args[i]) if len(args) > i else None
                if p is not None:
                    full = self._abs(p, dir_fd)
                    if not self._writable(full):
                        self._refuse_write(verb, full)
        elif event in _NETWORK:
            what = args[1] if event == "socket.connect" and len(args) > 1 else (args[0] if args else "")
            raise PermissionError(
                f"numbook: checks may not use the network ({event} {what!r}): a check computes from files in "
                "the project, so that its result can be cached and reproduced")

    def _open(self, args: tuple[Any, ...]) -> None:
        path = _text(args[0]) if args else None
        if path is None:
            return
        mode = args[1] if len(args) > 1 else None
        flags = args[2] if len(args) > 2 else 0
        writes = bool(isinstance(flags, int) and flags & _WRITE_FLAGS) or (
            isinstance(mode, str) and any(c in mode for c in "wax+"))
        full = self._abs(path)
        if writes:
            if not self._writable(full):
                self._refuse_write("write", full)
            return
        if getattr(self.busy, "on", False):   # the hook's own reads while hashing
            return
        self.busy.on = True
        try:
            self._record(os.path.normpath(full))
        finally:
            self.busy.on = False


def _library_dirs() -> list[str]:
    """Folders of the interpreter and installed packages: never project files, even in a venv in the project."""
    import sysconfig

    out = {sys.prefix, sys.base_prefix, sys.exec_prefix}
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        path = sysconfig.get_paths().get(key)
        if path:
            out.add(path)
    return sorted(out)


def file_hash(path: str) -> str | None:
    """sha256 of a file's content (first 20 hex digits); None where it does not exist or is no file."""
    try:
        with open(path, "rb") as fh:
            return hashlib.file_digest(fh, "sha256").hexdigest()[:20]
    except (IsADirectoryError, FileNotFoundError, NotADirectoryError):
        return None
    except OSError:
        return "unreadable"


def _limit_memory() -> None:
    raw = os.environ.get(MEMORY_ENV, "")
    if not raw:
        return
    import resource

    limit = int(raw)
    which = resource.RLIMIT_DATA if os.environ.get(LIMIT_KIND_ENV) == "data" else resource.RLIMIT_AS
    _soft, hard = resource.getrlimit(which)
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    resource.setrlimit(which, (limit, hard))


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        sys.exit("usage: python -m numbook.sandbox CHECK.py")
    check = os.path.abspath(args[0])
    root = os.environ.get(ROOT_ENV) or os.path.dirname(check)
    scratch = os.environ.get(SCRATCH_ENV) or os.getcwd()
    reads = os.environ.get(READS_ENV)
    _limit_memory()
    sys.dont_write_bytecode = True
    fd = os.open(reads, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600) if reads else None
    guard = Guard(root, scratch, fd, os.environ.get(CHECK_ENV) or os.path.relpath(check, root))
    sys.argv = [check]
    sys.path[0] = os.path.dirname(check)   # as `python CHECK.py` would have it
    sys.addaudithook(guard)
    try:
        runpy.run_path(check, run_name="__main__")
    except SystemExit:
        raise
    except BaseException as exc:  # print the traceback from the check's own frames on, as `python CHECK.py` would
        import traceback

        tb = exc.__traceback__
        while tb is not None and tb.tb_frame.f_code.co_filename != check:
            tb = tb.tb_next
        traceback.print_exception(type(exc), exc, tb or exc.__traceback__)
        sys.exit(1)


if __name__ == "__main__":
    main()
