"""Shards of the book's checks, balanced by the time each check took when it last ran.

``numbook verify --shard K/N`` runs the K-th of N shards on one CI machine; every machine of the matrix
must compute the same assignment, so it depends only on committed files: the check names and the record
of run times, ``checks/runtimes.json``, which ``numbook verify --record-times`` writes::

    {"version": 1, "note": "...", "seconds": {"checks/a.py": 12.0, "checks/b.py": 0.31}}

Each entry is the check's **weight** in core-seconds, what it occupies of a CI machine of
:data:`RUNNER_CORES` cores: its run time (``elapsed_s``, kept by a cached result from when it ran) times
one core for a plain check, times ``N`` (at most :data:`RUNNER_CORES`) for a ``processes=N`` check, and
times :data:`RUNNER_CORES` for an ``alone`` check, which runs with the machine to itself. A shard's wall
time is then about its weight divided by the cores. Weights are rounded to 2 significant digits, so a
re-record on another machine does not rewrite every line.

:func:`plan_shards` deals the checks longest-processing-time first: heaviest first (ties by name), each to
the shard that is lightest so far (ties to the lowest index). A check the record does not name weighs the
median of those it names (1 s where it names none), so with no record at all every check weighs the
same and the plan is the sorted checks dealt round-robin. A record naming a check that no longer exists
is ignored; a malformed record is a :class:`RuntimesError` naming the file, never a silent fallback.
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from numbook.core.result import CheckHeader

__all__ = ["RUNTIMES_FILE", "RUNNER_CORES", "RUNTIMES_VERSION", "RuntimesError", "Plan", "plan", "plan_shards",
           "shard", "read_runtimes", "write_runtimes", "weight", "round2"]

RUNTIMES_FILE = "runtimes.json"
"""The record's name in the checks folder."""
RUNTIMES_VERSION = 1
RUNNER_CORES = 4
"""Cores of the CI machine weights count for (GitHub's ubuntu-latest runner): an ``alone`` check holds them all."""
NOTE = ("core-seconds each check occupies of a 4-core CI machine: its run time x1, x N (at most 4) for processes=N, "
        "x4 for alone; written by `numbook verify --record-times`, read by `numbook verify --shard K/N` and "
        "`numbook shards N`, which balance the shards by it")
_UNRECORDED = 1.0   # what a check weighs when the record names no check at all


class RuntimesError(ValueError):
    """A malformed record of run times; the message starts with the file's name."""


def round2(seconds: float) -> float:
    """``seconds`` to 2 significant digits (0.01 at least: every check costs its start)."""
    return max(0.01, float(f"{seconds:.2g}"))


def weight(elapsed_s: float, header: CheckHeader) -> float:
    """Core-seconds a check that ran ``elapsed_s`` holds of a :data:`RUNNER_CORES`-core machine."""
    cores = RUNNER_CORES if header.alone else min(max(header.processes, 1), RUNNER_CORES)
    return elapsed_s * cores


def read_runtimes(path: Path, shown: str | None = None) -> dict[str, float]:
    """The record's weights by check (``checks/x.py``); {} where there is no file. ``shown`` names the file in
    errors (default: ``path``)."""
    name = shown or str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError) as exc:
        raise RuntimesError(f"{name}: cannot be read: {exc}") from exc
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise RuntimesError(f"{name}:{exc.lineno}: not JSON: {exc.msg} (column {exc.colno})") from exc
    if not isinstance(data, dict):
        raise RuntimesError(f"{name}: must be a JSON object with \"version\" and \"seconds\", not "
                            f"{type(data).__name__}")
    unknown = sorted(set(data) - {"version", "note", "seconds"})
    if unknown:
        raise RuntimesError(f"{name}: unknown key {unknown[0]!r}: the record holds version, note and seconds")
    if data.get("version") != RUNTIMES_VERSION or isinstance(data.get("version"), bool):
        raise RuntimesError(f"{name}: version is {data.get('version')!r}; this numbook reads version "
                            f"{RUNTIMES_VERSION}: write it again with `numbook verify --record-times`")
    seconds = data.get("seconds")
    if not isinstance(seconds, dict):
        raise RuntimesError(f"{name}: \"seconds\" must be an object of check -> seconds, not "
                            f"{type(seconds).__name__}")
    out: dict[str, float] = {}
    for check, value in seconds.items():
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
            raise RuntimesError(f"{name}: seconds[{check!r}] is {json.dumps(value)}: write a number of seconds, "
                                f"0 or more")
        out[check] = float(value)
    return out


def write_runtimes(path: Path, seconds: Mapping[str, float]) -> dict[str, float]:
    """Write the record (keys sorted, weights at 2 significant digits); what it holds."""
    rounded = {c: round2(s) for c, s in sorted(seconds.items())}
    path.write_text(json.dumps({"version": RUNTIMES_VERSION, "note": NOTE, "seconds": rounded}, indent=1) + "\n",
                    encoding="utf-8")
    return rounded


@dataclass(frozen=True)
class Plan:
    """N shards of the checks: ``shards[i]`` is shard i+1's checks (sorted), ``weights[i]`` its core-seconds."""

    shards: list[list[str]]
    weights: list[float]
    unrecorded: list[str]   # checks the record does not name
    guess: float            # what each of them weighs
    of: dict[str, float]    # every check's weight, recorded or guessed

    @property
    def total(self) -> float:
        return sum(self.weights)

    @property
    def heaviest(self) -> float:
        return max(self.weights)

    @property
    def balance(self) -> float:
        """The heaviest shard over the mean shard (1.0 is perfect)."""
        return self.balance_of(self.shards)

    def balance_of(self, shards: list[list[str]]) -> float:
        """The heaviest of these shards over the mean, by this plan's weights (to compare another dealing)."""
        loads = [sum(self.of[c] for c in s) for s in shards]
        mean = sum(loads) / len(loads)
        return max(loads) / mean if mean else 1.0


def plan(checks: Iterable[str], n: int, record: Mapping[str, float] | None = None) -> Plan:
    """Deal the checks into ``n`` shards, longest first, each to the lightest shard so far."""
    if n < 1:
        raise ValueError(f"N is {n}: there must be at least one shard")
    unique = sorted(set(checks))
    record = record or {}
    known = [record[c] for c in unique if c in record]
    guess = statistics.median(known) if known else _UNRECORDED
    weigh = {c: record.get(c, guess) for c in unique}
    shards: list[list[str]] = [[] for _ in range(n)]
    loads = [0.0] * n
    for c in sorted(unique, key=lambda c: (-weigh[c], c)):
        i = min(range(n), key=lambda i: (loads[i], i))
        shards[i].append(c)
        loads[i] += weigh[c]
    return Plan([sorted(s) for s in shards], loads, [c for c in unique if c not in record], guess, weigh)


def plan_shards(checks: Iterable[str], n: int, record: Mapping[str, float] | None = None) -> list[list[str]]:
    """The ``n`` shards of :func:`plan`, each a sorted list of checks: a partition of the checks."""
    return plan(checks, n, record).shards


def shard(checks: Iterable[str], k: int, n: int, record: Mapping[str, float] | None = None) -> list[str]:
    """The k-th (1-based) of n deterministic shards; without a record, the sorted checks dealt round-robin."""
    if not 1 <= k <= n:
        raise ValueError(f"shard {k}/{n}: K must be between 1 and N")
    return plan_shards(checks, n, record)[k - 1]
