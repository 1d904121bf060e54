"""The bootstrap every check runs under: ``python -X utf8 -m numbook.run.sandbox CHECK.py``.

Before the check's first line it

- sets the memory limit the runner passes in ``NUMBOOK_MEMORY`` (bytes; ``RLIMIT_AS``, or
  ``RLIMIT_DATA`` for a GPU check, whose CUDA context reserves far more address space than it uses);
- installs an audit hook (``sys.addaudithook``) that
  - records every file the check opens for reading (imports included; a ``__pycache__/*.pyc``
    counts as its source), with the hash of its content, and every folder it lists (``os.listdir``,
    ``os.scandir``, and so ``glob``, ``os.walk`` and ``Path.iterdir``), with the hash of its sorted
    names, one line each written straight to the file named by ``NUMBOOK_READS`` (so a check that
    times out or crashes still leaves the list of what it read). Files outside the project are
    recorded by their absolute path; left out are the scratch directory, the system (/usr, /etc,
    /proc, /sys, /dev, ...) and the installed software (the interpreter, site-packages, numbook
    itself), which the versions and the device in the cache key stand for, and the listings the
    import system makes of the folders it imports from,
  - refuses, with a PermissionError, opening a file for writing, removing, renaming, linking,
    creating a directory, copying or changing modes anywhere but the scratch directory
    ``NUMBOOK_SCRATCH`` (the check's working directory and its TMPDIR), deciding where a call lands
    after resolving its ``dir_fd`` (``os.open``'s audit event has none: ``os.open`` is wrapped to
    keep it) and its symbolic links (all but a last part the call does not follow, so a link in
    scratch may be removed or renamed), and refusing a hard link to a file outside,
  - refuses the network (connect, name lookups, urllib requests); a check whose header says
    ``processes=N`` may reach loopback addresses (127.0.0.0/8, ::1, localhost) and Unix sockets in its
    scratch directory, nothing else;
- for a ``processes=N`` check (``NUMBOOK_PROCESSES``), lets it start at most N processes through
  ``multiprocessing`` (a check without the header none), runs each of them under the same guard (a
  spawned worker installs it before it imports anything of the check: :func:`worker`; a forked one
  inherits it) and writing to the same list of reads, and moves the check into a network namespace of
  its own where only the loopback interface is up, so that even the C++ of gloo reaches no other
  address (where the kernel refuses a new namespace, the audit hook alone stands guard);
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
import stat
import sys
import threading
from typing import Any

__all__ = ["file_hash", "listing_hash", "Guard", "ROOT_ENV", "SCRATCH_ENV", "READS_ENV", "MEMORY_ENV", "CHECK_ENV",
           "LIMIT_KIND_ENV", "PROCESSES_ENV", "main", "worker"]

ROOT_ENV = "NUMBOOK_ROOT"          # the project root: reads under it are recorded
SCRATCH_ENV = "NUMBOOK_SCRATCH"    # the one folder a check may write in
READS_ENV = "NUMBOOK_READS"        # where the files read are listed: "<hash or ->\t<path>" lines
MEMORY_ENV = "NUMBOOK_MEMORY"      # bytes the check may use; empty for no limit
LIMIT_KIND_ENV = "NUMBOOK_MEMORY_LIMIT"  # "as" (address space) or "data"
CHECK_ENV = "NUMBOOK_CHECK"        # the check's name relative to the root, for messages
PROCESSES_ENV = "NUMBOOK_PROCESSES"  # how many processes the check may start (its header's processes=N)

_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_TRUNC
_ALWAYS_WRITABLE = ("/dev/null", "/dev/shm")
# events that change the file system: event -> (verb, indexes of the path arguments, index of the dir_fd of each
# path or None, whether the call follows a symbolic link in the path's last part)
_CHANGES: dict[str, tuple[str, tuple[int, ...], tuple[int | None, ...], bool]] = {
    "os.remove": ("remove", (0,), (1,), False),
    "os.rmdir": ("remove", (0,), (1,), False),
    "os.rename": ("rename", (0, 1), (2, 3), False),
    "os.mkdir": ("create the directory", (0,), (2,), False),
    "os.link": ("link to", (0, 1), (2, 3), True),   # a hard link to a file outside would let writes reach it
    "os.symlink": ("create the link", (1,), (2,), False),
    "os.truncate": ("truncate", (0,), (None,), True),
    "os.chmod": ("change the mode of", (0,), (2,), True),
    "os.chown": ("change the owner of", (0,), (3,), True),
    "os.utime": ("change the times of", (0,), (3,), True),
    "os.chflags": ("change the flags of", (0,), (None,), True),
    "os.lchflags": ("change the flags of", (0,), (None,), False),
    "os.lchmod": ("change the mode of", (0,), (None,), False),
    "os.lchown": ("change the owner of", (0,), (None,), False),
    "os.mkfifo": ("create", (0,), (2,), False),
    "os.mknod": ("create", (0,), (3,), False),
    "os.setxattr": ("change the attributes of", (0,), (None,), True),
    "os.removexattr": ("change the attributes of", (0,), (None,), True),
    "shutil.copyfile": ("write", (1,), (None,), True),
    "shutil.copymode": ("change the mode of", (1,), (None,), True),
    "shutil.copystat": ("change the mode of", (1,), (None,), True),
    "shutil.copytree": ("write", (1,), (None,), True),
    "shutil.move": ("move", (0, 1), (None, None), False),
    "shutil.rmtree": ("remove", (0,), (1,), False),
    "shutil.chown": ("change the owner of", (0,), (None,), True),
    "shutil.make_archive": ("write", (0,), (None,), True),
    "shutil.unpack_archive": ("write", (1,), (None,), True),
}
_LISTINGS = {"os.listdir", "os.scandir"}   # glob, os.walk and Path.iterdir/glob list folders through these
_IMPORT_SYSTEM = ("<frozen importlib", "<frozen zipimport")
_PACKAGE_FINDERS = tuple(os.sep.join(("", *parts, "")) for parts in (("importlib", "metadata"), ("pkg_resources",)))
# outside the project, reads of the system and of installed software are not keyed: the Python, torch and numpy
# versions and the device are (the interpreter's and the packages' folders are found at start, see _library_dirs)
_SYSTEM = ("/proc", "/sys", "/dev", "/usr", "/lib", "/lib32", "/lib64", "/libx32", "/bin", "/sbin", "/etc", "/run",
           "/var/lib", "/var/cache", "/var/run", "/snap", "/nix/store")
_NETWORK = {"socket.connect", "socket.sendto", "socket.sendmsg", "socket.getaddrinfo", "socket.gethostbyname",
            "socket.gethostbyaddr", "socket.getnameinfo", "urllib.Request", "http.client.connect",
            "ftplib.connect", "smtplib.connect", "poplib.connect", "imaplib.open", "nntplib.connect",
            "telnetlib.Telnet.open", "webbrowser.open"}
_LOOPBACK_EVENTS = {"socket.connect", "socket.sendto", "socket.getaddrinfo", "socket.gethostbyname"}


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

    def __init__(self, root: str, scratch: str, reads_fd: int | None, check: str, processes: int = 0) -> None:
        self.processes = processes   # > 0: the check runs a process group, which talks over loopback
        self.root = os.path.realpath(root)
        self.scratch = os.path.realpath(scratch)
        self.check = check
        self.reads_fd = reads_fd
        self.seen: set[str] = set()
        tool = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))   # numbook, where installed outside
        self.skip = tuple(os.path.realpath(p) for p in _library_dirs()) + (
            () if self._under(tool, self.root) else (tool,))
        self.busy = threading.local()

    # -- paths -------------------------------------------------------------------------------
    def _abs(self, path: str, dir_fd: Any = None) -> str:
        if not os.path.isabs(path) and isinstance(dir_fd, int) and dir_fd >= 0:
            with contextlib.suppress(OSError):
                path = os.path.join(os.readlink(f"/proc/self/fd/{dir_fd}"), path)
        return os.path.abspath(path)

    @staticmethod
    def _real(path: str, follow: bool) -> str:
        """Where ``path`` lands: its links resolved, the last part's only where the call follows it."""
        if follow:
            return os.path.realpath(path)
        head, tail = os.path.split(path)
        return os.path.join(os.path.realpath(head), tail) if tail else os.path.realpath(path)

    @staticmethod
    def _under(path: str, folder: str) -> bool:
        return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)

    def _shown(self, path: str) -> str:
        return os.path.relpath(path, self.root) if self._under(path, self.root) else path

    def _writable(self, real: str) -> bool:
        return self._under(real, self.scratch) or any(self._under(real, d) for d in _ALWAYS_WRITABLE)

    def _check_write(self, verb: str, path: str, dir_fd: Any = None, follow: bool = True) -> None:
        real = self._real(self._abs(path, dir_fd), follow)
        if not self._writable(real):
            raise PermissionError(
                f"numbook: check '{self.check}' may not {verb} {self._shown(real)}: a check writes only in its "
                "scratch directory (its working directory and TMPDIR), which the runner deletes afterwards")

    # -- reads -------------------------------------------------------------------------------
    def _keyed(self, path: str) -> bool:
        """Whether a read of ``path`` is keyed: any file but the scratch directory's, the system's
        (/usr, /proc, /etc, ...) and the installed software's (the interpreter, site-packages, numbook)."""
        if self._under(path, self.scratch) or any(self._under(path, d) for d in self.skip):
            return False
        return self._under(path, self.root) or not any(self._under(path, d) for d in _SYSTEM)

    def _record(self, path: str, listing: bool = False) -> None:
        """List a file read (or a folder listed) with the hash of its content (of its sorted names)."""
        name = path.rstrip(os.sep) + os.sep if listing else path
        if self.reads_fd is None or name in self.seen or not self._keyed(path):
            return
        self.seen.add(name)
        if not listing and path.endswith(".pyc") and os.sep + "__pycache__" + os.sep in path:
            try:
                src = importlib.util.source_from_cache(path)
            except ValueError:
                src = None
            if src and os.path.exists(src):
                self._record(src)
                return
        digest = listing_hash(path) if listing else file_hash(path)
        shown = os.path.relpath(path, self.root) if self._under(path, self.root) else path
        if listing:
            shown = shown.rstrip(os.sep) + os.sep
        os.write(self.reads_fd, f"{digest or '-'}\t{shown}\n".encode("utf-8", "surrogateescape"))

    def _quietly(self, path: str, listing: bool = False) -> None:
        if getattr(self.busy, "on", False):   # the hook's own reads while hashing
            return
        self.busy.on = True
        try:
            self._record(os.path.normpath(path), listing)
        finally:
            self.busy.on = False

    # -- the hook ----------------------------------------------------------------------------
    def __call__(self, event: str, args: tuple[Any, ...]) -> None:
        if event == "open":
            self._open(args)
        elif event in _CHANGES:
            verb, idxs, fds, follow = _CHANGES[event]
            for i, fd_idx in zip(idxs, fds, strict=True):
                p = _text(args[i]) if len(args) > i else None
                if p is not None:
                    dir_fd = args[fd_idx] if fd_idx is not None and len(args) > fd_idx else None
                    self._check_write(verb, p, dir_fd, follow)
        elif event in _LISTINGS:
            self._listing(args[0] if args else None)
        elif event in _NETWORK:
            what = args[1] if event in ("socket.connect", "socket.sendto") and len(args) > 1 else (
                args[0] if args else "")
            if self.processes and event in _LOOPBACK_EVENTS and self._loopback(what):
                return
            if self.processes:
                raise PermissionError(
                    f"numbook: check '{self.check}' may reach only loopback addresses ({event} {what!r}): its "
                    "process group talks over 127.0.0.1, and a check computes from files in the project, so that "
                    "its result can be cached and reproduced")
            raise PermissionError(
                f"numbook: checks may not use the network ({event} {what!r}): a check computes from files in "
                "the project, so that its result can be cached and reproduced")

    def _loopback(self, what: Any) -> bool:
        """Whether an address (a host, a (host, port) pair, a Unix socket's path) stays on this machine."""
        import ipaddress

        host = what[0] if isinstance(what, tuple) and what else what
        if isinstance(host, bytes):
            host = host.decode("utf-8", "surrogateescape")
        if host is None or host in ("", "localhost"):
            return True
        if not isinstance(host, str):
            return False
        if isinstance(what, str) and (what.startswith("/") or what.startswith("\0")):   # a Unix socket's path
            return what.startswith("\0") or self._writable(os.path.realpath(what))
        try:
            return ipaddress.ip_address(host.split("%")[0]).is_loopback
        except ValueError:
            return False

    def _listing(self, path: Any) -> None:
        """Key a folder's listing; not the import system's own: it lists each folder it imports from, and
        importlib.metadata (pkg_resources) each folder on sys.path while it looks for installed packages."""
        try:
            caller = sys._getframe(2).f_code.co_filename
        except ValueError:
            caller = ""
        if caller.startswith(_IMPORT_SYSTEM) or any(part in caller for part in _PACKAGE_FINDERS):
            return
        if isinstance(path, int):
            try:
                folder = os.readlink(f"/proc/self/fd/{path}")
            except OSError:
                return
        else:
            text = _text(path) if path is not None else "."
            if text is None:
                return
            folder = text
        self._quietly(os.path.realpath(folder), listing=True)

    def key_listing(self, folder: str) -> None:
        """Key a folder's listing as if the check had listed it."""
        self._quietly(os.path.realpath(folder), listing=True)

    def _open(self, args: tuple[Any, ...]) -> None:
        path = _text(args[0]) if args else None
        if path is None:
            return
        mode = args[1] if len(args) > 1 else None
        flags = args[2] if len(args) > 2 else 0
        writes = bool(isinstance(flags, int) and flags & _WRITE_FLAGS) or (
            isinstance(mode, str) and any(c in mode for c in "wax+"))
        # os.open's event carries no dir_fd: the wrapper _track_dir_fd puts in os.open keeps it for the hook
        dir_fd = getattr(self.busy, "dir_fd", None) if mode is None else None
        if writes:
            self._check_write("write", path, dir_fd)
            return
        self._quietly(self._abs(path, dir_fd))

    def track_dir_fd(self) -> None:
        """Wrap ``os.open`` so that the hook sees the folder a ``dir_fd=`` names (its audit event does not)."""
        real_open = os.open
        busy = self.busy

        def open(path: Any, flags: int, mode: int = 0o777, *, dir_fd: int | None = None) -> int:  # noqa: A001
            before = getattr(busy, "dir_fd", None)
            busy.dir_fd = dir_fd
            try:
                return real_open(path, flags, mode, dir_fd=dir_fd)
            finally:
                busy.dir_fd = before

        for name in ("supports_dir_fd", "supports_fd", "supports_follow_symlinks", "supports_effective_ids"):
            group = getattr(os, name, None)
            if isinstance(group, set) and real_open in group:
                group.add(open)
        os.open = open


def _library_dirs() -> list[str]:
    """Folders of the interpreter and installed packages: never project files, even in a venv in the project."""
    import site
    import sysconfig

    out = {sys.prefix, sys.base_prefix, sys.exec_prefix}
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        path = sysconfig.get_paths().get(key)
        if path:
            out.add(path)
    with contextlib.suppress(AttributeError):   # a site module without user folders (a virtualenv's old one)
        out.add(site.getusersitepackages())
    return sorted(out)


def file_hash(path: str) -> str | None:
    """sha256 of a file's content (first 20 hex digits); None where it does not exist or is a folder."""
    try:
        st = os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError:
        return "unreadable"
    if stat.S_ISDIR(st.st_mode):
        return None
    if not stat.S_ISREG(st.st_mode):   # a pipe or a device: nothing to hash, and opening one may block
        return "special"
    try:
        with open(path, "rb") as fh:
            return hashlib.file_digest(fh, "sha256").hexdigest()[:20]
    except (IsADirectoryError, FileNotFoundError, NotADirectoryError):
        return None
    except OSError:
        return "unreadable"


def listing_hash(path: str) -> str | None:
    """sha256 of a folder's sorted names (first 20 hex digits); None where it does not exist or is no folder."""
    try:
        names = sorted(os.listdir(path))
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError:
        return "unreadable"
    data = "\0".join(names).encode("utf-8", "surrogateescape")
    return hashlib.sha256(data).hexdigest()[:20]


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


def _processes() -> int:
    try:
        return max(0, int(os.environ.get(PROCESSES_ENV) or 0))
    except ValueError:
        return 0


def _limit_processes(check: str, allowed: int) -> None:
    """Let the check start at most ``allowed`` processes through multiprocessing, each under this guard."""
    import multiprocessing.process
    import multiprocessing.spawn

    real_start = multiprocessing.process.BaseProcess.start
    started = [0]

    def start(self: Any) -> None:
        if started[0] >= allowed:
            how = (f"its header allows {allowed} (processes={allowed})" if allowed else
                   "a check that runs a process group says how many in its header: # numbook: processes=N")
            raise PermissionError(f"numbook: check '{check}' may not start another process: {how}")
        started[0] += 1
        real_start(self)

    multiprocessing.process.BaseProcess.start = start   # type: ignore[method-assign]
    real_command = multiprocessing.spawn.get_command_line

    def get_command_line(**kwds: Any) -> list[str]:
        """A spawned worker's command line: the sandbox's guard first, then multiprocessing's own start."""
        cmd = list(real_command(**kwds))
        if "-c" in cmd:
            i = cmd.index("-c") + 1
            cmd[i] = "import numbook.run.sandbox as _nb; _nb.worker(); " + cmd[i]
        return cmd

    multiprocessing.spawn.get_command_line = get_command_line


def _loopback_only() -> bool:
    """Move this process (and what it starts) into a network namespace of its own with only ``lo`` up; False
    where the kernel refuses (no privilege for a new namespace), and the audit hook alone guards the network."""
    import ctypes
    import fcntl
    import socket
    import struct

    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
    except OSError:
        return False
    clone_newnet, clone_newuser = 0x40000000, 0x10000000
    if libc.unshare(clone_newnet) != 0 and libc.unshare(clone_newuser | clone_newnet) != 0:
        return False
    try:   # bring lo up: SIOCGIFFLAGS, then SIOCSIFFLAGS with IFF_UP
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            req = struct.pack("16sh", b"lo", 0)
            flags = struct.unpack("16sh", fcntl.ioctl(sock, 0x8913, req))[1]
            fcntl.ioctl(sock, 0x8914, struct.pack("16sh", b"lo", flags | 0x1))
    except OSError:
        return False
    return True


def _guard(check: str) -> Guard:
    """The guard of this process, from the runner's environment variables."""
    root = os.environ.get(ROOT_ENV) or os.path.dirname(check)
    scratch = os.environ.get(SCRATCH_ENV) or os.getcwd()
    reads = os.environ.get(READS_ENV)
    fd = os.open(reads, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600) if reads else None
    return Guard(root, scratch, fd, os.environ.get(CHECK_ENV) or os.path.relpath(check, root), _processes())


def worker() -> None:
    """In a worker a check spawned (multiprocessing's spawn start): install the check's guard before anything
    of the check is imported. Its memory limit it inherits (resource limits survive exec), and its network
    namespace; the number of processes a worker may start in turn is none."""
    if not os.environ.get(SCRATCH_ENV):
        return
    guard = _guard(os.environ.get(CHECK_ENV) or "check")
    _limit_processes(guard.check, 0)
    guard.track_dir_fd()
    sys.addaudithook(guard)


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        sys.exit("usage: python -m numbook.run.sandbox CHECK.py")
    check = os.path.abspath(args[0])
    _limit_memory()
    sys.dont_write_bytecode = True
    guard = _guard(check)
    if guard.processes:
        os.environ["NUMBOOK_LOOPBACK_ONLY"] = "1" if _loopback_only() else "0"
        os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    _limit_processes(guard.check, guard.processes)
    sys.argv = [check]
    sys.path[0] = os.path.dirname(check)   # as `python CHECK.py` would have it
    guard.track_dir_fd()
    sys.addaudithook(guard)
    try:
        runpy.run_path(check, run_name="__main__")
    except SystemExit:
        raise
    except BaseException as exc:  # print the traceback from the check's own frames on, as `python CHECK.py` would
        import traceback

        if isinstance(exc, ModuleNotFoundError):   # the failure lasts until a module appears: key where it may
            for folder in sys.path:
                with contextlib.suppress(OSError):
                    guard.key_listing(folder or ".")
        tb = exc.__traceback__
        while tb is not None and tb.tb_frame.f_code.co_filename != check:
            tb = tb.tb_next
        traceback.print_exception(type(exc), exc, tb or exc.__traceback__)
        sys.exit(1)


if __name__ == "__main__":
    main()
