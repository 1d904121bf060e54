"""A small book whose check measures with ``estimate()``, built for real with ``mkdocs build --strict``: the page
shows the interval beside the figure and in the check's stamp, the ledger carries it, and a bound the interval
does not satisfy fails the build at its line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from test_build import build, copy_tiny, edit, verify, warnings

pytestmark = pytest.mark.slow

A03 = "problems/I.1.A03.md"
CHECK = '''\
"""I.1.A03: the p99 latency of a simulated server, over seeds."""

import random

from numbook.check import estimate, given, sanity

seeds = given("seeds", 5)
per_seed = given("requests", 96)


def p99(seed: int) -> float:
    """The p99 of one seed's request latencies, in ms (drawn, not timed: the tiny book builds anywhere)."""
    rng = random.Random(seed)
    lat = sorted(rng.gauss(40.0, 4.0) for _ in range(per_seed))
    return lat[round(0.99 * (len(lat) - 1))]


p = estimate("p99_ms", [p99(s) for s in range(seeds)], unit="ms", n=seeds * per_seed, repeated="seeds",
             measured="latencies of a simulated server, drawn per seed")
sanity("holds_point", p.lo <= p.point <= p.hi, "the interval holds its point")
print(f"p99 {p:.2f} ms, {p.kind}: {p.lo:.2f} to {p.hi:.2f} ms")
'''
PAGE = '''\
---
id: I.1.A03
title: The p99 latency of a simulated server
check: i1_a03_latency.py
---

## Statement

How slow is the slowest request in a hundred, and how sure are we?

## Given

There are [[5|seeds]] seeds of [[96|requests]] requests each.

## Find

The p99 latency with its interval.

## Strategy

Take the p99 of each seed, then their mean and a t interval over the seeds.

## Solution

The p99 latency is [[48.5|p99_ms]] ms.

## Answer

It stays under [[50|p99_ms]] ms.

## Check — numeric

```check
```

## Check — sanity

- The interval holds its point. [[sanity:holds_point]]

## Where this breaks

A real server is not a normal distribution.

## Variation

Ten seeds.
'''


def measured_book(tmp_path: Path) -> Path:
    root = copy_tiny(tmp_path)
    (root / "checks/i1_a03_latency.py").write_text(CHECK, encoding="utf-8")
    (root / A03).write_text(PAGE, encoding="utf-8")
    return root


def test_a_measured_figure_is_built_with_its_interval_on_the_page_and_in_the_ledger(tmp_path: Path) -> None:
    root = measured_book(tmp_path)
    proc = build(root)
    assert proc.returncode == 0, proc.stderr
    page = (root / "site/problems/I.1.A03/index.html").read_text(encoding="utf-8")
    ci = ('<span class="nb-ci" title="95% t interval over 5 seeds: 47.6011 to 49.4474 ms, n = 480">'
          "(n = 480, 5 seeds, 95% CI {} ms)</span>")
    assert f'tabindex="0">48.5</span> ms {ci.format("47.6–49.5")}.' in page           # the Solution's number
    assert f'tabindex="0">50</span> ms {ci.format("47.6–49.5")}.' in page             # the Answer's bound
    assert 'data-ci-lo="47.60105' in page and 'data-n="480" data-repeats="5"' in page
    assert ('<span class="nb-stamp-label">Measured</span> p99_ms = 48.5242 ms, 95% CI 47.6011–49.4474 ms '
            "(n = 480, 5 seeds; 95% t interval over 5 seeds; latencies of a simulated server, drawn per seed)") in page
    entries = json.loads((root / "site/numbers.json").read_text(encoding="utf-8"))["claims"]
    bound = next(e for e in entries if e["name"] == "p99_ms" and e["written"] == "50")
    assert (bound["n"], bound["repeats"], bound["kind"]) == (480, 5, "95% t interval over 5 seeds")
    assert (bound["lo"], bound["hi"]) == ("47.60105442241434", "49.44736984831321")


def test_a_bound_the_interval_does_not_satisfy_fails_the_build_at_its_line(tmp_path: Path) -> None:
    root = measured_book(tmp_path)
    edit(root, A03, "It stays under [[50|p99_ms]] ms.", "It stays under [[49.4|p99_ms]] ms.")
    proc = build(root)
    assert proc.returncode == 1
    assert warnings(proc) == [
        "problems/I.1.A03.md:29: claim 'p99_ms' states the bound < 49.4 (written 'under 49.4'), which its interval "
        "does not satisfy: checks/i1_a03_latency.py measured 48.524212135363776 ms, 95% CI 47.60105442241434 to "
        "49.44736984831321 ms (n = 480, 5 seeds; 95% t interval over 5 seeds), and its upper end 49.44736984831321 is "
        "not < 49.4: a bound on a measured value holds for its whole interval"]
    out = verify(root)
    assert out.returncode == 1 and out.stderr.splitlines()[0] == warnings(proc)[0]
