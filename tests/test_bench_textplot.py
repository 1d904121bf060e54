"""Text plots and timing helpers of servebench."""

from __future__ import annotations

import torch

from servebench.ceilings import best_time, median_time
from servebench.textplot import bars, scatter


def test_bars_scale_to_the_largest() -> None:
    out = bars([("a", 1.0), ("bb", 4.0)], width=8, unit=" ms")
    assert out.splitlines() == [" a |##      | 1.00 ms", "bb |########| 4.00 ms"]
    assert bars([]) == ""


def test_scatter_places_marks_at_the_corners() -> None:
    out = scatter([(1.0, 1.0, "a"), (10.0, 5.0, "b")], width=10, height=4, xlabel="x", ylabel="y")
    lines = out.splitlines()
    assert lines[0] == "y"
    assert lines[1].endswith("|         b") and lines[1].startswith("5")
    assert lines[4].endswith("|a         ") and lines[4].startswith("1")
    assert lines[-2].strip().startswith("1") and lines[-2].rstrip().endswith("10")
    assert scatter([]) == ""


def test_scatter_log_axis() -> None:
    out = scatter([(1.0, 1.0, "a"), (10.0, 2.0, "b"), (100.0, 3.0, "c")], width=11, height=3, logx=True)
    grid = [line.split("|", 1)[1] for line in out.splitlines()[1:4]]
    assert grid == ["          c", "     b     ", "a          "]


def test_best_and_median_time() -> None:
    calls = []
    cpu = torch.device("cpu")
    t_best = best_time(lambda: calls.append(1), cpu, repeats=5, warmup=2)
    t_med = median_time(lambda: calls.append(1), cpu, repeats=5, warmup=0)
    assert len(calls) == 12
    assert t_best >= 0 and t_med >= 0
