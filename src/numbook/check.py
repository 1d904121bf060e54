"""The API a check script uses to expose its inputs, values and sanity assertions.

A check is a plain script: ``python checks/x.py`` prints its trace and nothing else
happens. Run by the book's runner, the environment variable ``NUMBOOK_RESULT`` names a file;
at exit the check writes every recorded input, value and assertion there as JSON.

    from numbook.check import given, value, sanity

    B = given("B", 4)                        # an input, stated in the page's Given
    logits = torch.empty(B, T, V)
    value("fp32_mb", logits.nbytes / 1e6)    # a value claims in the prose bind to
    sanity("reshape_conserves", logits.numel() == flat.numel())

Names are unique per check. Values are numbers (int, float, bool), strings, or shapes
(tuples or lists of ints, ``torch.Size`` included); 0-d tensors and numpy scalars are
converted with ``.item()``.

A check that needs a GPU says so in a header comment the runner reads before running it:
``# numbook: requires=cuda, timeout=300``. What it times or reads off the GPU goes through
``measurement()``; everything derived from those numbers (bandwidths, ratios, sanities) is plain
code after them, so that a build without a GPU can derive it again from the frozen measurements:

    step_s = measurement("step_s", lambda: time_one_step(), unit="s")   # only this runs on the GPU
    tbs = value("achieved_tbs", nbytes / step_s / 1e12, unit="TB/s", measured="one decode step")
    sanity("below_peak", tbs < PEAK_TBS, "no step moves its bytes faster than the datasheet allows")

A measured figure carries how it was obtained: the samples behind it, the repeats (seeds, runs) and an
interval. ``estimate()`` computes it from one figure per repeat and records it (a t interval over the
repeats, or a percentile bootstrap with a fixed seed); ``value(..., n=, repeats=, interval=, interval_kind=)``
records one computed elsewhere:

    p99 = estimate("p99_ttft_ms", [p99_of(seed) for seed in range(5)], unit="ms", n=480, repeated="seeds",
                   measured="TTFT of 96 requests per seed, served on this machine")
    print(f"p99 TTFT {p99:.1f} ms, 95% CI {p99.lo:.1f}-{p99.hi:.1f} ms")

A check that runs a process group (``# numbook: processes=4`` in its header) starts its workers with
``run_group()``: each runs a function of the check in its own process, joined to the others by
``torch.distributed`` (gloo, over the loopback interface), and returns what it computed to the check's
main process, which records it. Workers record nothing themselves (``value()`` in a worker raises):

    def worker(rank, world, n):                 # at the top level: the workers import it
        x = torch.full((n,), float(rank))
        dist.all_reduce(x)
        return x.tolist()

    if __name__ == "__main__":                  # the workers import the check too: keep its work here
        n = given("n", 8)
        outs = run_group(worker, 4, n)          # [rank 0's list, ..., rank 3's]
        value("sum_0", outs[0][0])
"""

from __future__ import annotations

import atexit
import json
import math
import os
import re
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, TypeVar

__all__ = ["given", "value", "sanity", "figure", "fact", "measurement", "replaying", "estimate", "Estimate",
           "t_quantile", "run_group", "GroupError", "SanityError", "FactError", "MeasurementError", "RESULT_ENV",
           "PERTURB_ENV", "FACTS_ENV", "MEASUREMENTS_ENV"]

RESULT_ENV = "NUMBOOK_RESULT"
PERTURB_ENV = "NUMBOOK_PERTURB"
"""``numbook verify --perturb`` names one input here: ``given()`` returns it nudged (×1.01, or +1 for a count)."""
FACTS_ENV = "NUMBOOK_FACTS"
"""The book's facts file (``checks/facts.yml``), where ``fact()`` reads numbers taken from outside."""
MEASUREMENTS_ENV = "NUMBOOK_MEASUREMENTS"
"""Set by the runner when a build without a usable GPU replays a ``requires=cuda`` check: a JSON file of the
frozen measurements (``{"file": "checks/frozen/x.json", "measurements": {name: {"value": ...}}}``) that
``measurement()`` returns instead of measuring."""
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_RESERVED = {"free", "sanity"}

T = TypeVar("T")

_state: dict[str, Any] = {
    "inputs": {},
    "values": {},
    "sanity": {},
    "figures": {},
    "lines": {},
    "units": {},
    "dtypes": {},
    "facts": {},
    "fixed": {},
    "measured": {},
    "uncertainty": {},
    "nudges": {},
    "measurements": {},
}
_replay: dict[str, Any] = {}


class FactError(LookupError):
    """A fact is missing from the facts file, or has no source or date."""


class SanityError(AssertionError):
    """A sanity assertion of a check did not hold."""


class MeasurementError(LookupError):
    """A replayed check asked for a measurement its frozen file does not hold."""


def _main_only(what: str, name: str) -> None:
    """Refuse to record in a worker of ``run_group()``: only the check's main process writes its result."""
    mp = sys.modules.get("multiprocessing")
    if mp is not None and mp.parent_process() is not None:
        raise RuntimeError(f"{what}({name!r}) was called in a worker process: a worker returns what it computed, "
                           "and the check's main process records it (after run_group() returns)")


def _caller_line(depth: int = 2, name: str | None = None) -> int:
    """The line of the check that called the API function ``depth - 1`` frames up.

    A check that records through a helper of its own (``def rec(name, x): value(name, x, ...)``) would get the
    helper's line for every value; with ``name``, the frames of the same file are walked outwards from that call
    and the first line that spells the name in quotes is taken (the call site ``rec("gain", x)``), else the
    innermost one. A value recorded by a helper module beside the check (``checks/_driver.py``) is located at
    the check's line that called into it: a location names a line of the check.
    """
    import linecache

    frame = sys._getframe(depth)
    main = os.path.abspath(sys.argv[0]) if sys.argv and sys.argv[0] else ""
    here = os.path.abspath(frame.f_code.co_filename)
    if main and here != main and os.path.dirname(here) == os.path.dirname(main):
        outer: Any = frame.f_back
        while outer is not None and os.path.abspath(outer.f_code.co_filename) != main:
            outer = outer.f_back
        if outer is not None:
            frame = outer
    if name is None:
        return frame.f_lineno
    file, spelled = frame.f_code.co_filename, (f'"{name}"', f"'{name}'")
    f: Any = frame
    while f is not None and f.f_code.co_filename == file:
        if any(s in linecache.getline(file, f.f_lineno) for s in spelled):
            return int(f.f_lineno)
        f = f.f_back
    return frame.f_lineno


def _plain(x: Any) -> Any:
    """Convert library scalars and shapes to JSON-friendly Python values."""
    if isinstance(x, bool | int | float | str):
        return x
    if hasattr(x, "tolist") and hasattr(x, "ndim") and getattr(x, "ndim", 1) == 0:
        return x.item()
    if isinstance(x, tuple | list):  # torch.Size is a tuple
        return [_plain(v) for v in x]
    if hasattr(x, "item") and callable(x.item):
        try:
            return x.item()
        except (ValueError, RuntimeError):
            pass
    raise TypeError(f"cannot record a value of type {type(x).__name__}: {x!r}")


def _register(kind: str, name: str, x: Any) -> None:
    _main_only({"inputs": "given"}.get(kind, "value"), name)
    if not _NAME.match(name) or name in _RESERVED:
        raise ValueError(f"invalid {kind} name {name!r}: use a Python identifier, not 'free' or 'sanity'")
    for other in ("inputs", "values"):
        if name in _state[other]:
            raise ValueError(f"{kind} name {name!r} is recorded twice")
    _state[kind][name] = _plain(x)
    _state["lines"][name] = _caller_line(3, name)   # _register <- given/value <- the check


def _dtype(x: Any) -> str | None:
    """The floating dtype of a tensor or numpy scalar (``float32``), else None.

    It bounds the significant digits a claim may state."""
    dt = getattr(x, "dtype", None)
    if dt is None:
        return None
    text = str(dt).removeprefix("torch.")
    return text if text in ("float64", "float32", "float16", "bfloat16") else None


_ITEMS: dict[int, tuple[float, str]] = {}
"""id of a float that ``Tensor.item()`` returned from a low-precision tensor -> (the float, the tensor's dtype)."""


def _watch_items() -> None:
    """Make ``Tensor.item()`` remember the dtype of the low-precision tensor each float came from.

    ``value("loss", t.item())`` records a plain Python float: without this, a float32 loss would
    pass a claim written with 12 digits. Only the float object ``item()`` returned is recognised
    (arithmetic on it makes a new float, whose dtype is the author's to declare with ``dtype=``).
    The map holds the floats it names, so an id is never reused while it is in the map; it is
    emptied past 100,000 entries (a timing loop calls ``item()`` many times).
    """
    torch = sys.modules.get("torch")
    tensor = getattr(torch, "Tensor", None)
    if tensor is None or getattr(tensor.item, "_numbook", False):
        return
    original = tensor.item

    def item(self: Any) -> Any:
        x = original(self)
        if type(x) is float:
            dt = str(self.dtype).removeprefix("torch.")
            if dt in ("float32", "float16", "bfloat16"):
                if len(_ITEMS) >= 100_000:
                    _ITEMS.clear()
                _ITEMS[id(x)] = (x, dt)
        return x

    item._numbook = True  # type: ignore[attr-defined]
    tensor.item = item


def _item_dtype(x: Any) -> str | None:
    seen = _ITEMS.get(id(x)) if type(x) is float else None
    return seen[1] if seen is not None and seen[0] is x else None


def _describe(name: str, x: Any, unit: str | None, dtype: str | None) -> None:
    if unit:
        _state["units"][name] = unit
    found = dtype or _dtype(x) or _item_dtype(x)
    if found:
        _state["dtypes"][name] = found
    _watch_items()   # torch imported after this module: watch from the first recorded value on


def _nudge(x: Any, by: float | None = None) -> Any:
    """An input moved a little: a count by one, a float by 1% (or by ``by``, where the check says how);
    a list of floats element by element; anything else (a shape, a flag, a text) as it is."""
    if isinstance(x, bool):
        return x
    if by == 0:
        return x
    if by is not None and isinstance(x, int | float):
        return x + by
    if isinstance(x, int):
        return x + 1
    if isinstance(x, float):
        return x * 1.01
    if isinstance(x, list | tuple) and x and all(isinstance(v, float) for v in x):
        return type(x)(v * 1.01 for v in x)
    return x


def given(name: str, x: T, *, unit: str | None = None, nudge: float | None = None) -> T:
    """Record an input of the problem; the page's Given section must state it.

    ``nudge`` is how far ``numbook verify --perturb`` moves this input, where 1% (or one, for a
    count) would move no claim by the input's nature (a threshold that must cross a data point) or
    would make no valid input (a head count that must divide the width). ``nudge=0`` says that no
    small change of the input exists: a random seed names a draw, it does not measure anything;
    ``--perturb`` lists it as not nudged.
    """
    if os.environ.get(PERTURB_ENV) == name:
        x = _nudge(x, nudge)
    if nudge is not None:
        _state["nudges"][name] = nudge
    _register("inputs", name, x)
    _describe(name, x, unit, None)
    return x


def fact(key: str, name: str, *, unit: str | None = None, nudge: float | None = None) -> Any:
    """An input the book takes from outside (a GPU's bandwidth, a model's vocabulary), from the facts file.

    Each fact in ``checks/facts.yml`` has a ``value``, a ``source`` (spec sheet, paper or config
    file, by name and version) and the date it was ``read``; one without them is an error. The
    fact is recorded as the input ``name`` (``V = fact("llama2_vocab", "V")`` is ``given("V", …)``
    with a source), and the page shows the source with the number. ``nudge`` is as for ``given()``.
    """
    import yaml  # the facts file is YAML; pyyaml comes with MkDocs

    path = os.environ.get(FACTS_ENV) or os.path.join(os.path.dirname(os.path.abspath(sys.argv[0])), "facts.yml")
    root = os.environ.get("NUMBOOK_ROOT")
    shown = os.path.relpath(path, root) if root else path
    with open(path, encoding="utf-8") as fh:
        facts = yaml.safe_load(fh) or {}
    entry = facts.get(key) if isinstance(facts, dict) else None
    if not isinstance(entry, dict) or "value" not in entry:
        raise FactError(f"fact {key!r} is not in {shown} (known: {', '.join(sorted(facts)) or 'none'})")
    missing = [k for k in ("source", "read") if not str(entry.get(k) or "").strip()]
    if missing:
        raise FactError(f"fact {key!r} in {shown} has no {' and no '.join(missing)}: every number taken from "
                        "outside names its source (spec sheet, paper or config file, with its version) and the "
                        "date it was read")
    x = given(name, entry["value"], unit=unit, nudge=nudge)
    _state["lines"][name] = _caller_line(2, name)
    _state["facts"][name] = {"key": key, "source": str(entry["source"]), "read": str(entry["read"])}
    return x


def value(name: str, x: T, *, unit: str | None = None, dtype: str | None = None, fixed: str | None = None,
          measured: str | None = None, n: int | None = None, repeats: int | None = None, repeated: str = "runs",
          interval: tuple[float, float] | None = None, interval_kind: str | None = None) -> T:
    """Record a computed value that claims in the prose can bind to; returns ``x``.

    ``unit`` (``"MB"``, ``"MiB"``, ``"ms"``…) is checked against a unit word written after a
    claim. ``dtype`` (``"float32"``) is read from a tensor or numpy scalar when not given: a claim
    may not state more significant digits than it carries (fp32: 8, bf16: 3, fp16: 4, fp64: 16).
    ``fixed`` says why no input of the problem can move this value (a property of a dtype, a
    definition); ``numbook verify --perturb`` reports a claimed value that no input moves otherwise.
    ``measured`` says what was timed or measured on this machine: such a value moves from run to
    run whatever the inputs, so ``--perturb`` leaves it out of its comparisons (noise would pass
    every input as live) and lists it apart; the page states it only as a bound.

    A measured value says how it was obtained with all four of: ``n``, the samples behind it over all
    repeats; ``repeats``, how many times the measurement was repeated (``repeated`` names them in the plural:
    ``"seeds"``, ``"runs"``); ``interval=(lo, hi)``, which must contain ``x``; and ``interval_kind``, its level
    and how it was computed (``"95% t interval over 5 seeds"``). The page shows them beside every claim of the
    value, and the claims are tested against the interval. ``estimate()`` computes all of it.
    """
    if fixed and measured:
        raise ValueError(f"value {name!r} cannot be both fixed and measured")
    spread = _uncertainty(name, x, measured, n, repeats, repeated, interval, interval_kind)
    _register("values", name, x)
    if fixed:
        _state["fixed"][name] = fixed
    if measured:
        _state["measured"][name] = measured
    if spread is not None:
        _state["uncertainty"][name] = spread
    _describe(name, x, unit, dtype)
    return x


_LEVEL = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*%\s*\S")
"""The confidence level an ``interval_kind`` starts with: ``95% t interval over 5 seeds``."""
_OVER = re.compile(r"\bover (\d+) ([A-Za-z][A-Za-z-]*)")
"""The repeats an ``interval_kind`` names: ``over 5 seeds``."""


def _count(name: str, what: str, x: Any, meaning: str) -> int:
    if isinstance(x, bool) or not isinstance(x, int) or x < 1:
        raise ValueError(f"value {name!r}: {what} must be a positive whole number ({meaning}), not {x!r}")
    return x


def _uncertainty(name: str, x: Any, measured: str | None, n: Any, repeats: Any, repeated: Any, interval: Any,
                 kind: Any) -> dict[str, Any] | None:
    """The uncertainty record of a measured value (n, repeats, the interval and its kind), checked; None for none."""
    given = {"n": n, "repeats": repeats, "interval": interval, "interval_kind": kind}
    if all(v is None for v in given.values()):
        return None
    if not measured:
        raise ValueError(f"value {name!r}: n, repeats and interval say how a measured value was obtained; say what "
                         "was measured with measured=\"…\"")
    missing = [k for k, v in given.items() if v is None]
    if missing:
        raise ValueError(f"value {name!r}: a measured value with an interval records n (the samples over all "
                         "repeats), repeats (the runs or seeds), interval=(lo, hi) and interval_kind (\"95% t "
                         f"interval over 5 seeds\"); missing: {', '.join(missing)}")
    n = _count(name, "n", n, "the samples over all repeats")
    repeats = _count(name, "repeats", repeats, "the runs or seeds measured")
    if n < repeats:
        raise ValueError(f"value {name!r}: n = {n} samples over {repeats} repeats: n counts the samples over all "
                         "repeats, at least one per repeat")
    if (not isinstance(repeated, str) or not re.fullmatch(r"[A-Za-z][A-Za-z -]*", repeated.strip())
            or not repeated.strip().endswith("s")):
        raise ValueError(f"value {name!r}: repeated names what was repeated in the plural, like \"seeds\" or "
                         f"\"runs\", not {repeated!r}")
    point = _plain(x)
    if isinstance(point, bool) or not isinstance(point, int | float) or not math.isfinite(point):
        raise ValueError(f"value {name!r}: only a finite number can carry an interval, not {point!r}")
    try:
        lo, hi = (_plain(v) for v in interval)
    except (TypeError, ValueError):
        lo = hi = None
    if any(isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v) for v in (lo, hi)):
        raise ValueError(f"value {name!r}: interval must be (lo, hi), two finite numbers, not {interval!r}")
    ends = [float(lo), float(hi)]
    if ends[0] > ends[1]:
        raise ValueError(f"value {name!r}: interval {tuple(ends)!r} has its ends the wrong way round: write (lo, hi)")
    if not ends[0] <= point <= ends[1]:
        raise ValueError(f"value {name!r} = {point!r} lies outside its interval {tuple(ends)!r}: an interval must "
                         "contain the point it qualifies")
    m = _LEVEL.match(kind) if isinstance(kind, str) else None
    level = float(m.group(1)) / 100 if m else 0.0
    if not 0 < level < 1:
        raise ValueError(f"value {name!r}: interval_kind {kind!r} must start with its confidence level and say how "
                         "the interval was computed, like \"95% t interval over 5 seeds\" or \"95% percentile "
                         "bootstrap over 12 seeds (2000 resamples, seed 0)\"")
    over = _OVER.search(str(kind))
    if over and int(over.group(1)) not in (repeats, n):   # "over 5 seeds", or the samples: "over 480 requests"
        raise ValueError(f"value {name!r}: interval_kind {kind!r} says over {over.group(1)} {over.group(2)}, but "
                         f"repeats = {repeats}: the interval is computed over the repeats")
    return {"n": n, "repeats": repeats, "repeated": repeated.strip(), "lo": ends[0], "hi": ends[1], "level": level,
            "kind": str(kind).strip()}


# -- estimates of measured values ------------------------------------------------------------------
# The statistics below use only the standard library (math, random, statistics): the run-it-yourself script
# of a check (numbook.run.standalone) carries their source in place, so a reader's run computes the same
# interval without numbook.


def _t_within(t: float, df: int) -> float:
    """P(|T| <= t) for Student's t with ``df`` degrees of freedom: the finite sums of Abramowitz and Stegun
    26.7.3 (odd df) and 26.7.4 (even df), exact for every whole df."""
    theta = math.atan(t / math.sqrt(df))
    cos, sin = math.cos(theta), math.sin(theta)
    c2 = cos * cos
    if df % 2 == 1:
        total, term = 0.0, cos
        for k in range(1, (df - 1) // 2 + 1):   # cos θ + 2/3 cos³ θ + (2·4)/(3·5) cos⁵ θ + … (df - 2)
            total += term
            term *= c2 * (2 * k) / (2 * k + 1)
        return min(1.0, 2 / math.pi * (theta + sin * total))
    total, term = 0.0, 1.0
    for k in range(1, df // 2 + 1):   # 1 + 1/2 cos² θ + (1·3)/(2·4) cos⁴ θ + … (df - 2)
        total += term
        term *= c2 * (2 * k - 1) / (2 * k)
    return min(1.0, sin * total)


def t_quantile(p: float, df: int) -> float:
    """The ``p`` quantile of Student's t with ``df`` degrees of freedom: ``t_quantile(0.975, 4)`` is 2.776…,
    the multiplier of a 95% t interval over 5 repeats. Exact to about 1e-12 (bisection on the exact
    distribution function); past 100,000 degrees of freedom, the normal quantile."""
    if isinstance(df, bool) or not isinstance(df, int) or df < 1:
        raise ValueError(f"t_quantile: df must be a positive whole number, not {df!r}")
    if not 0 < p < 1:
        raise ValueError(f"t_quantile: p must lie strictly between 0 and 1, not {p!r}")
    if p < 0.5:
        return -t_quantile(1 - p, df)
    within = 2 * p - 1   # P(|T| <= t) = 2p - 1
    if df > 100_000:
        from statistics import NormalDist

        return NormalDist().inv_cdf(p)
    lo, hi = 0.0, 1.0
    while _t_within(hi, df) < within:
        lo, hi = hi, hi * 2
    for _ in range(200):
        mid = (lo + hi) / 2
        if _t_within(mid, df) < within:
            lo = mid
        else:
            hi = mid
        if hi - lo <= 1e-13 * hi:
            break
    return (lo + hi) / 2


def _interval(xs: list[float], level: float, method: str, resamples: int, seed: int) -> tuple[float, float, float]:
    """(mean, lo, hi): the mean of the per-repeat figures ``xs`` and its ``level`` interval, a t interval
    (mean ± t · s / √r) or a percentile bootstrap of the mean (``resamples`` resamples of the repeats, drawn with
    ``random.Random(seed)``)."""
    import random
    import statistics

    r = len(xs)
    point = math.fsum(xs) / r
    if method == "t":
        half = t_quantile((1 + level) / 2, r - 1) * statistics.stdev(xs) / math.sqrt(r)
        return point, point - half, point + half
    rng = random.Random(seed)
    means = sorted(math.fsum(xs[rng.randrange(r)] for _ in range(r)) / r for _ in range(resamples))
    alpha = 1 - level
    lo = means[int(math.floor(alpha / 2 * resamples))]
    hi = means[int(math.ceil((1 - alpha / 2) * resamples)) - 1]
    return point, min(lo, point), max(hi, point)


def _kind(level: float, method: str, r: int, repeated: str, resamples: int, seed: int) -> str:
    """How an interval was computed, in words: ``95% t interval over 5 seeds``."""
    over = f"over {r} {repeated}"
    return (f"{level * 100:g}% t interval {over}" if method == "t"
            else f"{level * 100:g}% percentile bootstrap {over} ({resamples} resamples, seed {seed})")


@dataclass(frozen=True)
class Estimate:
    """A measured value and its interval, as ``estimate()`` recorded them. ``float(e)`` and ``f"{e:.1f}"`` are the
    point; ``e.lo`` and ``e.hi`` the interval's ends."""

    point: float
    lo: float
    hi: float
    n: int
    repeats: int
    kind: str

    def __float__(self) -> float:
        return self.point

    def __format__(self, spec: str) -> str:
        return format(self.point, spec)


def estimate(name: str, per_repeat: Iterable[Any], *, measured: str, n: int, unit: str | None = None,
             level: float = 0.95, method: str = "t", repeated: str = "runs", resamples: int = 2000,
             seed: int = 0) -> Estimate:
    """Record a measured value from one figure per repeat (a p99 per seed, a time per run), with its interval.

    The value is the **mean of the per-repeat figures**; its interval is, by ``method``, a ``"t"`` interval
    over the repeats (mean ± t · s / √r, with Student's t at ``r - 1`` degrees of freedom) or a percentile
    ``"bootstrap"`` of that mean (``resamples`` resamples of the repeats, with a fixed ``seed``: the same
    figures give the same interval). ``n`` is the samples behind the figure over all repeats (480 requests
    over 5 seeds); ``repeated`` names the repeats in the plural, as the page shows them ("5 seeds").
    ``measured`` says what was measured, as for ``value()``. At least two repeats; at least 10 for
    ``"bootstrap"``, which undercovers with fewer (use ``"t"``). Returns an
    :class:`Estimate`; the value is recorded as for ``value(name, point, unit=unit, measured=measured, n=n,
    repeats=r, repeated=repeated, interval=(lo, hi), interval_kind=...)``.
    """
    try:
        xs = [float(_plain(v)) for v in per_repeat]
    except (TypeError, ValueError):
        raise ValueError(f"estimate {name!r}: per_repeat must be numbers, one per repeat, not {per_repeat!r}") from None
    if len(xs) < 2 or not all(math.isfinite(v) for v in xs):
        raise ValueError(f"estimate {name!r}: an interval needs at least two finite figures, one per repeat "
                         f"(got {xs!r})")
    if method not in ("t", "bootstrap"):
        raise ValueError(f"estimate {name!r}: method is \"t\" or \"bootstrap\", not {method!r}")
    if method == "bootstrap" and len(xs) < 10:
        raise ValueError(f"estimate {name!r}: a percentile bootstrap over {len(xs)} repeats gives an interval too "
                         "narrow (it undercovers below 10 repeats): use method=\"t\", or measure at least 10 repeats")
    if isinstance(level, bool) or not isinstance(level, int | float) or not 0 < level < 1:
        raise ValueError(f"estimate {name!r}: level is a fraction between 0 and 1, like 0.95, not {level!r}")
    if isinstance(resamples, bool) or not isinstance(resamples, int) or resamples < 100:
        raise ValueError(f"estimate {name!r}: resamples must be a whole number of at least 100, not {resamples!r}")
    point, lo, hi = _interval(xs, float(level), method, resamples, seed)
    kind = _kind(float(level), method, len(xs), str(repeated).strip(), resamples, seed)
    value(name, point, unit=unit, measured=measured, n=n, repeats=len(xs), repeated=repeated, interval=(lo, hi),
          interval_kind=kind)
    _state["lines"][name] = _caller_line(2, name)
    return Estimate(point, lo, hi, n, len(xs), kind)


def sanity(name: str, condition: Any, message: str = "", *, operands: tuple[Any, Any] | None = None,
           relation: str | tuple[str, ...] | None = None) -> None:
    """Assert a sanity property; a false condition stops the check with a SanityError.

    A sanity that backs a relation sentence ("the masked mean is larger than the plain mean")
    passes the two sides, each computed by its own route, as ``operands=(left, right)``: the page
    shows them beside what was asserted. ``relation`` declares, in the words of the author guide's
    relation grammar, what the condition asserts ("larger", "at most", "does not grow", "twice",
    "not"; a tuple for several): the verifier requires the sentence that cites this sanity to say the
    same, negation included, and tests a comparison on the operands where both are numbers.
    """
    _main_only("sanity", name)
    if not _NAME.match(name):
        raise ValueError(f"invalid sanity name {name!r}")
    if name in _state["sanity"]:
        raise ValueError(f"sanity name {name!r} is recorded twice")
    ok = bool(condition)
    entry: dict[str, Any] = {"ok": ok, "message": message}
    if operands is not None:
        left, right = operands
        entry["operands"] = [_plain(left), _plain(right)]
    if relation is not None:
        rels = (relation,) if isinstance(relation, str) else tuple(relation)
        if not rels or not all(isinstance(r, str) and r.strip() for r in rels):
            raise ValueError(f"sanity {name!r}: relation must be a non-empty text or a tuple of them, not {relation!r}")
        entry["relation"] = list(rels)
    _state["sanity"][name] = entry
    _state["lines"][name] = _caller_line(2, name)
    if not ok:
        raise SanityError(f"sanity '{name}' failed" + (f": {message}" if message else ""))


def _json(x: Any) -> Any:
    """A measurement as JSON holds it: numbers, texts, flags, None, and lists and text-keyed dicts of them."""
    if x is None or isinstance(x, bool | int | float | str):
        return x
    if isinstance(x, dict):
        if not all(isinstance(k, str) for k in x):
            raise TypeError(f"cannot record a measurement dict with keys that are not texts: {x!r}")
        return {k: _json(v) for k, v in x.items()}
    if isinstance(x, tuple | list):
        return [_json(v) for v in x]
    return _plain(x)


def replaying() -> bool:
    """True where this run derives a GPU check's values from frozen measurements, on a build with no GPU:
    ``measurement()`` returns the frozen numbers, and code that needs the GPU itself must not run."""
    return bool(os.environ.get(MEASUREMENTS_ENV))


def _frozen() -> dict[str, Any]:
    if not _replay:
        with open(os.environ[MEASUREMENTS_ENV], encoding="utf-8") as fh:
            _replay.update(json.load(fh))
    return _replay


def measurement(name: str, fn: Callable[[], Any], *, unit: str | None = None) -> Any:
    """A raw measurement of a GPU check (a time, a device's name, an error read off the GPU); returns it.

    On a GPU run it calls ``fn()`` and records its result (a number, a text, or lists and text-keyed
    dicts of them: a tuple comes back as a list), which ``numbook freeze`` writes to the check's frozen
    file. Where a build has no GPU, the runner replays the check on its CPU with that file: here
    ``measurement()`` returns the frozen value and does not call ``fn``, and every value, sanity and
    figure after it is computed again on this build. ``unit`` documents the number in the frozen file.
    """
    if not _NAME.match(name) or name in _RESERVED:
        raise ValueError(f"invalid measurement name {name!r}: use a Python identifier, not 'free' or 'sanity'")
    if name in _state["measurements"]:
        raise ValueError(f"measurement name {name!r} is recorded twice")
    if replaying():
        frozen = _frozen()
        held = frozen.get("measurements", {})
        if name not in held:
            raise MeasurementError(f"measurement {name!r} is not in the frozen measurements of {frozen.get('file')} "
                                   f"(it holds {', '.join(sorted(held)) or 'none'}): refresh them with `nox -s freeze` "
                                   "on a GPU machine")
        x = held[name]["value"]
    else:
        x = _json(fn())
    entry: dict[str, Any] = {"value": x}
    if unit:
        entry["unit"] = unit
    _state["measurements"][name] = entry
    return x


def figure(name: str, fig: Any, caption: str) -> None:
    """Record a matplotlib figure as SVG; a page shows it with ``[[figure:name]]``.

    The SVG is written with text as paths, so it needs no font; the figure is closed.
    """
    import io

    if not _NAME.match(name) or name in _state["figures"]:
        raise ValueError(f"invalid or repeated figure name {name!r}")
    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight", metadata={"Date": None})
    _state["figures"][name] = {"caption": caption, "svg": buf.getvalue()}
    _state["lines"][name] = _caller_line(2, name)
    try:
        import matplotlib.pyplot as plt

        plt.close(fig)
    except ImportError:  # pragma: no cover
        pass


class GroupError(RuntimeError):
    """A worker of ``run_group()`` raised, died or did not finish in time; the message names its rank."""


def _group_worker(fn: Callable[..., Any], rank: int, world: int, store: str, results: Any, args: tuple[Any, ...],
                  timeout_s: float) -> None:
    """One worker of ``run_group()``: join the group, run ``fn(rank, world, *args)``, send back what it returned."""
    import datetime
    import pickle
    import socket
    import traceback

    import torch
    import torch.distributed as dist

    try:
        # one thread per worker, as torchrun sets for several processes on one machine (OMP_NUM_THREADS=1): the
        # workers share the cores, and a forked worker cannot use its parent's OpenMP threads (it would hang)
        torch.set_num_threads(1)
        if "GLOO_SOCKET_IFNAME" not in os.environ:   # gloo binds the loopback interface: lo (Linux), lo0 (macOS)
            names = [n for _, n in socket.if_nameindex() if n.startswith("lo")]
            if names:
                os.environ["GLOO_SOCKET_IFNAME"] = names[0]
        dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=world,
                                timeout=datetime.timedelta(seconds=timeout_s))
        results.put((rank, None, None))   # joined: the main process starts the clock when every rank has
        try:
            out = fn(rank, world, *args)
        finally:
            dist.destroy_process_group()
        # pickled here, by value: multiprocessing would send a tensor as a handle to this process's shared
        # memory, which is gone once the worker has exited
        results.put((rank, True, pickle.dumps(out)))
    except BaseException:   # noqa: BLE001  (sent to the main process, which stops the group and raises)
        results.put((rank, False, traceback.format_exc()))


def run_group(fn: Callable[..., Any], world: int, *args: Any, timeout_s: float = 60.0) -> list[Any]:
    """Run ``fn(rank, world, *args)`` in ``world`` new processes joined in one ``torch.distributed`` process group
    (gloo over the loopback interface; the rendezvous is a file in a temporary folder) and return what each rank's
    ``fn`` returned, in rank order (plain values: numbers, lists, numpy arrays; a tensor is sent as a copy).

    ``fn`` is defined at the top level of the script, and the script's own work sits under
    ``if __name__ == "__main__":``: each worker is a new interpreter that imports the script to find ``fn``
    (multiprocessing's spawn; in a notebook, whose functions no new interpreter can import, the workers are
    forked). Each worker computes with one thread, as torchrun's workers do. A rank that raises, exits or has
    not returned within ``timeout_s`` seconds stops the group: every worker is killed and a GroupError names
    the rank, with its traceback. The ``timeout_s`` seconds count from when every rank has joined the group
    (how long the workers take to start, importing torch, only the check's own timeout bounds) and also bound
    gloo's wait in a collective.
    """
    import multiprocessing
    import pickle
    import queue
    import tempfile

    if isinstance(world, bool) or not isinstance(world, int) or world < 1:
        raise ValueError(f"run_group: world must be a whole number of processes, at least 1, not {world!r}")
    # spawn where a new interpreter can import fn from its file; fork where it cannot (a notebook's function)
    home = sys.modules.get(getattr(fn, "__module__", "") or "")
    importable = bool(getattr(home, "__file__", None)) and getattr(home, getattr(fn, "__qualname__", ""), None) is fn
    ctx: Any = multiprocessing.get_context("spawn" if importable else "fork")
    with tempfile.TemporaryDirectory(prefix="group-") as tmp:
        results = ctx.Queue()
        procs = [ctx.Process(target=_group_worker, name=f"rank {r}",
                             args=(fn, r, world, os.path.join(tmp, "store"), results, args, timeout_s))
                 for r in range(world)]
        got: dict[int, Any] = {}
        joined: set[int] = set()
        try:
            for p in procs:
                p.start()
            deadline = math.inf   # starting the workers is bounded by the check's own timeout, not this one
            while len(got) < world:
                try:
                    rank, ok, out = results.get(timeout=0.1)
                except queue.Empty:
                    for r, p in enumerate(procs):
                        if r not in got and p.exitcode is not None:
                            raise GroupError(f"rank {r} of {world} exited (code {p.exitcode}) before it returned; "
                                             "the group was stopped") from None
                    if time.monotonic() > deadline:
                        late = [r for r in range(world) if r not in got]
                        raise GroupError(f"rank {late[0]} of {world} had not returned after {timeout_s:g} s "
                                         f"(ranks not returned: {late}); the group was stopped") from None
                    continue
                if ok is None:
                    joined.add(rank)
                    if len(joined) == world:
                        deadline = time.monotonic() + timeout_s
                    continue
                if not ok:
                    raise GroupError(f"rank {rank} of {world} raised; the group was stopped. Its traceback:\n{out}")
                got[rank] = pickle.loads(out)
            for p in procs:
                p.join(timeout=10)
        finally:
            for p in procs:
                if p.is_alive():
                    p.kill()
            for p in procs:
                if p.pid is not None:
                    p.join()
            results.close()
    return [got[r] for r in range(world)]


def _write_result() -> None:
    path = os.environ.get(RESULT_ENV)
    mp = sys.modules.get("multiprocessing")
    if not path or (mp is not None and mp.parent_process() is not None):   # a worker writes nothing
        return
    children = os.times()
    data = {
        "inputs": _state["inputs"],
        "values": _state["values"],
        "sanity": _state["sanity"],
        "figures": _state["figures"],
        "lines": _state["lines"],
        "units": _state["units"],
        "dtypes": _state["dtypes"],
        "facts": _state["facts"],
        "fixed": _state["fixed"],
        "measured": _state["measured"],
        "uncertainty": _state["uncertainty"],
        "nudges": _state["nudges"],
        "measurements": _state["measurements"],
        # CPU seconds of this process, all threads, and of the workers it waited for: steadier than wall time
        "cpu_s": time.process_time() + children.children_user + children.children_system,
    }
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(data, fh)


atexit.register(_write_result)
_watch_items()   # the warm parent imported torch before the check: watch from the first line
