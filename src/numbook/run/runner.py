"""Run check scripts: one sandboxed subprocess per check, with a timeout, a memory limit, a cache and a pool.

Each check runs under ``python -m numbook.run.sandbox`` (see there): in a scratch directory, with a
scrubbed environment, a memory limit, no network, no writes outside the scratch directory, and a
record of every file it read and folder it listed. Its output goes to files (the first megabyte of
its output is kept, the last of its errors); at its timeout, and after it ends, its process group is
killed and so is every process it left that escaped the group (see ``_kill_escaped``).

The cache has two phases. The *first key* hashes what is known before a run: the check's path and
source, the values of the environment variables its header declares (and of the thread settings),
the Python/torch/numpy versions, the device, its timeout and memory limit, and the cache format.
It names one cache entry, which lists every file the run read with the hash of its content (project
files by their path in the project, other files by their absolute path; the system's and the
installed software's files are left out, the versions and the device standing for them) and every
folder it listed with the hash of its sorted names; the entry serves a build only while every one of
those still has that hash (a deleted file invalidates it too). Failed runs (error, timeout, out of
memory) are cached the same way: they are not re-run until something they depend on changes. Paths
in the project are relative to its root, so a copy of the project keeps its cache. The same first
key never runs twice in one process.
"""

from __future__ import annotations

import atexit
import contextlib
import datetime as _dt
import hashlib
import importlib.metadata
import json
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import asdict, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numbook.run.sandbox as sandbox
from numbook.check import FACTS_ENV, MEASUREMENTS_ENV, PERTURB_ENV, RESULT_ENV

if TYPE_CHECKING:
    from numbook.run.frozen import GpuStatus
from numbook.core.result import (
    DEFAULT_CACHE_DIR,
    DEFAULT_MEMORY,
    DEFAULT_TIMEOUT,
    CheckHeader,
    CheckResult,
    Status,
    read_header,
)

__all__ = ["CheckResult", "CheckHeader", "Status", "Runner", "Progress", "read_header", "detect_device",
           "DEFAULT_MEMORY", "CACHE_VERSION", "CACHED_ONLY_ENV", "shard"]

CACHE_VERSION = "3"
CACHED_ONLY_ENV = "NUMBOOK_CACHED_ONLY"
"""Set (to anything) for a build that must run no check: every result comes from the cache (merged shards)."""

# passed to a check unchanged and not keyed: where things are, not what a result depends on
_PASSED = {"PATH", "HOME", "LANG", "LANGUAGE", "TZ", "TERM", "PYTHONPATH", "VIRTUAL_ENV", "LD_LIBRARY_PATH",
           "SYSTEMROOT", "CUDA_HOME", "CUDA_PATH"}
# passed and keyed: settings that can change what a check computes or measures
_KEYED = {"OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMEXPR_NUM_THREADS",
          "VECLIB_MAXIMUM_THREADS", "CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES", "CUBLAS_WORKSPACE_CONFIG",
          # the vector instructions the kernels may use, which set the order they sum in
          "ATEN_CPU_CAPABILITY", "MKL_ENABLE_INSTRUCTIONS", "MKL_CBWR", "DNNL_MAX_CPU_ISA", "ONEDNN_MAX_CPU_ISA",
          "OPENBLAS_CORETYPE", "NPY_DISABLE_CPU_FEATURES"}
_OOM = re.compile(r"MemoryError|DefaultCPUAllocator: can't allocate memory|Unable to allocate|std::bad_alloc|"
                  r"Cannot allocate memory")

Progress = Callable[[int, int, CheckResult, list[str]], None]
"""``progress(done, total, result, still_running)``: called as each check of ``run_many`` finishes."""


_SIMD = ("avx512f", "avx2", "avx", "sse4_2", "sve", "asimd")
"""Vector instruction sets, widest first: the widest a CPU has sets the kernels torch and numpy pick, and so
the order in which they sum (a logit of a batched matmul differs in its last bits between an AVX2 and an
AVX-512 machine)."""


def cpu_name(cpuinfo: Path = Path("/proc/cpuinfo")) -> str:
    """``cpu: <machine> <model> (<widest vector set>)``, as far as the system says: ``cpu: x86_64 AMD EPYC
    (avx512f)``. Two CPUs that may round differently get two names, so a result cached on one is never
    reused on the other."""
    model, flags = "", set[str]()
    try:
        text = cpuinfo.read_text(encoding="utf-8", errors="replace")
    except OSError:
        text = ""
    for line in text.splitlines():
        field, _, val = line.partition(":")
        field = field.strip().lower()
        if field == "model name" and not model:
            model = " ".join(val.split())
        elif field in ("flags", "features") and not flags:
            flags = set(val.split())
    simd = next((f for f in _SIMD if f in flags), "")
    parts = ["cpu:", platform.machine() or "unknown", model or platform.processor(), f"({simd})" if simd else ""]
    return " ".join(p for p in parts if p)


def detect_device() -> str:
    """``cuda: <name>`` where an NVIDIA GPU answers, else the CPU (:func:`cpu_name`); no torch import."""
    if os.environ.get("NUMBOOK_DEVICE"):
        return os.environ["NUMBOOK_DEVICE"]
    smi = shutil.which("nvidia-smi")
    if smi:
        try:
            out = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=10, check=False)
            first = out.stdout.strip().splitlines()[0] if out.returncode == 0 and out.stdout.strip() else ""
            if first:
                return "cuda: " + first.split(":", 1)[1].split("(")[0].strip()
        except (OSError, subprocess.SubprocessError, IndexError):
            pass
    return cpu_name()


def _versions() -> dict[str, str]:
    out = {"Python": platform.python_version()}
    for dist in ("torch", "numpy"):
        try:
            out[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            out[dist] = "absent"
    return out


_ZYGOTE_FILE = Path(sandbox.__file__).with_name("warm.py")
_MACHINERY = hashlib.sha256(Path(sandbox.__file__).read_bytes() + _ZYGOTE_FILE.read_bytes()).hexdigest()[:20]
"""How checks are run (the sandbox and the warm parent): a change to either runs every check again."""
ZYGOTE_ENV = "NUMBOOK_ZYGOTE"
"""Set to 0 to run every check in a fresh interpreter instead of a child of the warm parent (numbook.run.warm)."""
PRELOAD = ("torch", "numpy")
"""What the warm parent imports once for every check: installed libraries that read no setting at import."""


class _Zygote:
    """The runner's side of numbook.run.warm: one warm parent, shared by the threads that run checks."""

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
            threading.Thread(target=self._read, name="numbook-zygote", daemon=True).start()

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

    def start(self, cwd: Path, env: dict[str, str], stdout: Path, stderr: Path,
              **what: Any) -> tuple[int, int] | None:
        """(request id, pid) of a forked child running ``check=`` (or notebook ``cells=`` into ``out=``);
        None where the parent is gone."""
        with self._cond:
            if not self.alive:
                return None
            self._next += 1
            ident = self._next
        req = {"id": ident, "cwd": str(cwd), "env": env, "stdout": str(stdout), "stderr": str(stderr),
               **{k: str(v) if isinstance(v, Path) else v for k, v in what.items()}}
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


_RECORDS = ("inputs", "values", "figures", "sanity", "lines", "cpu_s", "units", "dtypes", "facts", "fixed", "nudges",
            "measured", "measurements")
"""What a check's result file holds (numbook.check's _write_result), each a field of CheckResult."""

_ZYGOTES: dict[str, _Zygote] = {}
_ZYGOTES_GUARD = threading.Lock()


def _zygote(env: dict[str, str], preload: tuple[str, ...]) -> _Zygote | None:
    """The warm parent for this environment (started on first use, shared by every runner of the process)."""
    stamp = json.dumps([sys.executable, env, preload], sort_keys=True)
    with _ZYGOTES_GUARD:
        z = _ZYGOTES.get(stamp)
        if z is None or not z.alive:
            if z is not None:
                z.close()
            try:
                z = _Zygote(env, preload)
            except (OSError, ValueError):
                return None
            if not z.ready:
                z.close()
                return None
            if not _ZYGOTES:
                atexit.register(_close_zygotes)
            _ZYGOTES[stamp] = z
        return z


def _close_zygotes() -> None:
    with _ZYGOTES_GUARD:
        for z in _ZYGOTES.values():
            z.close()
        _ZYGOTES.clear()


class Runner:
    """Runs checks for one project; thread-safe; one run per key per process."""

    def __init__(self, root: Path, checks_dir: str = "checks", cache_dir: str | None = DEFAULT_CACHE_DIR,
                 timeout: float = DEFAULT_TIMEOUT, jobs: int = 0, execute: bool = True, *,
                 memory: int | None = DEFAULT_MEMORY, preload: tuple[str, ...] = PRELOAD) -> None:
        self.root = root.resolve()
        self.preload = preload   # what the warm parent imports once (numbook.run.warm); () runs each check fresh
        self.machinery = _MACHINERY
        self.checks_dir = self.root / checks_dir
        self.cache_dir = (self.root / cache_dir) if cache_dir else None
        self.timeout = timeout
        self.jobs = jobs or os.cpu_count() or 1
        self.execute = execute
        self.memory = memory
        self.device = detect_device()
        self.versions = _versions()
        self.keys: set[str] = set()            # every first key this runner computed: what pruning keeps
        self._memo: dict[str, CheckResult] = {}
        self._locks: dict[str, threading.Lock] = {}
        self._guard = threading.Lock()
        self._hashes: dict[tuple[str, int, int, int], str | None] = {}
        self._gpu: GpuStatus | None = None

    # -- names ---------------------------------------------------------------------------
    def resolve(self, check: str) -> Path:
        """The path of a check named relative to ``checks/`` (or to the root)."""
        p = Path(check)
        if p.parts and p.parts[0] == self.checks_dir.name:
            return self.root / p
        return self.checks_dir / p

    def rel(self, path: Path) -> str:
        try:
            return path.resolve().relative_to(self.root).as_posix()
        except ValueError:
            return str(path)

    # -- keys ----------------------------------------------------------------------------
    def memory_limit(self, header: CheckHeader) -> int | None:
        """Bytes the check may use: its header's ``memory=``, else the runner's limit."""
        return self.memory if header.memory == "default" else header.memory  # type: ignore[return-value]

    def key(self, path: Path, header: CheckHeader | None = None, perturb: str | None = None) -> tuple[str, str]:
        """(first cache key, hash of the check's own source)."""
        source = path.read_bytes()
        own = hashlib.sha256(source).hexdigest()
        if header is None:
            header = read_header(source.decode("utf-8"))
        declared = {name: os.environ.get(name) for name in header.env}
        settings = {name: os.environ[name] for name in sorted(_KEYED) if name in os.environ}
        parts = [CACHE_VERSION, _MACHINERY, self.rel(path), own, declared, settings, self.versions, self.device,
                 header.timeout or self.timeout, self.memory_limit(header), header.requires]
        if perturb:
            parts.append({"perturb": perturb})
        key = hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:20]
        return key, own[:20]

    def file_hash(self, rel: str) -> str | None:
        """The hash of a file a run read, as the sandbox records it: ``rel`` relative to the root or absolute
        (outside the project), and ending in ``/`` for a folder's listing (the hash of its sorted names);
        None where it does not exist."""
        path = self.root / rel
        try:
            st = path.stat()
        except OSError:
            return None
        stamp = (rel, st.st_mtime_ns, st.st_size, st.st_ino)
        if stamp not in self._hashes:
            digest = sandbox.listing_hash if rel.endswith("/") else sandbox.file_hash
            self._hashes[stamp] = digest(str(path))
        return self._hashes[stamp]

    # -- running -------------------------------------------------------------------------
    def result(self, check: str, perturb: str | None = None) -> CheckResult:
        """The result of a check for this build: from memory, from disk, or by running it.

        ``perturb`` names an input the check's ``given()`` nudges (``numbook verify --perturb``).
        """
        path = self.resolve(check)
        rel = self.rel(path)
        if not path.is_file():
            return CheckResult(rel, Status.MISSING)
        if not self.execute:  # the floor of a build: no check runs and no cached result is shown
            return CheckResult(rel, Status.SKIPPED)
        try:
            header = read_header(path.read_text(encoding="utf-8"))
        except ValueError as exc:
            return CheckResult(rel, Status.ERROR, stderr=f"{rel}: {exc}")
        key, own = self.key(path, header, perturb)
        with self._guard:
            self.keys.add(key)
            lock = self._locks.setdefault(key, threading.Lock())
        with lock:
            if key in self._memo:
                return self._memo[key]
            res = self._from_disk(key)
            if res is None and os.environ.get(CACHED_ONLY_ENV):
                res = CheckResult(rel, Status.ERROR, key=key, source_hash=own, device=self.device,
                                  versions=self.versions,
                                  stderr=f"{rel} has no result in the merged results and {CACHED_ONLY_ENV} forbids "
                                         "running it: its shard did not run it, or its files changed since")
            elif res is None:
                res = self._run(path, rel, header, key, own, perturb)
            self._memo[key] = res
            return res

    def run_many(self, checks: list[str], *, progress: Progress | None = None) -> dict[str, CheckResult]:
        """Results of many checks: run in parallel across ``jobs`` workers, then the ``alone`` ones one by one.

        ``progress(done, total, result, still_running)`` is called as each check finishes.
        """
        unique = sorted(set(checks))
        alone = [c for c in unique if self._alone(c)]
        shared = [c for c in unique if c not in alone]
        running: list[str] = []
        done = 0
        lock = threading.Lock()

        def one(c: str) -> CheckResult:
            nonlocal done
            with lock:
                running.append(c)
            try:
                res = self.result(c)
            finally:
                with lock:
                    running.remove(c)
            if progress is not None:
                with lock:
                    done += 1
                    progress(done, len(unique), res, list(running))
            return res

        out: dict[str, CheckResult] = {}
        with ThreadPoolExecutor(max_workers=max(1, min(self.jobs, len(shared) or 1))) as pool:
            futures = {pool.submit(one, c): c for c in shared}
            for fut in as_completed(futures):
                out[futures[fut]] = fut.result()
        for c in alone:
            out[c] = one(c)
        return {c: out[c] for c in unique}

    def _alone(self, check: str) -> bool:
        path = self.resolve(check)
        try:
            return path.is_file() and read_header(path.read_text(encoding="utf-8")).alone
        except ValueError:
            return False

    # -- the cache -----------------------------------------------------------------------
    def _from_disk(self, key: str) -> CheckResult | None:
        """The cached result under ``key``, if every file its run read still has the hash it had."""
        if self.cache_dir is None:
            return None
        f = self.cache_dir / f"{key}.json"
        if not f.is_file():
            return None
        known = {fl.name for fl in fields(CheckResult)}
        try:
            data = json.loads(f.read_text(encoding="utf-8"))
            res = CheckResult(**{k: v for k, v in data.items() if k in known})
        except (ValueError, TypeError):
            return None
        if data.get("cache_version") != CACHE_VERSION or res.key != key:
            return None
        if any(self.file_hash(rel) != digest for rel, digest in res.reads.items()):
            return None
        res.cached = True
        return res

    def _to_disk(self, res: CheckResult) -> None:
        """Cache the result of a run (ok or failed; _run's only): a frozen result is never cached."""
        if self.cache_dir is None:
            return
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        tmp = self.cache_dir / f".{res.key}.{os.getpid()}.{threading.get_ident()}.tmp"
        data = asdict(res)
        data["cache_version"] = CACHE_VERSION
        tmp.write_text(json.dumps(data), encoding="utf-8")
        tmp.replace(self.cache_dir / f"{res.key}.json")

    def bundle(self, results: list[CheckResult]) -> dict[str, Any]:
        """The cache entries of these results, for ``numbook merge`` on another machine."""
        entries = {}
        for res in results:
            f = self.cache_dir / f"{res.key}.json" if self.cache_dir is not None else None
            if f is not None and f.is_file():
                entries[res.key] = json.loads(f.read_text(encoding="utf-8"))
        return {"numbook_bundle": 1, "device": self.device, "versions": self.versions, "entries": entries}

    def merge(self, bundle: dict[str, Any]) -> int:
        """Write a bundle's entries into this cache; how many. Each is still checked against its files when used."""
        if self.cache_dir is None or bundle.get("numbook_bundle") != 1:
            raise ValueError("not a numbook result bundle (or this runner has no cache)")
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        for key, data in bundle["entries"].items():
            (self.cache_dir / f"{key}.json").write_text(json.dumps(data), encoding="utf-8")
        return len(bundle["entries"])

    def prune(self) -> int:
        """Remove every cache entry whose first key no check of this runner computed; how many were removed."""
        if self.cache_dir is None or not self.cache_dir.is_dir():
            return 0
        with self._guard:
            keep = set(self.keys)
        pruned = 0
        for f in self.cache_dir.glob("*.json"):
            if f.stem not in keep:
                f.unlink(missing_ok=True)
                pruned += 1
        return pruned

    # -- one run -------------------------------------------------------------------------
    def _env(self, header: CheckHeader, scratch: Path, rel: str, limit: int | None,
             perturb: str | None = None) -> dict[str, str]:
        """The check's environment: the scrubbed parent's, what its header declares, and the runner's."""
        env = {k: v for k, v in os.environ.items() if k in _PASSED or k in _KEYED or k.startswith("LC_")}
        env.update({name: os.environ[name] for name in header.env if name in os.environ})
        tmp = scratch / "tmp"
        env.update({
            RESULT_ENV: str(scratch / "result.json"),
            "PYTHONHASHSEED": "0",
            "PYTHONUNBUFFERED": "1",
            "PYTHONDONTWRITEBYTECODE": "1",
            "NUMBOOK_DEVICE": self.device,
            "TMPDIR": str(tmp), "TEMP": str(tmp), "TMP": str(tmp),
            "MPLCONFIGDIR": str(scratch / "matplotlib"),
            "XDG_CACHE_HOME": str(scratch / "cache"),
            "XDG_CONFIG_HOME": str(scratch / "config"),
            "TORCHINDUCTOR_CACHE_DIR": str(scratch / "cache" / "torchinductor"),
            "TRITON_CACHE_DIR": str(scratch / "cache" / "triton"),
            "TORCH_HOME": str(scratch / "cache" / "torch"),
            sandbox.ROOT_ENV: str(self.root),
            sandbox.SCRATCH_ENV: str(scratch),
            sandbox.READS_ENV: str(scratch / "reads.txt"),
            sandbox.MEMORY_ENV: "" if limit is None else str(limit),
            sandbox.LIMIT_KIND_ENV: "data" if header.requires == "cuda" else "as",
            sandbox.CHECK_ENV: rel,
            FACTS_ENV: str(self.checks_dir / "facts.yml"),
        })
        if perturb:
            env[PERTURB_ENV] = perturb
        return env

    def _run(self, path: Path, rel: str, header: CheckHeader, key: str, own: str,
             perturb: str | None = None) -> CheckResult:
        timeout = header.timeout or self.timeout
        limit = self.memory_limit(header)
        base = CheckResult(rel, Status.ERROR, requires=header.requires, device=self.device, versions=self.versions,
                           key=key, source_hash=own, timeout_s=timeout, memory_limit=limit)
        replay = None
        if header.requires == "cuda":  # live only on a GPU torch can use; elsewhere replayed from frozen measurements
            from numbook.run.frozen import gpu_status, load_frozen

            with self._guard:
                if self._gpu is None:   # probed once per runner: it starts a Python that imports torch
                    self._gpu = gpu_status(self.device)
                gpu = self._gpu
            if not gpu.usable:
                frozen = load_frozen(self, path, rel, base, gpu.reason)
                if isinstance(frozen, CheckResult):
                    return frozen
                replay = frozen
            else:
                base.driver = gpu.driver
        with tempfile.TemporaryDirectory(prefix="numbook-") as tmp:
            scratch = Path(tmp).resolve()
            for sub in ("work", "tmp"):
                (scratch / sub).mkdir()
            started = time.perf_counter()
            base.ran_at = _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
            env = self._env(header, scratch, rel, limit, perturb)
            if replay is not None:   # numbook.check.measurement() returns these and measures nothing
                from numbook.run.frozen import replay_file

                (scratch / "measurements.json").write_text(replay_file(replay), encoding="utf-8")
                env[MEASUREMENTS_ENV] = str(scratch / "measurements.json")
            warm = self._warm(header, path)
            ran = self._run_forked(warm, path, scratch, env, timeout) if warm is not None else None
            if ran is None:
                ran = self._run_fresh(path, scratch, env, timeout)
            stdout, stderr, returncode = ran
            if returncode is None:
                base.status = Status.TIMEOUT
            base.elapsed_s = time.perf_counter() - started
            base.stdout, base.stderr = stdout, stderr
            base.returncode = returncode
            base.reads = _read_list(scratch / "reads.txt")
            if base.status != Status.TIMEOUT:
                self._finish(base, scratch / "result.json")
        if replay is not None:   # derived on this build from frozen measurements: labelled so, and never cached
            from numbook.run.frozen import replayed

            return replayed(self, replay, base)
        self._to_disk(base)
        return base

    def _warm(self, header: CheckHeader, path: Path) -> _Zygote | None:
        """The warm parent to fork this check from, or None for a fresh interpreter: a check that imports
        none of the preloaded libraries (nor a helper of the checks folder, which may), a GPU check (no
        fork after CUDA), a check whose header passes variables through (read by the libraries when
        imported), or NUMBOOK_ZYGOTE=0."""
        if not self.preload or header.requires == "cuda" or header.env or os.environ.get(ZYGOTE_ENV) == "0":
            return None
        libs = "|".join(re.escape(m) for m in self.preload)
        try:
            uses = re.search(rf"^[ \t]*(?:from[ \t]+(?:{libs}|_\w+)\b|import[ \t][^#\n]*?\b(?:{libs}|_\w+)\b)",
                             path.read_text(encoding="utf-8"), re.M)
        except OSError:
            uses = None
        if uses is None:
            return None
        return _zygote(self._zygote_env(), self.preload)

    @staticmethod
    def _zygote_env() -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k in _PASSED or k in _KEYED or k.startswith("LC_")}
        env.update({"PYTHONHASHSEED": "0", "PYTHONUNBUFFERED": "1", "PYTHONDONTWRITEBYTECODE": "1"})
        return env

    def run_cells(self, cells: list[str], cwd: Path, timeout: float) -> dict[str, Any] | None:
        """Run a notebook's code cells in a child of the warm parent, in ``cwd``, as a kernel would:
        ``{"cells": [{"execution_count", "outputs"}...], "error": None or "Type: message"}``. None when
        there is no warm parent (NUMBOOK_ZYGOTE=0, or it would not start): run them in a kernel then."""
        if not self.preload or os.environ.get(ZYGOTE_ENV) == "0":
            return None
        warm = _zygote(self._zygote_env(), self.preload)
        if warm is None:
            return None
        with tempfile.TemporaryDirectory(prefix="numbook-nb-") as tmp:
            scratch = Path(tmp).resolve()
            (scratch / "tmp").mkdir()
            env = dict(self._zygote_env(), TMPDIR=str(scratch / "tmp"), TEMP=str(scratch / "tmp"),
                       TMP=str(scratch / "tmp"), MPLCONFIGDIR=str(scratch / "matplotlib"),
                       XDG_CACHE_HOME=str(scratch / "cache"), XDG_CONFIG_HOME=str(scratch / "config"),
                       IPYTHONDIR=str(scratch / "ipython"), NUMBOOK_DEVICE=self.device)
            started = warm.start(cwd, env, scratch / "stdout.txt", scratch / "stderr.txt", cells=cells,
                                 out=scratch / "cells.json")
            if started is None:
                return None
            ident, pid = started
            rc = warm.wait(ident, timeout)
            _kill_group(pid)
            if rc is None:
                warm.wait(ident, 30)
                return {"cells": [], "error": f"the notebook did not finish in {timeout:g} s"}
            try:
                done: dict[str, Any] = json.loads((scratch / "cells.json").read_text(encoding="utf-8"))
            except (OSError, ValueError):
                err = (scratch / "stderr.txt").read_text(encoding="utf-8", errors="replace").strip()
                last = (err.splitlines() or ["the notebook's process ended without a result"])[-1]
                return {"cells": [], "error": last}
            return done

    def _run_forked(self, warm: _Zygote, path: Path, scratch: Path, env: dict[str, str],
                    timeout: float) -> tuple[str, str, int | None] | None:
        """(stdout, stderr, exit code or None on a timeout) of a child of the warm parent; None if it is gone."""
        out, err = scratch / "stdout.txt", scratch / "stderr.txt"
        started = warm.start(scratch / "work", env, out, err, check=path)
        if started is None:
            return None
        ident, pid = started
        rc = warm.wait(ident, timeout)
        timed_out = rc is None and warm.alive
        _kill_group(pid)   # on a timeout, the check; in any case, whatever it left running in its session
        _kill_escaped(scratch)   # and what left its session (a daemon, a double fork)
        if timed_out:
            warm.wait(ident, 30)
        stdout, stderr = _output(out), _output(err, tail=True)
        if rc is None and not timed_out:
            stderr += "\nnumbook: the warm parent the check was forked from ended before the check did"
            return stdout, stderr, -signal.SIGKILL
        return stdout, stderr, rc

    def _run_fresh(self, path: Path, scratch: Path, env: dict[str, str],
                   timeout: float) -> tuple[str, str, int | None]:
        """(stdout, stderr, exit code or None on a timeout) of the check in a fresh interpreter.

        Its output goes to files, not pipes: a child it leaves running (one that left its session too) would
        hold a pipe open, and a wait for the pipe's end would last as long as that child."""
        out, err = scratch / "stdout.txt", scratch / "stderr.txt"
        with out.open("wb") as fout, err.open("wb") as ferr:
            proc = subprocess.Popen(
                [sys.executable, "-X", "utf8", "-m", "numbook.run.sandbox", str(path)], cwd=scratch / "work",
                env=env, stdin=subprocess.DEVNULL, stdout=fout, stderr=ferr, start_new_session=True,
            )
        timed_out = False
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
        _kill_group(proc.pid)   # on a timeout, the check; in any case, whatever it left running in its session
        if timed_out:
            proc.kill()   # also where the check moved itself out of its group
        proc.wait()
        _kill_escaped(scratch)   # and what left its session
        return _output(out), _output(err, tail=True), None if timed_out else proc.returncode

    def _finish(self, base: CheckResult, out_json: Path) -> None:
        """Set the status and records of a run that ended by itself."""
        if base.returncode != 0:
            last = base.stderr.strip().splitlines()[-1] if base.stderr.strip() else ""
            if base.memory_limit is not None and _OOM.search(last):
                base.status = Status.OUT_OF_MEMORY
            return
        try:
            data = json.loads(out_json.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            base.stderr += f"\n{base.check} did not write its values: does it import numbook.check?"
            return
        try:   # numbook.check writes every one of these (its _write_result); a check that wrote the file itself
            records = {name: data[name] for name in _RECORDS}
        except (KeyError, TypeError) as exc:
            why = f"no {exc}" if isinstance(exc, KeyError) else "not a JSON object"
            base.stderr += f"\n{base.check} wrote a result numbook cannot read ({why}): only numbook.check writes it"
            return
        base.status = Status.OK
        for name, record in records.items():
            setattr(base, name, record)


def shard(checks: list[str], k: int, n: int) -> list[str]:
    """The k-th (1-based) of n deterministic shards: sorted checks dealt round-robin."""
    if not 1 <= k <= n:
        raise ValueError(f"shard {k}/{n}: K must be between 1 and N")
    return [c for i, c in enumerate(sorted(set(checks))) if i % n == k - 1]


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def _kill_escaped(scratch: Path) -> int:
    """Kill every process a check left behind outside its process group (a child started in a new session, a
    double fork): those whose environment names the check's scratch folder (every process a check starts
    inherits it unless it clears it), whose working folder lies in it, or that hold a file of it open (its
    output files). Linux only (elsewhere only the group is killed); how many were killed."""
    proc = Path("/proc")
    if not proc.is_dir():
        return 0
    mark = f"{sandbox.SCRATCH_ENV}={scratch}\0".encode()
    inside = str(scratch) + os.sep
    me = os.getpid()
    killed = 0
    for _ in range(3):   # again, for a child forked while the folder was searched
        found = []
        for entry in proc.iterdir():
            if not entry.name.isdigit() or int(entry.name) == me:
                continue
            try:
                if mark in (entry / "environ").read_bytes():
                    found.append(int(entry.name))
                    continue
                links = [entry / "cwd", *(entry / "fd").iterdir()]
            except OSError:   # gone, or another user's
                continue
            for link in links:
                with contextlib.suppress(OSError):
                    if (os.readlink(link) + os.sep).startswith(inside):
                        found.append(int(entry.name))
                        break
        for pid in found:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
                killed += 1
        if not found:
            break
    return killed


OUTPUT_LIMIT = 1_000_000
"""Bytes of a check's standard output (and of its error output) kept: a page shows them, and 10 MB of output
made a 13 MB page."""


def _output(path: Path, tail: bool = False) -> str:
    """A check's output file as text: its first OUTPUT_LIMIT bytes (the last for the error output, ``tail``, whose
    last line says why a check failed) and a note where the rest was cut."""
    try:
        with path.open("rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            if size > OUTPUT_LIMIT and tail:
                fh.seek(size - OUTPUT_LIMIT)
            data = fh.read(OUTPUT_LIMIT)
    except OSError:
        return ""
    text = data.decode("utf-8", errors="replace")
    if size <= OUTPUT_LIMIT:
        return text
    if tail:   # from the first whole line on
        return f"… error output cut to its last {_mb(OUTPUT_LIMIT)} of {_mb(size)}\n" + text.split("\n", 1)[-1]
    return text.rsplit("\n", 1)[0] + f"\n… output cut at {_mb(OUTPUT_LIMIT)} of {_mb(size)}\n"


def _mb(n: int) -> str:
    return f"{n / 1e6:.3g} MB"


def _read_list(path: Path) -> dict[str, str | None]:
    """The files a run read, as the sandbox listed them: {path relative to the root (absolute outside it; ending
    in ``/`` for a folder it listed): hash or None}."""
    out: dict[str, str | None] = {}
    try:
        text = path.read_text(encoding="utf-8", errors="surrogateescape")
    except OSError:
        return out
    for line in text.splitlines():
        digest, sep, rel = line.partition("\t")
        if sep:
            name = Path(rel).as_posix()
            if rel.endswith("/") and not name.endswith("/"):   # a folder's listing
                name += "/"
            out[name] = None if digest == "-" else digest
    return dict(sorted(out.items()))
