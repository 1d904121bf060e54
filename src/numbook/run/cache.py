"""The result cache: a check's first key, and the entries it names, checked against the files their run read.

The cache has two phases. The *first key* (:func:`first_key`) hashes what is known before a run:
the check's path and source, the values of the environment variables its header declares (and of
the thread settings, numbook.run.executor's KEYED), the Python/torch/numpy versions, the device,
its timeout and memory limit, how checks are run (the sandbox and the warm parent) and the cache
format. It names one cache entry, ``<cache_dir>/<first key>.json``: a result as
:meth:`CheckResult.to_dict` writes it, with the cache format. The entry lists every file the run
read with the hash of its content (project files by their path in the project, other files by
their absolute path; the system's and the installed software's files are left out, the versions
and the device standing for them) and every folder it listed with the hash of its sorted names;
it serves a build only while every one of those still has that hash (a deleted file invalidates
it too). Failed runs (error, timeout, out of memory) are cached the same way: they are not re-run
until something they depend on changes. Paths in the project are relative to its root
(:func:`relative`), so a copy of the project keeps its cache.

A *bundle* carries the entries of one machine's results to another (``numbook merge``), where each
is still checked against its files when it is used; *pruning* removes the entries no check of
this build keyed.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import os
import threading
import time
from pathlib import Path
from typing import Any

import numbook.run.sandbox as sandbox
from numbook.core.result import CheckHeader, CheckResult
from numbook.run.executor import KEYED, MACHINERY

__all__ = ["CACHE_VERSION", "ResultCache", "facts_digest", "first_key", "relative"]

CACHE_VERSION = "4"   # 4: a result records the uncertainty of its measured values


_FACTS_PREFIX = "facts["


def _facts_keys(digest: str | None) -> list[str] | None:
    if not digest or not digest.startswith(_FACTS_PREFIX) or "]:" not in digest:
        return None
    keys = digest[len(_FACTS_PREFIX):digest.index("]:")]
    return keys.split(",") if keys else []


def facts_digest(path: Path, keys: list[str]) -> str | None:
    """``facts[k1,k2]:<hash>``: the hash of the entries ``keys`` of the facts file at ``path`` (each whole: value,
    source, date read; an absent key hashes as absent), None without the file.

    A check reads its facts through ``fact()``, one entry each; an edit to another entry of the shared file
    changes nothing it computed, so a record that names its entries goes stale only when one of them changes.
    """
    import yaml

    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError):
        return None
    keys = sorted(set(keys))
    entries = {k: data.get(k) if isinstance(data, dict) else None for k in keys}
    body = json.dumps(entries, sort_keys=True, default=str).encode()
    return f"{_FACTS_PREFIX}{','.join(keys)}]:{hashlib.sha256(body).hexdigest()[:20]}"


def relative(root: Path, path: Path) -> str:
    """How the cache and a result name a file: relative to ``root`` in the project, else by its own path."""
    return _relative(str(root), str(path))


@functools.lru_cache(maxsize=1 << 16)
def _relative(root: str, path: str) -> str:
    """:func:`relative`, remembered (resolving walks every folder of the path; a build names each check several
    times, and ``mkdocs serve`` again on every rebuild)."""
    try:
        return Path(path).resolve().relative_to(root).as_posix()
    except ValueError:
        return path


def first_key(rel: str, source: bytes, header: CheckHeader, *, versions: dict[str, str], device: str,
              timeout: float, memory: int | None, perturb: str | None = None) -> tuple[str, str]:
    """(first cache key, hash of the check's own source) of the check ``rel`` whose source is ``source``, run with
    ``timeout`` seconds and a ``memory`` limit (None: no limit); ``perturb`` names the input a nudged run nudges."""
    memo = (rel, source, header, tuple(sorted(versions.items())), device, timeout, memory, perturb,
            tuple(os.environ.get(name) for name in header.env), tuple(os.environ.get(name) for name in sorted(KEYED)))
    found = _KEYS.get(memo)
    if found is None:
        found = _KEYS[memo] = _first_key(rel, source, header, versions=versions, device=device, timeout=timeout,
                                         memory=memory, perturb=perturb)
    return found


_KEYS: dict[tuple[Any, ...], tuple[str, str]] = {}
"""First keys by everything they are made of (serve asks for every check's on each rebuild)."""


def _first_key(rel: str, source: bytes, header: CheckHeader, *, versions: dict[str, str], device: str,
               timeout: float, memory: int | None, perturb: str | None = None) -> tuple[str, str]:
    own = hashlib.sha256(source).hexdigest()
    declared = {name: os.environ.get(name) for name in header.env}
    settings = {name: os.environ[name] for name in sorted(KEYED) if name in os.environ}
    parts = [CACHE_VERSION, MACHINERY, rel, own, declared, settings, versions, device, timeout, memory,
             header.requires]
    if header.processes:   # the world size: what a process-group check's figures depend on
        parts.append({"processes": header.processes})
    if perturb:
        parts.append({"perturb": perturb})
    key = hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:20]
    return key, own[:20]


_HASHES: dict[tuple[str, int, int, int], str | None] = {}
"""Hashes of the files runs read, by path, modification time, size and inode: kept for the process, so that
``mkdocs serve``, which makes a new cache for each rebuild, hashes again only the files that changed."""
_ENTRIES: dict[tuple[str, int, int, int], tuple[CheckResult, bool]] = {}
"""Cache entries as read from disk (the result, and whether it is of this cache's format), by the same stamp;
each use still checks the files its run read. No caller changes a result's dicts in place (they replace them)."""


class ResultCache:
    """The cache entries of one project in ``folder`` (None: no cache), and the hashes of the files runs read."""

    def __init__(self, root: Path, folder: Path | None) -> None:
        self.root = root
        self.folder = folder
        self.keys: set[str] = set()   # every first key this build computed: what pruning keeps
        self.started = time.time()    # entries written since (another process's runs) are not this build's to prune
        self._guard = threading.Lock()
        self._hashes = _HASHES   # shared by every cache of the process: serve makes a new one for each rebuild
        self._entries: dict[tuple[str, str, tuple[str, ...]], str | None] = {}   # facts digests by file content

    def keep(self, key: str) -> None:
        """Note a first key this build computed (pruning keeps its entry)."""
        with self._guard:
            self.keys.add(key)

    def file_hash(self, rel: str) -> str | None:
        """The hash of a file a run read, as the sandbox records it: ``rel`` relative to the root or absolute
        (outside the project), and ending in ``/`` for a folder's listing (the hash of its sorted names);
        None where it does not exist. Kept while the file's size, time and inode stay as they were."""
        path = self.root / rel
        try:
            st = path.stat()
        except OSError:
            return None
        stamp = (f"{self.root}\0{rel}", st.st_mtime_ns, st.st_size, st.st_ino)   # rel: "data/" lists, "data" reads
        if stamp not in self._hashes:
            digest = sandbox.listing_hash if rel.endswith("/") else sandbox.file_hash
            self._hashes[stamp] = digest(str(path))
        return self._hashes[stamp]

    def fresh(self, reads: dict[str, str | None]) -> bool:
        """Whether every file among ``reads`` (file -> its hash when it was read; None: absent) has that hash now;
        a facts file recorded by the entries the run took from it (``facts_digest``) is compared on those only."""
        return all(self._now(rel, digest) == digest for rel, digest in reads.items())

    def _now(self, rel: str, digest: str | None) -> str | None:
        keys = _facts_keys(digest)
        if keys is None:
            return self.file_hash(rel)
        whole = self.file_hash(rel)
        if whole is None:
            return None
        with self._guard:
            memo = (rel, whole, tuple(keys))
            if memo not in self._entries:
                self._entries[memo] = facts_digest(self.root / rel, keys)
            return self._entries[memo]

    def load(self, key: str) -> CheckResult | None:
        """The cached result under ``key``, if every file its run read still has the hash it had."""
        if self.folder is None:
            return None
        f = self.folder / f"{key}.json"
        try:
            st = f.stat()
            stamp = (str(f), st.st_mtime_ns, st.st_size, st.st_ino)
            read = _ENTRIES.get(stamp)
            if read is None:
                data = json.loads(f.read_text(encoding="utf-8"))
                read = _ENTRIES[stamp] = (CheckResult.from_dict(data), data.get("cache_version") == CACHE_VERSION)
        except (OSError, ValueError, TypeError, AttributeError):
            return None
        kept, current = read
        if not current or kept.key != key or not self.fresh(kept.reads):
            return None
        return dataclasses.replace(kept, cached=True)   # a copy: the caller may set its fields

    def store(self, res: CheckResult, perturb: str | None = None) -> None:
        """Write the result of a run (ok or failed) under its key, and for a nudged run the input it nudged; a
        result derived from frozen measurements is never stored."""
        if self.folder is None:
            return
        self.folder.mkdir(parents=True, exist_ok=True)
        tmp = self.folder / f".{res.key}.{os.getpid()}.{threading.get_ident()}.tmp"
        nudged = {"perturb": perturb} if perturb else {}
        tmp.write_text(json.dumps({**res.to_dict(), "cache_version": CACHE_VERSION, **nudged}), encoding="utf-8")
        tmp.replace(self.folder / f"{res.key}.json")

    def bundle(self, results: list[CheckResult], device: str, versions: dict[str, str]) -> dict[str, Any]:
        """The cache entries of these results, for ``numbook merge`` on another machine."""
        entries = {}
        for res in results:
            f = self.folder / f"{res.key}.json" if self.folder is not None else None
            if f is not None and f.is_file():
                entries[res.key] = json.loads(f.read_text(encoding="utf-8"))
        return {"numbook_bundle": 1, "device": device, "versions": versions, "entries": entries}

    def merge(self, bundle: dict[str, Any]) -> int:
        """Write a bundle's entries into this cache; how many. Each is still checked against its files when used."""
        if self.folder is None or bundle.get("numbook_bundle") != 1:
            raise ValueError("not a numbook result bundle (or this runner has no cache)")
        self.folder.mkdir(parents=True, exist_ok=True)
        for key, data in bundle["entries"].items():
            (self.folder / f"{key}.json").write_text(json.dumps(data), encoding="utf-8")
        return len(bundle["entries"])

    def prune(self) -> int:
        """Remove every entry whose first key this build did not compute; how many were removed.

        Two kinds are kept: a nudged run's entry (``numbook verify --perturb`` asks for it again, and a plain
        build never computes its key) while its check and every file it read are unchanged, and any entry written
        after this build began (another process's run, such as a ``--perturb`` in progress beside this build).
        """
        if self.folder is None or not self.folder.is_dir():
            return 0
        with self._guard:
            keep = set(self.keys)
        pruned = 0
        for f in self.folder.glob("*.json"):
            if f.stem in keep or self._kept(f):
                continue
            f.unlink(missing_ok=True)
            pruned += 1
        return pruned

    def _kept(self, f: Path) -> bool:
        """Whether an entry this build did not key stays: written since the build began, or a nudged run's entry
        that is still current."""
        try:
            if f.stat().st_mtime >= self.started:
                return True
            data = json.loads(f.read_text(encoding="utf-8"))
            if not isinstance(data, dict) or not data.get("perturb") or data.get("cache_version") != CACHE_VERSION:
                return False
            own = hashlib.sha256((self.root / data["check"]).read_bytes()).hexdigest()[:20]
            return bool(own == data["source_hash"] and self.fresh(data["reads"]))
        except (OSError, ValueError, KeyError, TypeError):
            return False
