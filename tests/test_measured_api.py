"""A measured value carries how it was obtained: the check API records n, repeats and an interval, and computes them.

``value(..., measured=..., n=, repeats=, interval=, interval_kind=)`` records an interval computed elsewhere and
refuses one that does not hold together; ``estimate()`` computes the mean of per-repeat figures and its t or
bootstrap interval with the standard library alone; the run-it-yourself script computes the same interval.
"""

from __future__ import annotations

import json
import math
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import numbook.check as check_api
from numbook.check import estimate, t_quantile, value
from numbook.core.result import CheckResult, Uncertainty
from numbook.run.standalone import script

SEEDS = [41.0, 39.5, 44.2, 40.1, 42.3]


@pytest.fixture(autouse=True)
def fresh_state(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test records into an empty check state, restored afterwards."""
    for key in list(check_api._state):
        monkeypatch.setitem(check_api._state, key, {})


# -- Student's t, without scipy ----------------------------------------------------------------------
@pytest.mark.parametrize(("p", "df", "table"), [
    (0.975, 1, 12.7062), (0.975, 2, 4.3027), (0.975, 3, 3.1824), (0.975, 4, 2.7764), (0.975, 9, 2.2622),
    (0.975, 29, 2.0452), (0.975, 30, 2.0423), (0.975, 100, 1.9840), (0.95, 5, 2.0150), (0.995, 4, 4.6041),
    (0.9995, 10, 4.5869), (0.9, 1, 3.0777), (0.6, 7, 0.2632),
])
def test_t_quantile_matches_the_printed_table(p: float, df: int, table: float) -> None:
    assert round(t_quantile(p, df), 4) == table


def test_t_quantile_is_exact_where_a_closed_form_exists_and_symmetric() -> None:
    # df = 1 is the Cauchy distribution: tan(pi (p - 1/2)); df = 2: (2p - 1) sqrt(2 / (4p(1 - p)))
    assert t_quantile(0.975, 1) == pytest.approx(math.tan(math.pi * 0.475), rel=1e-11)
    assert t_quantile(0.975, 2) == pytest.approx(0.95 * math.sqrt(2 / (4 * 0.975 * 0.025)), rel=1e-11)
    assert t_quantile(0.025, 4) == -t_quantile(0.975, 4)
    assert t_quantile(0.975, 200_000) == pytest.approx(1.959964, abs=1e-6)   # the normal quantile


@pytest.mark.parametrize(("args", "message"), [
    ((0.975, 0), "t_quantile: df must be a positive whole number, not 0"),
    ((1.0, 4), "t_quantile: p must lie strictly between 0 and 1, not 1.0"),
])
def test_t_quantile_refuses_what_has_no_quantile(args: tuple[float, int], message: str) -> None:
    with pytest.raises(ValueError) as err:
        t_quantile(*args)
    assert str(err.value) == message


# -- estimate() --------------------------------------------------------------------------------------
def test_estimate_is_the_mean_of_the_repeats_with_a_t_interval_over_them() -> None:
    e = estimate("p99_ttft_ms", SEEDS, unit="ms", n=480, repeated="seeds", measured="TTFT of 96 requests per seed")
    mean, s = statistics.fmean(SEEDS), statistics.stdev(SEEDS)
    half = 2.7764451 * s / math.sqrt(5)
    assert e.point == pytest.approx(41.42) and float(e) == e.point and f"{e:.1f}" == "41.4"
    assert (e.lo, e.hi) == (pytest.approx(mean - half, rel=1e-7), pytest.approx(mean + half, rel=1e-7))
    assert (e.n, e.repeats, e.kind) == (480, 5, "95% t interval over 5 seeds")
    assert check_api._state["values"]["p99_ttft_ms"] == e.point
    assert check_api._state["measured"]["p99_ttft_ms"] == "TTFT of 96 requests per seed"
    assert check_api._state["units"]["p99_ttft_ms"] == "ms"
    assert check_api._state["uncertainty"]["p99_ttft_ms"] == {
        "n": 480, "repeats": 5, "repeated": "seeds", "lo": e.lo, "hi": e.hi, "level": 0.95,
        "kind": "95% t interval over 5 seeds"}


TWELVE = [41.0, 39.5, 44.2, 40.1, 42.3, 43.0, 38.8, 41.7, 40.6, 45.1, 39.9, 42.8]


def test_a_bootstrap_interval_is_seeded_so_the_same_figures_give_the_same_interval() -> None:
    a = estimate("a_ms", TWELVE, unit="ms", n=12, measured="timed", method="bootstrap", level=0.9)
    b = estimate("b_ms", TWELVE, unit="ms", n=12, measured="timed", method="bootstrap", level=0.9)
    c = estimate("c_ms", TWELVE, unit="ms", n=12, measured="timed", method="bootstrap", level=0.9, seed=1)
    assert (a.lo, a.hi) == (b.lo, b.hi) != (c.lo, c.hi)
    assert min(TWELVE) <= a.lo <= a.point <= a.hi <= max(TWELVE)
    assert a.kind == "90% percentile bootstrap over 12 runs (2000 resamples, seed 0)"
    same = estimate("flat", [2.5] * 10, n=10, measured="timed", method="bootstrap")
    assert (same.lo, same.point, same.hi) == (2.5, 2.5, 2.5)


def test_a_bootstrap_over_fewer_than_ten_repeats_is_refused_for_t() -> None:
    """A percentile bootstrap of a few repeats is narrower than the t interval and undercovers: estimate() refuses
    it below 10 repeats and names the fix."""
    with pytest.raises(ValueError) as err:
        estimate("p99_ms", SEEDS, unit="ms", n=480, measured="timed", method="bootstrap", repeated="seeds")
    assert str(err.value) == (
        "estimate 'p99_ms': a percentile bootstrap over 5 repeats gives an interval too narrow (it undercovers "
        "below 10 repeats): use method=\"t\", or measure at least 10 repeats")
    assert "p99_ms" not in check_api._state["values"]
    t = estimate("p99_ms", SEEDS, unit="ms", n=480, measured="timed", repeated="seeds")
    assert t.kind == "95% t interval over 5 seeds"


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"per_repeat": [41.0]},
     "estimate 'x': an interval needs at least two finite figures, one per repeat (got [41.0])"),
    ({"per_repeat": [1.0, math.nan]},
     "estimate 'x': an interval needs at least two finite figures, one per repeat (got [1.0, nan])"),
    ({"per_repeat": ["a", "b"]}, "estimate 'x': per_repeat must be numbers, one per repeat, not ['a', 'b']"),
    ({"method": "bca"}, "estimate 'x': method is \"t\" or \"bootstrap\", not 'bca'"),
    ({"level": 95}, "estimate 'x': level is a fraction between 0 and 1, like 0.95, not 95"),
    ({"method": "bootstrap", "resamples": 10, "per_repeat": [41.0, 39.5, 44.2, 40.1, 42.3] * 2},
     "estimate 'x': resamples must be a whole number of at least 100, not 10"),
    ({"n": 3}, "value 'x': n = 3 samples over 5 repeats: n counts the samples over all repeats, at least one per "
               "repeat"),
])
def test_estimate_refuses_what_gives_no_interval(kwargs: dict[str, Any], message: str) -> None:
    args: dict[str, Any] = {"per_repeat": SEEDS, "n": 480, "measured": "timed", **kwargs}
    with pytest.raises(ValueError) as err:
        estimate("x", args.pop("per_repeat"), **args)
    assert str(err.value) == message


# -- value(..., interval=...) ------------------------------------------------------------------------
GOOD: dict[str, Any] = {"measured": "timed", "n": 480, "repeats": 5, "interval": (37.0, 46.0),
                        "interval_kind": "95% t interval over 5 seeds"}


def test_value_records_an_interval_computed_elsewhere() -> None:
    assert value("p99_ms", 41.2, unit="ms", repeated="seeds", **GOOD) == 41.2
    assert check_api._state["uncertainty"]["p99_ms"] == {
        "n": 480, "repeats": 5, "repeated": "seeds", "lo": 37.0, "hi": 46.0, "level": 0.95,
        "kind": "95% t interval over 5 seeds"}
    value("t_ms", 3.0, measured="timed on this machine")   # a measured value without an interval still records
    assert "t_ms" not in check_api._state["uncertainty"]


@pytest.mark.parametrize(("change", "message"), [
    ({"measured": None}, "value 'x': n, repeats and interval say how a measured value was obtained; say what was "
                         "measured with measured=\"…\""),
    ({"interval_kind": None, "n": None},
     "value 'x': a measured value with an interval records n (the samples over all repeats), repeats (the runs or "
     "seeds), interval=(lo, hi) and interval_kind (\"95% t interval over 5 seeds\"); missing: n, interval_kind"),
    ({"n": 0}, "value 'x': n must be a positive whole number (the samples over all repeats), not 0"),
    ({"n": 4.5}, "value 'x': n must be a positive whole number (the samples over all repeats), not 4.5"),
    ({"repeats": True}, "value 'x': repeats must be a positive whole number (the runs or seeds measured), not True"),
    ({"interval": (37.0,)}, "value 'x': interval must be (lo, hi), two finite numbers, not (37.0,)"),
    ({"interval": (37.0, math.inf)}, "value 'x': interval must be (lo, hi), two finite numbers, not (37.0, inf)"),
    ({"interval": (46.0, 37.0)}, "value 'x': interval (46.0, 37.0) has its ends the wrong way round: write (lo, hi)"),
    ({"interval": (42.0, 46.0)}, "value 'x' = 41.2 lies outside its interval (42.0, 46.0): an interval must contain "
                                 "the point it qualifies"),
    ({"interval_kind": "t over seeds"},
     "value 'x': interval_kind 't over seeds' must start with its confidence level and say how the interval was "
     "computed, like \"95% t interval over 5 seeds\" or \"95% percentile bootstrap over 12 seeds (2000 resamples, "
     "seed 0)\""),
    ({"interval_kind": "100% sure"},
     "value 'x': interval_kind '100% sure' must start with its confidence level and say how the interval was "
     "computed, like \"95% t interval over 5 seeds\" or \"95% percentile bootstrap over 12 seeds (2000 resamples, "
     "seed 0)\""),
    ({"repeated": ""}, "value 'x': repeated names what was repeated in the plural, like \"seeds\" or \"runs\", not ''"),
    ({"repeated": "seed"},
     "value 'x': repeated names what was repeated in the plural, like \"seeds\" or \"runs\", not 'seed'"),
    ({"repeats": 3}, "value 'x': interval_kind '95% t interval over 5 seeds' says over 5 seeds, but repeats = 3: the "
                     "interval is computed over the repeats"),
    ({"interval_kind": "95% percentile bootstrap over 5 seedz", "n": 480, "repeats": 4},
     "value 'x': interval_kind '95% percentile bootstrap over 5 seedz' says over 5 seedz, but repeats = 4: the "
     "interval is computed over the repeats"),
])
def test_value_refuses_an_interval_that_does_not_hold_together(change: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError) as err:
        value("x", 41.2, **{**GOOD, **change})
    assert str(err.value) == message
    assert "x" not in check_api._state["values"]   # nothing is recorded


def test_an_interval_kind_may_name_the_repeats_or_the_samples() -> None:
    value("a_ms", 41.2, **{**GOOD, "interval_kind": "95% percentile bootstrap over 480 requests"})
    value("b_ms", 41.2, **{**GOOD, "interval_kind": "95% t interval over 5 seeds, 96 requests each"})
    assert check_api._state["uncertainty"]["a_ms"]["kind"] == "95% percentile bootstrap over 480 requests"


def test_only_a_number_carries_an_interval() -> None:
    with pytest.raises(ValueError) as err:
        value("x", [1.0, 2.0], **GOOD)
    assert str(err.value) == "value 'x': only a finite number can carry an interval, not [1.0, 2.0]"


# -- the result file, and the script a reader runs -----------------------------------------------------
CHECK = '''\
from numbook.check import estimate, value

e = estimate("p99_ms", [41.0, 39.5, 44.2, 40.1, 42.3], unit="ms", n=480, repeated="seeds", measured="x")
b = estimate("p50_ms", [11, 12.5, 10, 11, 11, 12, 12, 10, 11, 12], unit="ms", n=100, method="bootstrap", measured="x")
value("plain_ms", 3.0, measured="x")
print(f"p99 {e:.2f} ms, {e.kind}: {e.lo:.3f}-{e.hi:.3f}")
print(f"p50 {b:.2f} ms, {b.kind}: {b.lo:.3f}-{b.hi:.3f}")
'''


def test_the_result_file_carries_the_uncertainty_and_the_line_of_the_estimate(tmp_path: Path) -> None:
    path = tmp_path / "c.py"
    path.write_text(CHECK, encoding="utf-8")
    out = tmp_path / "result.json"
    proc = subprocess.run([sys.executable, str(path)], env={**os.environ, "NUMBOOK_RESULT": str(out)},
                          capture_output=True, text=True, timeout=60, check=True)
    data = json.loads(out.read_text(encoding="utf-8"))
    assert data["lines"]["p99_ms"] == 3 and data["lines"]["p50_ms"] == 4
    assert set(data["uncertainty"]) == {"p99_ms", "p50_ms"}
    res = CheckResult("checks/c.py", "ok", **{k: data[k] for k in ("values", "measured", "uncertainty")})
    spread = res.spread("p99_ms")
    assert spread == Uncertainty(480, 5, "seeds", spread.lo, spread.hi, 0.95, "95% t interval over 5 seeds")
    assert (spread.repeats_words, spread.level_words) == ("5 seeds", "95%")
    assert res.spread("plain_ms") is None
    assert CheckResult.from_dict(res.to_dict()) == res   # the cache and the bundles carry it
    assert proc.stdout.splitlines()[0] == f"p99 41.42 ms, 95% t interval over 5 seeds: {spread.lo:.3f}-{spread.hi:.3f}"

    # the run-it-yourself script computes the same intervals without numbook
    standalone = tmp_path / "alone.py"
    standalone.write_text(script(path, tmp_path, title="t"), encoding="utf-8")
    assert "from numbook" not in standalone.read_text(encoding="utf-8")
    alone = subprocess.run([sys.executable, "-I", str(standalone)], capture_output=True, text=True, timeout=60,
                           check=True, cwd=tmp_path)
    assert alone.stdout == proc.stdout


def test_an_uncertainty_record_from_elsewhere_that_is_not_one_reads_as_none() -> None:
    res = CheckResult("checks/c.py", "ok", uncertainty={"a": {"n": 1}, "b": [1, 2], "c": {
        "n": "480", "repeats": 5, "lo": 1.0, "hi": 2.0, "level": 0.95}}, values={})
    res.uncertainty["e"] = {"n": 4, "repeats": 2, "lo": float("nan"), "hi": 2.0, "level": 0.95}
    res.uncertainty["f"] = {"n": 4, "repeats": 2, "lo": 3.0, "hi": 2.0, "level": 0.95}
    assert [res.spread(k) for k in "abcdef"] == [None] * 6
    assert Uncertainty(1, 1, "runs", 0.0, 1.0, 0.95, "").repeats_words == "1 run"
