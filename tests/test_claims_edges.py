"""The edges of a literal's verdict that mutation testing found unpinned (issue 18).

Each case is a literal and a value in, a verdict out: a bound at exactly its number, a tolerance
on every literal kind, number words compared exactly, the clean-up of thin spaces and the Unicode
minus, significant figures of negative and leading-zero mantissas, a value exactly on a
tolerance's edge.
"""

from __future__ import annotations

import pytest

from numbook.core.claims import parse_literal, parse_tolerance


@pytest.mark.parametrize(
    ("text", "value", "passes"),
    [
        # strict bounds refuse their own number; inclusive ones accept it
        ("less than 5", 5, False),
        ("under 5", 5, False),
        ("less than 5", 4.999, True),
        ("more than 5", 5, False),
        ("more than 5", 5.001, True),
        ("at most 5", 5, True),
        ("at most 5", 5.001, False),
        ("at least 5", 5, True),
        ("< 5", 5, False),
        ("> 5", 5, False),
        ("≤ 5", 5, True),
        ("≥ 5", 5, True),
        # number words are exact, not rounded
        ("three", 3.4, False),
        ("three", 2.6, False),
        ("three", 3.0, True),
        # thin spaces, spaces and TeX thin spaces group thousands; the Unicode minus is a minus
        ("65 536 000", 65_536_000, True),
        ("65\u2009536\u2009000", 65_536_000, True),
        ("65\\,536", 65_536, True),
        ("65{,}536", 65_536, True),
        ("−1.5", -1.5, True),
        ("−1.5", 1.5, False),
        # significant figures of a negative and of a leading-zero mantissa
        ("-6.55e7", -65_540_000, True),
        ("-6.55e7", -65_560_000, False),
        ("-6.55e7", 65_540_000, False),
        ("0.5e3", 500, True),
        ("0.5e3", 540, True),     # one significant figure: 540 is 5e2
        ("0.5e3", 560, False),
    ],
)
def test_a_literal_at_its_edge(text: str, value: float, passes: bool) -> None:
    assert parse_literal(text).matches(value) is passes


@pytest.mark.parametrize(
    ("text", "tol", "value", "passes"),
    [
        # a value exactly on the edge of the tolerance passes; just past it fails
        ("100", "10", 110, True),
        ("100", "10", 90, True),
        ("100", "10", 110.0001, False),
        ("100", "10%", 110, True),
        # the tolerance holds for every kind of number, not only plain decimals
        ("6.55e7", "10%", 70_000_000, True),       # 3 significant figures alone would refuse it
        ("6.55e7", "10%", 73_000_000, False),
        ("three", "1", 3.9, True),                 # a word alone is exact
        ("three", "1", 4.1, False),
        ("1.18×", "0.1", 1.27, True),              # a ratio alone is tested to 2 decimals
        ("1.18×", "0.1", 1.29, False),
    ],
)
def test_a_tolerance_applies_to_every_kind_up_to_its_edge(text: str, tol: str, value: float, passes: bool) -> None:
    lit = parse_literal(text, parse_tolerance(tol))
    assert lit.matches(value) is passes
    assert lit.describe().startswith("within ± ")


def test_list_ordinals_follow_python_markdowns_lists() -> None:
    from numbook.core.structure import list_ordinals, walk
    text = "Intro\n2048. tokens\n\n1. one\n2. two\n   lazy\n3. three\n\nPara\n5. not\n\n## H\n6. yes"
    assert sorted(list_ordinals(walk(text))) == [3, 4, 6, 12]


@pytest.mark.parametrize(("name", "unit"), [
    ("fp32_mb", "MB"), ("step_s", "s"), ("req_per_s", "req/s"), ("capacity_req_s", "req/s"),
    ("tok_per_s", "tokens/s"), ("kv_bytes_per_token", "B"), ("achieved_tbs", "TB/s"), ("q_gflops", "GFLOP"),
    ("elem", None), ("tok_s_ceiling", None), ("s", None),   # s alone: a sequence length as often as a time
])
def test_the_unit_a_value_name_implies(name: str, unit: str | None) -> None:
    from numbook.core.units import name_unit
    found = name_unit(name)
    assert (found.symbol if found else None) == unit
