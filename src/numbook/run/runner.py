"""Run check scripts for a build: each check's result from the first of its sources that has one.

A :class:`Runner` resolves a check's name to its file, reads its header and computes its first key
(numbook.run.cache), then asks its sources in order:

1. memory: the same first key never runs twice in one process;
2. the result cache (numbook.run.cache): an earlier run's result, while every file it read is unchanged;
3. frozen measurements (numbook.run.frozen): a ``requires=cuda`` check on a build without a usable GPU
   is replayed on the CPU from the measurements frozen on a GPU, or is a fault saying why it cannot be;
4. execution (numbook.run.executor): the check runs in its sandbox, forked from the warm parent or in
   a fresh interpreter, and its result, failed or not, is stored in the cache.

A build with ``NUMBOOK_CACHED_ONLY`` set stops after the cache: a check it has no result for is an
error. :meth:`Runner.run_many` runs many checks on a pool of threads, then the ``alone`` ones one by
one.
"""

from __future__ import annotations

import os
import stat
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path
from typing import Any

import numbook.run.frozen as frozen
import numbook.run.machine as machine
from numbook.core.result import (
    DEFAULT_CACHE_DIR,
    DEFAULT_MEMORY,
    DEFAULT_TIMEOUT,
    CheckHeader,
    CheckResult,
    Status,
    read_header,
)
from numbook.run.cache import CACHE_VERSION, ResultCache, first_key, relative
from numbook.run.executor import MACHINERY, PRELOAD, Executor
from numbook.run.machine import detect_device  # one of this module's names, as before
from numbook.run.shards import plan_shards, read_runtimes, shard, write_runtimes  # this module's names too

__all__ = ["CheckResult", "CheckHeader", "Status", "Runner", "Progress", "read_header", "detect_device",
           "DEFAULT_MEMORY", "CACHE_VERSION", "CACHED_ONLY_ENV", "shard", "plan_shards",
           "read_runtimes", "write_runtimes"]

CACHED_ONLY_ENV = "NUMBOOK_CACHED_ONLY"
"""Set (to anything) for a build that must run no check: every result comes from the cache (merged shards)."""

Progress = Callable[[int, int, CheckResult, list[str]], None]
"""``progress(done, total, result, still_running)``: called as each check of ``run_many`` finishes."""


_SOURCES: dict[tuple[str, int, int, int], bytes] = {}


def _source(path: Path) -> bytes | None:
    """A check's source (None where it is no file), read again only when its time, size or inode changed: a build
    asks for each check's source three times, and ``mkdocs serve`` again for every check on each rebuild."""
    try:
        st = path.stat()
    except OSError:
        return None
    if not stat.S_ISREG(st.st_mode):
        return None
    stamp = (str(path), st.st_mtime_ns, st.st_size, st.st_ino)
    found = _SOURCES.get(stamp)
    if found is None:
        try:
            found = _SOURCES[stamp] = path.read_bytes()
        except OSError:
            return None
    return found


class Runner:
    """Runs checks for one project; thread-safe; one run per key per process."""

    def __init__(self, root: Path, checks_dir: str = "checks", cache_dir: str | None = DEFAULT_CACHE_DIR,
                 timeout: float = DEFAULT_TIMEOUT, jobs: int = 0, execute: bool = True, *,
                 memory: int | None = DEFAULT_MEMORY, preload: tuple[str, ...] = PRELOAD) -> None:
        self.root = root.resolve()
        self.checks_dir = self.root / checks_dir
        self.timeout = timeout
        self.jobs = jobs or os.cpu_count() or 1
        self.execute = execute
        self.memory = memory
        self.device = machine.detect_device()
        self.versions = machine.versions()
        self.machinery = MACHINERY
        self.cache = ResultCache(self.root, (self.root / cache_dir) if cache_dir else None)
        self.executor = Executor(self.root, self.checks_dir, preload)
        self._memo: dict[str, CheckResult] = {}
        self._locks: dict[str, threading.Lock] = {}
        self._guard = threading.Lock()
        self._gpu: machine.GpuStatus | None = None

    @property
    def cache_dir(self) -> Path | None:
        """The result cache's folder; None for a runner without a cache."""
        return self.cache.folder

    @property
    def keys(self) -> set[str]:
        """Every first key this runner computed: what pruning keeps."""
        return self.cache.keys

    @property
    def preload(self) -> tuple[str, ...]:
        """What the warm parent imports once (numbook.run.warm); () runs each check in a fresh interpreter."""
        return self.executor.preload

    # -- names and keys ------------------------------------------------------------------
    def resolve(self, check: str) -> Path:
        """The path of a check named relative to ``checks/`` (or to the root)."""
        p = Path(check)
        if p.parts and p.parts[0] == self.checks_dir.name:
            return self.root / p
        return self.checks_dir / p

    def rel(self, path: Path) -> str:
        """``path`` relative to the root (as results and the cache name files); absolute outside the project."""
        return relative(self.root, path)

    def memory_limit(self, header: CheckHeader) -> int | None:
        """Bytes the check may use: its header's ``memory=``, else the runner's limit."""
        return self.memory if header.memory == "default" else header.memory  # type: ignore[return-value]

    def key(self, path: Path, header: CheckHeader | None = None, perturb: str | None = None) -> tuple[str, str]:
        """(first cache key, hash of the check's own source)."""
        source = _source(path)
        if source is None:
            raise FileNotFoundError(path)
        if header is None:
            header = read_header(source.decode("utf-8"))
        return first_key(self.rel(path), source, header, versions=self.versions, device=self.device,
                         timeout=header.timeout or self.timeout, memory=self.memory_limit(header), perturb=perturb)

    def file_hash(self, rel: str) -> str | None:
        """The hash of a file a run read, as the sandbox records it (see ResultCache.file_hash)."""
        return self.cache.file_hash(rel)

    # -- the sources, in order -----------------------------------------------------------
    def result(self, check: str, perturb: str | None = None) -> CheckResult:
        """The result of a check for this build: from memory, from the cache, from frozen measurements, or by
        running it.

        ``perturb`` names an input the check's ``given()`` nudges (``numbook verify --perturb``).
        """
        res = self._result(check, perturb, run=True)
        assert res is not None
        return res

    def known(self, check: str) -> CheckResult | None:
        """The result of a check if it needs no run (from memory, from the cache, or a fault found before running);
        None where :meth:`result` would run it."""
        return self._result(check, None, run=False)

    def _result(self, check: str, perturb: str | None, *, run: bool) -> CheckResult | None:
        path = self.resolve(check)
        rel = self.rel(path)
        source = _source(path)
        if source is None:
            return CheckResult(rel, Status.MISSING)
        if not self.execute:  # the floor of a build: no check runs and no cached result is shown
            return CheckResult(rel, Status.SKIPPED)
        try:
            header = read_header(source.decode("utf-8"))
        except ValueError as exc:
            return CheckResult(rel, Status.ERROR, stderr=f"{rel}: {exc}")
        key, own = self.key(path, header, perturb)
        self.cache.keep(key)
        with self._guard:
            lock = self._locks.setdefault(key, threading.Lock())
        with lock:
            if key in self._memo:
                return self._memo[key]
            res = self._cached(rel, key, own)
            if res is None:
                if not run:
                    return None
                res = self._run(path, rel, header, key, own, perturb)
            self._memo[key] = res
            return res

    def _cached(self, rel: str, key: str, own: str) -> CheckResult | None:
        """The cached result; with CACHED_ONLY_ENV set, an error result where there is none (nothing may run)."""
        res = self.cache.load(key)
        if res is None and os.environ.get(CACHED_ONLY_ENV):
            res = CheckResult(rel, Status.ERROR, key=key, source_hash=own, device=self.device, versions=self.versions,
                              stderr=f"{rel} has no result in the merged results and {CACHED_ONLY_ENV} forbids "
                                     "running it: its shard did not run it, or its files changed since")
        return res

    def _run(self, path: Path, rel: str, header: CheckHeader, key: str, own: str,
             perturb: str | None = None) -> CheckResult:
        """A GPU check without a usable GPU from its frozen measurements (or the fault that there are none);
        any other check run here, and its result cached."""
        base = CheckResult(rel, Status.ERROR, requires=header.requires, device=self.device, versions=self.versions,
                           key=key, source_hash=own, timeout_s=header.timeout or self.timeout,
                           memory_limit=self.memory_limit(header))
        replay = None
        if header.requires == "cuda":  # live only on a GPU torch can use; elsewhere replayed from frozen measurements
            gpu = self._gpu_status()
            if gpu.usable:
                base.driver = gpu.driver
            else:
                found = frozen.load_frozen(path, rel, base, gpu.reason or self.device, root=self.root,
                                           checks_dir=self.checks_dir, file_hash=self.file_hash)
                if isinstance(found, CheckResult):
                    return found
                replay = found
        self.executor.run_check(path, header, base, device=self.device, perturb=perturb,
                                measurements=frozen.replay_file(replay) if replay is not None else None)
        if replay is not None:   # derived on this build from frozen measurements: labelled so, and never cached
            return frozen.replayed(replay, base, root=self.root, file_hash=self.file_hash)
        facts_file = self.rel(self.checks_dir / "facts.yml")
        if base.facts and facts_file in base.reads:   # cached by the entries it took: another entry's edit keeps it
            base.reads = frozen.narrow_facts(base.reads, base, self.root, self.file_hash, facts_file)
        self.cache.store(base, perturb=perturb)
        return base

    def _gpu_status(self) -> machine.GpuStatus:
        """Whether a GPU check can run live here: probed once per runner (it starts a Python that imports torch)."""
        with self._guard:
            if self._gpu is None:
                self._gpu = machine.gpu_status(self.device)
            return self._gpu

    # -- many checks ---------------------------------------------------------------------
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
        for c in shared:   # what needs no run first, in this thread: a pool's hand-offs cost more than a lookup
            found = self.known(c)
            if found is not None:
                out[c] = found
                if progress is not None:
                    done += 1
                    progress(done, len(unique), found, [])
        shared = [c for c in shared if c not in out]
        with ThreadPoolExecutor(max_workers=max(1, min(self.jobs, len(shared) or 1))) as pool:
            futures = {pool.submit(one, c): c for c in shared}
            for fut in as_completed(futures):
                out[futures[fut]] = fut.result()
        for c in alone:
            out[c] = one(c)
        return {c: out[c] for c in unique}

    def _alone(self, check: str) -> bool:
        source = _source(self.resolve(check))
        try:
            return source is not None and read_header(source.decode("utf-8")).alone
        except ValueError:
            return False

    # -- the cache across machines -------------------------------------------------------
    def bundle(self, results: list[CheckResult]) -> dict[str, Any]:
        """The cache entries of these results, for ``numbook merge`` on another machine."""
        return self.cache.bundle(results, self.device, self.versions)

    def merge(self, bundle: dict[str, Any]) -> int:
        """Write a bundle's entries into this cache; how many. Each is still checked against its files when used."""
        return self.cache.merge(bundle)

    def prune(self) -> int:
        """Remove every cache entry whose first key no check of this runner computed; how many were removed."""
        return self.cache.prune()

