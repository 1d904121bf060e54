"""Run check scripts: one subprocess per check, with a timeout, a cache and a thread pool.

A result is keyed by a hash of everything that can change it: the check's source, the
project modules it imports (transitively), the Python/torch/numpy versions and the device.
The same key is never run twice in one process, and a result on disk under the cache
directory is reused by the next build.
"""

from __future__ import annotations

import ast
import datetime as _dt
import hashlib
import importlib.metadata
import importlib.util
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
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .check import RESULT_ENV

__all__ = ["CheckResult", "Runner", "CheckHeader", "read_header", "detect_device"]

_HEADER = re.compile(r"^#\s*numbook:\s*(.+)$", re.MULTILINE)
CACHE_VERSION = "1"


@dataclass(frozen=True)
class CheckHeader:
    """What a check declares in a ``# numbook: requires=cuda, timeout=120, alone`` comment."""

    requires: str = "cpu"
    timeout: float | None = None
    alone: bool = False  # a measuring check: run it by itself, after the others, not sharing the cores


def read_header(source: str) -> CheckHeader:
    """Parse the optional ``# numbook:`` header comment of a check."""
    requires, timeout, alone = "cpu", None, False
    for m in _HEADER.finditer(source):
        for part in m.group(1).split(","):
            key, _, val = part.partition("=")
            key, val = key.strip(), val.strip()
            if key == "alone" and not val:
                alone = True
            elif key == "requires":
                if val not in ("cpu", "cuda"):
                    raise ValueError(f"requires={val!r}: use cpu or cuda")
                requires = val
            elif key == "timeout":
                timeout = float(val)
            else:
                raise ValueError(f"unknown numbook header key {key!r} (known: requires, timeout, alone)")
    return CheckHeader(requires, timeout, alone)


@dataclass
class CheckResult:
    """The outcome of one run of one check."""

    check: str                      # path relative to the project root, e.g. checks/x.py
    status: str                     # ok | error | timeout | missing | frozen-missing | frozen-stale | frozen-invalid
    stdout: str = ""
    stderr: str = ""
    returncode: int | None = None
    inputs: dict[str, Any] = field(default_factory=dict)
    values: dict[str, Any] = field(default_factory=dict)
    sanity: dict[str, Any] = field(default_factory=dict)
    figures: dict[str, Any] = field(default_factory=dict)   # name -> {caption, svg}
    lines: dict[str, int] = field(default_factory=dict)
    requires: str = "cpu"
    device: str = ""
    driver: str = ""                # the GPU driver (nvidia-smi) where a cuda check ran on a GPU
    versions: dict[str, str] = field(default_factory=dict)
    elapsed_s: float = 0.0
    cpu_s: float | None = None      # CPU seconds the check's process used (all threads)
    ran_at: str = ""
    key: str = ""
    source_hash: str = ""
    cached: bool = False
    frozen: bool = False
    timeout_s: float = 0.0

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def lookup(self, name: str) -> tuple[bool, Any]:
        """Find a recorded value or input by name."""
        if name in self.values:
            return True, self.values[name]
        if name in self.inputs:
            return True, self.inputs[name]
        return False, None

    def traceback_excerpt(self, limit: int = 12) -> str:
        """The last lines of the check's stderr (its traceback), indented."""
        lines = [ln for ln in self.stderr.rstrip().splitlines() if ln.strip()]
        return "\n".join("    " + ln for ln in lines[-limit:])

    def stamp(self) -> str:
        """One line of provenance: device (and GPU driver), versions, run time, date; a frozen one its source hash."""
        vers = " · ".join(f"{k} {v}" for k, v in self.versions.items())
        how = "not run for this build" if self.frozen else ("from cache" if self.cached else "ran for this build")
        device = f"{self.device} · driver {self.driver}" if self.driver else self.device
        source = f" · source {self.source_hash}" if self.frozen else ""
        cpu = f" ({self.cpu_s:.2f} s CPU)" if self.cpu_s is not None else ""
        return f"{device} · {vers} · {self.elapsed_s:.2f} s{cpu} · {self.ran_at}{source} · {how}"


def detect_device() -> str:
    """``cuda: <name>`` where an NVIDIA GPU answers, else ``cpu: <machine>``; no torch import."""
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
    return "cpu: " + (platform.machine() or "unknown")


def _versions() -> dict[str, str]:
    out = {"Python": platform.python_version()}
    for dist in ("torch", "numpy"):
        try:
            out[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            out[dist] = "absent"
    return out


_IMPORTS: dict[tuple[Path, int, int], list[str]] = {}


def _imported_names(path: Path) -> list[str]:
    """Module names a file imports (absolute imports), parsed once per version of the file."""
    st = path.stat()
    key = (path, st.st_mtime_ns, st.st_size)
    if key not in _IMPORTS:
        names: list[str] = []
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        except SyntaxError:
            tree = ast.Module(body=[], type_ignores=[])
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names += [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names.append(node.module)
                names += [f"{node.module}.{a.name}" for a in node.names]
        _IMPORTS[key] = names
    return _IMPORTS[key]


def _project_imports(path: Path, search: list[Path], seen: set[Path]) -> None:
    """Add to ``seen`` every project file ``path`` imports, transitively."""
    if path in seen or not path.is_file():
        return
    seen.add(path)
    for name in _imported_names(path):
        rel = Path(*name.split("."))
        for base in search:
            for cand in (base / rel.with_suffix(".py"), base / rel / "__init__.py"):
                if cand.is_file():
                    _project_imports(cand.resolve(), search, seen)


class Runner:
    """Runs checks for one project; thread-safe; one run per key per process."""

    def __init__(self, root: Path, checks_dir: str = "checks", cache_dir: str | None = ".cache/numbook",
                 timeout: float = 120.0, jobs: int = 0, execute: bool = True) -> None:
        self.root = root.resolve()
        self.checks_dir = self.root / checks_dir
        self.cache_dir = (self.root / cache_dir) if cache_dir else None
        self.timeout = timeout
        self.jobs = jobs or os.cpu_count() or 1
        self.execute = execute
        self.device = detect_device()
        self.versions = _versions()
        self._memo: dict[str, CheckResult] = {}
        self._locks: dict[str, threading.Lock] = {}
        self._guard = threading.Lock()
        spec = importlib.util.find_spec("numbook")
        pkg_parent = Path(spec.origin).parent.parent if spec and spec.origin else self.root / "src"
        self._search = [self.checks_dir, pkg_parent]

    # -- keys ----------------------------------------------------------------------------
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

    def _import_name(self, f: Path) -> str:
        """A file's name as its import sees it (``numbook/check.py``), the same in any copy of the project."""
        for base in self._search:
            try:
                return f.resolve().relative_to(base.resolve()).as_posix()
            except ValueError:
                continue
        return self.rel(f)

    def key(self, path: Path) -> tuple[str, str]:
        """(cache key, hash of the check's own source)."""
        files: set[Path] = set()
        _project_imports(path.resolve(), self._search, files)
        h = hashlib.sha256()
        own = hashlib.sha256(path.read_bytes()).hexdigest()
        for f in sorted(files):
            h.update(self._import_name(f).encode() + b"\0" + f.read_bytes() + b"\0")
        h.update(json.dumps([CACHE_VERSION, self.versions, self.device], sort_keys=True).encode())
        return h.hexdigest()[:20], own[:20]

    # -- running -------------------------------------------------------------------------
    def result(self, check: str) -> CheckResult:
        """The result of a check for this build: from memory, from disk, or by running it."""
        path = self.resolve(check)
        rel = self.rel(path)
        if not path.is_file():
            return CheckResult(rel, "missing")
        if not self.execute:  # the floor of a build: no check runs and no cached result is shown
            return CheckResult(rel, "skipped")
        try:
            header = read_header(path.read_text(encoding="utf-8"))
        except ValueError as exc:
            return CheckResult(rel, "error", stderr=f"{rel}: {exc}")
        key, own = self.key(path)
        with self._guard:
            lock = self._locks.setdefault(key, threading.Lock())
        with lock:
            if key in self._memo:
                return self._memo[key]
            res = self._from_disk(key) or self._run(path, rel, header, key, own)
            self._memo[key] = res
            return res

    def run_many(self, checks: list[str]) -> dict[str, CheckResult]:
        """Results of many checks: run in parallel across ``jobs`` workers, then the ``alone`` ones one by one."""
        unique = sorted(set(checks))
        alone = [c for c in unique if self._alone(c)]
        shared = [c for c in unique if c not in alone]
        with ThreadPoolExecutor(max_workers=max(1, min(self.jobs, len(shared) or 1))) as pool:
            out = dict(zip(shared, pool.map(self.result, shared), strict=True))
        for c in alone:
            out[c] = self.result(c)
        return {c: out[c] for c in unique}

    def _alone(self, check: str) -> bool:
        path = self.resolve(check)
        try:
            return path.is_file() and read_header(path.read_text(encoding="utf-8")).alone
        except ValueError:
            return False

    def _from_disk(self, key: str) -> CheckResult | None:
        if self.cache_dir is None:
            return None
        f = self.cache_dir / f"{key}.json"
        if not f.is_file():
            return None
        try:
            data = json.loads(f.read_text(encoding="utf-8"))
            res = CheckResult(**data)
        except (ValueError, TypeError):
            return None
        res.cached = True
        return res

    def _to_disk(self, res: CheckResult) -> None:
        if self.cache_dir is None or not res.ok or res.frozen:
            return
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        tmp = self.cache_dir / f".{res.key}.{os.getpid()}.{threading.get_ident()}.tmp"
        tmp.write_text(json.dumps(asdict(res)), encoding="utf-8")
        tmp.replace(self.cache_dir / f"{res.key}.json")

    def _run(self, path: Path, rel: str, header: CheckHeader, key: str, own: str) -> CheckResult:
        timeout = header.timeout or self.timeout
        base = CheckResult(rel, "error", requires=header.requires, device=self.device, versions=self.versions,
                           key=key, source_hash=own, timeout_s=timeout)
        if header.requires == "cuda":  # live only on a GPU torch can use; elsewhere its frozen GPU result
            from .frozen import gpu_status, load_frozen

            gpu = gpu_status(self.device)
            if not gpu.usable:
                return load_frozen(self, path, rel, base, gpu.reason)
            base.driver = gpu.driver
        with tempfile.TemporaryDirectory(prefix="numbook-") as tmp:
            out_json = Path(tmp) / "result.json"
            env = dict(os.environ)
            env[RESULT_ENV] = str(out_json)
            env["PYTHONHASHSEED"] = "0"
            env["PYTHONUNBUFFERED"] = "1"
            env["NUMBOOK_DEVICE"] = self.device
            started = time.perf_counter()
            base.ran_at = _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
            proc = subprocess.Popen(
                [sys.executable, "-X", "utf8", str(path)], cwd=tmp, env=env, stdout=subprocess.PIPE,
                stderr=subprocess.PIPE, text=True, encoding="utf-8", errors="replace", start_new_session=True,
            )
            try:
                stdout, stderr = proc.communicate(timeout=timeout)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                stdout, stderr = proc.communicate()
                base.status, base.stdout, base.stderr = "timeout", stdout, stderr
                base.elapsed_s = time.perf_counter() - started
                return base
            base.elapsed_s = time.perf_counter() - started
            base.stdout, base.stderr, base.returncode = stdout, stderr, proc.returncode
            if proc.returncode != 0:
                return base
            try:
                data = json.loads(out_json.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                base.stderr += f"\n{rel} did not write its values: does it import numbook.check?"
                return base
        base.status = "ok"
        base.inputs, base.values = data["inputs"], data["values"]
        base.figures = data.get("figures", {})
        base.cpu_s = data.get("cpu_s")
        base.sanity, base.lines = data["sanity"], data["lines"]
        self._to_disk(base)
        return base
