"""What a check run produces and what a check declares: statuses, results and the header comment.

This module imports nothing else of numbook, so the runner, the frozen results, the verifier and
the plugin can all depend on it without a circle.
"""

from __future__ import annotations

import enum
import math
import re
from dataclasses import asdict, dataclass, field, fields
from typing import Any

__all__ = ["Status", "CheckResult", "Uncertainty", "CheckHeader", "read_header", "parse_memory", "format_bytes",
           "DEFAULT_MEMORY", "DEFAULT_CACHE_DIR", "DEFAULT_TIMEOUT", "FAILED", "FROZEN_HOW", "Source", "SOURCE_WORDS"]


class Status(enum.StrEnum):
    """The status of a check's result; a ``str``, so ``res.status == "ok"`` holds."""

    OK = "ok"
    ERROR = "error"                     # the check raised, exited non-zero or recorded nothing
    TIMEOUT = "timeout"                 # it ran past its timeout and was stopped
    OUT_OF_MEMORY = "out-of-memory"     # it ran past its memory limit
    MISSING = "missing"                 # the check file does not exist
    SKIPPED = "skipped"                 # the build runs no check (execute: false)
    FROZEN_MISSING = "frozen-missing"   # a GPU check on a build without a GPU, and no frozen result
    FROZEN_STALE = "frozen-stale"       # its frozen result is older than its source
    FROZEN_INVALID = "frozen-invalid"   # its frozen file is no GPU result of the check


class Source(enum.StrEnum):
    """Where a build's result of a check came from; a ``str``, so it prints as its value."""

    RAN = "ran"            # the check ran for this build
    CACHE = "cache"        # an earlier run's result, every file it read unchanged
    FROZEN = "frozen"      # derived on this build from measurements frozen on a GPU (numbook.run.frozen)
    NOT_RUN = "not run"    # missing, or the build runs no check


SOURCE_WORDS = {Source.RAN: "ran for this build", Source.CACHE: "from cache", Source.NOT_RUN: "not run"}
"""How a page says where a result came from (a frozen one: FROZEN_HOW)."""

FAILED = frozenset({Status.ERROR, Status.TIMEOUT, Status.OUT_OF_MEMORY})   # a run that failed (and is cached)

DEFAULT_MEMORY = 8 * 2**30      # bytes a check may use: two parallel checks fit a 24 GiB machine
DEFAULT_CACHE_DIR = ".cache/numbook"   # the result cache, relative to the project root
DEFAULT_TIMEOUT = 120.0                # seconds a check may run, unless its header says otherwise
FROZEN_HOW = "frozen GPU measurements, derived on this build"
"""Where a replayed GPU check's result came from: its measurements were frozen on a GPU, every value, sanity and
figure was computed from them for this build (numbook.run.frozen)."""

_HEADER = re.compile(r"^#\s*numbook:\s*(.+)$", re.MULTILINE)
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_UNITS = {"": 1, "b": 1, "k": 2**10, "kib": 2**10, "m": 2**20, "mib": 2**20, "g": 2**30, "gib": 2**30,
          "t": 2**40, "tib": 2**40, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([A-Za-z]*)\s*$")
KNOWN_KEYS = "requires, timeout, alone, memory, env, processes"
MAX_PROCESSES = 16                     # workers a check may start: a process group on one machine


def parse_memory(text: str) -> int | None:
    """Bytes from ``16GiB``, ``512 MiB``, ``8G`` (binary) or ``20GB`` (decimal); None for ``none``."""
    if text.strip().lower() in ("none", "unlimited"):
        return None
    m = _SIZE.match(text)
    unit = m.group(2).lower() if m else ""
    if not m or unit not in _UNITS:
        raise ValueError(f"memory={text!r}: use a size like 16GiB, 512MiB or none")
    return int(float(m.group(1)) * _UNITS[unit])


def format_bytes(n: int | None) -> str:
    """``8 GiB``, ``1.5 GiB``, ``512 MiB``; ``no limit`` for None."""
    if n is None:
        return "no limit"
    for unit, size in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= size:
            return f"{n / size:.3g} {unit}"
    return f"{n} B"


@dataclass(frozen=True)
class CheckHeader:
    """What a check declares in a ``# numbook: requires=cuda, timeout=120, alone, memory=16GiB, env=A,B`` comment
    (``processes=4``: the check runs a process group of 4 workers; memory= is each process's limit)."""

    requires: str = "cpu"
    timeout: float | None = None
    alone: bool = False  # a measuring check: run it by itself, after the others, not sharing the cores
    memory: int | None | str = "default"   # bytes; None for no limit; "default" for the runner's limit
    env: tuple[str, ...] = ()               # environment variables the check reads: passed to it, and keyed
    processes: int = 0                      # workers the check may start (a process group over loopback)


def read_header(source: str) -> CheckHeader:
    """Parse the optional ``# numbook:`` header comment of a check."""
    requires, timeout, alone, processes = "cpu", None, False, 0
    memory: int | None | str = "default"
    env: list[str] = []
    for m in _HEADER.finditer(source):
        in_env = False
        for part in m.group(1).split(","):
            key, eq, val = part.partition("=")
            key, val = key.strip(), val.strip()
            if not eq and in_env and key and key != "alone":   # env=A,B: B continues the list
                if not _ENV_NAME.match(key):
                    raise ValueError(f"env: {key!r} is no environment variable name")
                env.append(key)
                continue
            in_env = False
            if key == "alone":
                if eq:
                    raise ValueError(f"alone takes no value (got alone={val}): write 'alone'")
                alone = True
            elif key == "requires":
                if val not in ("cpu", "cuda"):
                    raise ValueError(f"requires={val!r}: use cpu or cuda")
                requires = val
            elif key == "timeout":
                if not val:
                    raise ValueError("timeout needs a number of seconds: write timeout=SECONDS")
                try:
                    timeout = float(val)
                except ValueError:
                    raise ValueError(f"timeout={val!r} is no number of seconds: write timeout=SECONDS") from None
                if not timeout > 0:   # 0 would read as 'no timeout given', and a NaN compares false
                    raise ValueError(f"timeout={val} must be more than 0 seconds")
            elif key == "memory":
                memory = parse_memory(val)
            elif key == "processes":
                if not val.isdigit() or not 1 <= int(val) <= MAX_PROCESSES:
                    raise ValueError(f"processes={val!r}: write the number of worker processes the check starts, "
                                     f"1 to {MAX_PROCESSES} (processes=4)")
                processes = int(val)
            elif key == "env":
                for name in val.split():
                    if not _ENV_NAME.match(name):
                        raise ValueError(f"env: {name!r} is no environment variable name")
                    env.append(name)
                in_env = True
            else:
                raise ValueError(f"unknown numbook header key {key!r} (known: {KNOWN_KEYS})")
    return CheckHeader(requires, timeout, alone, memory, tuple(dict.fromkeys(env)), processes)


@dataclass(frozen=True)
class Uncertainty:
    """How a measured value was obtained, as ``numbook.check.value(..., n=, repeats=, interval=, interval_kind=)``
    recorded it: the samples over all repeats, the repeats (``repeated`` names them: seeds, runs), and an interval
    at a confidence ``level`` (0.95), computed as ``kind`` says (``95% t interval over 5 seeds``)."""

    n: int
    repeats: int
    repeated: str
    lo: float
    hi: float
    level: float
    kind: str

    @classmethod
    def read(cls, data: Any) -> Uncertainty | None:
        """The record of a result file, or None where there is none or it is not one (a result from elsewhere)."""
        if not isinstance(data, dict):
            return None
        try:
            n, repeats, lo, hi, level = (data[k] for k in ("n", "repeats", "lo", "hi", "level"))
            if not all(isinstance(v, int) and not isinstance(v, bool) for v in (n, repeats)):
                return None
            if not all(isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)
                       for v in (lo, hi, level)) or lo > hi:
                return None
            return cls(n, repeats, str(data.get("repeated") or "runs"), float(lo), float(hi), float(level),
                       str(data.get("kind", "")))
        except KeyError:
            return None

    @property
    def repeats_words(self) -> str:
        """``5 seeds``; ``1 run``."""
        word = self.repeated if self.repeats != 1 else self.repeated.removesuffix("s")
        return f"{self.repeats} {word}"

    @property
    def level_words(self) -> str:
        """``95%``."""
        return f"{self.level * 100:g}%"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class CheckResult:
    """The outcome of one run of one check."""

    check: str                      # path relative to the project root, e.g. checks/x.py
    status: str                     # a Status (a str): ok | error | timeout | out-of-memory | missing | ...
    stdout: str = ""
    stderr: str = ""
    returncode: int | None = None
    inputs: dict[str, Any] = field(default_factory=dict)
    values: dict[str, Any] = field(default_factory=dict)
    sanity: dict[str, Any] = field(default_factory=dict)
    figures: dict[str, Any] = field(default_factory=dict)   # name -> {caption, svg}
    lines: dict[str, int] = field(default_factory=dict)
    units: dict[str, str] = field(default_factory=dict)      # value name -> unit the check declared
    dtypes: dict[str, str] = field(default_factory=dict)     # value name -> floating dtype it was computed in
    facts: dict[str, Any] = field(default_factory=dict)      # input name -> {key, source, read} of a fact
    fixed: dict[str, str] = field(default_factory=dict)      # value name -> why no input moves it
    measured: dict[str, str] = field(default_factory=dict)   # value name -> what was measured on this machine
    uncertainty: dict[str, Any] = field(default_factory=dict)  # measured value name -> {n, repeats, repeated, lo,
    #                                                            hi, level, kind}: how it was obtained (Uncertainty)
    nudges: dict[str, float] = field(default_factory=dict)   # input name -> how far --perturb moves it
    measurements: dict[str, Any] = field(default_factory=dict)  # name -> {value, unit}: raw GPU measurements
    requires: str = "cpu"
    device: str = ""
    driver: str = ""                # the GPU driver (nvidia-smi) where a cuda check ran on a GPU
    versions: dict[str, str] = field(default_factory=dict)
    elapsed_s: float = 0.0
    cpu_s: float | None = None      # CPU seconds the check's process used (all threads)
    ran_at: str = ""
    key: str = ""                   # the first cache key (source, declared env, versions, device, limits)
    source_hash: str = ""
    cached: bool = False
    frozen: bool = False
    timeout_s: float = 0.0
    memory_limit: int | None = None                       # bytes the check could use; None: no limit
    reads: dict[str, str | None] = field(default_factory=dict)  # project file read -> its hash (None: absent)

    def __post_init__(self) -> None:
        self.status = Status(self.status)

    def to_dict(self) -> dict[str, Any]:
        """Every field as JSON data: what the result cache stores (numbook.run.cache) and a bundle carries."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Any) -> CheckResult:
        """The result :meth:`to_dict` wrote; keys that name no field are left out (the cache adds its format).
        TypeError or ValueError where ``data`` is no such result."""
        if not isinstance(data, dict):
            raise TypeError(f"a result is a JSON object, not {type(data).__name__}")
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})

    @property
    def ok(self) -> bool:
        return self.status == Status.OK

    @property
    def source(self) -> Source:
        """Where this result came from: the one place that reads ``frozen`` and ``cached``."""
        if self.status in (Status.SKIPPED, Status.MISSING):
            return Source.NOT_RUN
        return Source.FROZEN if self.frozen else (Source.CACHE if self.cached else Source.RAN)

    @property
    def source_words(self) -> str:
        """:attr:`source` as a page or a report line says it: ``ran for this build``, ``from cache``, FROZEN_HOW."""
        return FROZEN_HOW if self.source is Source.FROZEN else SOURCE_WORDS[self.source]

    def lookup(self, name: str) -> tuple[bool, Any]:
        """Find a recorded value or input by name."""
        if name in self.values:
            return True, self.values[name]
        if name in self.inputs:
            return True, self.inputs[name]
        return False, None

    def spread(self, name: str) -> Uncertainty | None:
        """How the measured value ``name`` was obtained (its samples, repeats and interval), if the check said."""
        return Uncertainty.read(self.uncertainty.get(name))

    def traceback_excerpt(self, limit: int = 12) -> str:
        """The last lines of the check's stderr (its traceback), indented."""
        lines = [ln for ln in self.stderr.rstrip().splitlines() if ln.strip()]
        return "\n".join("    " + ln for ln in lines[-limit:])

    def memory_message(self) -> str:
        """The first line of an out-of-memory failure."""
        return (f"check '{self.check}' ran out of memory: it may use {format_bytes(self.memory_limit)} "
                "(raise it with a '# numbook: memory=…' line in the check)")

    def stamp(self) -> str:
        """One line of provenance: device (and GPU driver), versions, run time, date; a frozen one its source hash
        (device, driver, versions and date are the GPU run's; the run time is this build's derivation)."""
        vers = " · ".join(f"{k} {v}" for k, v in self.versions.items())
        how = self.source_words if self.source is not Source.NOT_RUN else SOURCE_WORDS[Source.RAN]
        device = f"{self.device} · driver {self.driver}" if self.driver else self.device
        source = f" · source {self.source_hash}" if self.frozen else ""
        cpu = f" ({self.cpu_s:.2f} s CPU)" if self.cpu_s is not None else ""
        return f"{device} · {vers} · {self.elapsed_s:.2f} s{cpu} · {self.ran_at}{source} · {how}"
