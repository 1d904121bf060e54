"""Claim literals: the written form of a number sets the test it must pass."""

from __future__ import annotations

import pytest

from numbook.core.claims import LiteralError, parse_literal, parse_tolerance

CASES = [
    # literal, value, passes
    ("262.1", 262.144, True),
    ("262.1", 262.2, False),
    ("262.1", 262.05, True),          # half rounds away from zero
    ("262.1", 262.0499, False),
    ("0.13", 0.125, True),
    ("0.12", 0.125, False),
    ("2.68", 2.675, True),            # the decimal text of the float decides, not its binary error
    ("-1.5", -1.45, True),
    ("2048", 2048, True),
    ("2048", 2048.0, True),
    ("2048", 2047.9, False),
    ("65,536,000", 65_536_000, True),
    ("65,536,000", 65_536_001, False),
    ("65{,}536{,}000", 65_536_000, True),
    ("65{,}536{,}000", 65_535_999, False),
    ("1.0", 1, True),
    ("17.6%", 0.17634, True),
    ("17.6%", 0.1766, False),
    (r"17.6\%", 0.17634, True),
    ("15.0%", 0.1499, True),
    ("15%", 0.1499, True),
    ("15%", 0.155, False),
    ("6.55 × 10^7", 65_536_000, True),
    ("6.55 × 10^7", 65_600_000, False),
    (r"6.55 \times 10^{7}", 65_536_000, True),
    ("6.55e7", 65_536_000, True),
    ("6.6e7", 65_536_000, True),
    ("1.0e-3", 0.00104, True),
    ("1.0e-3", 0.00106, False),
    ("9.99e2", 999.4, True),
    ("1.00e3", 999.6, True),          # rounding carries the mantissa to 10
    ("three", 3, True),
    ("three", 4, False),
    ("Twelve", 12, True),
    ("1.18×", 2048 / 1741, True),
    ("1.17×", 2048 / 1741, False),
    ("(4, 512, 32000)", [4, 512, 32000], True),
    ("(4, 512, 32000)", [4, 512, 32001], False),
    ("(2048,)", [2048], True),
    ("()", [], True),
    ("()", 0, False),
    ("[8, 5]", [8, 5], True),
    ("at least 3×", 3.0, True),
    ("at least 3×", 2.99, False),
    ("more than 3", 3.0, False),
    ("≥ 15%", 0.15, True),
    ("≥ 15%", 0.1499, False),
    ("less than 1", 0.99, True),
    ("at most 2 ", 2, True),
    ("under 30", 29.9, True),
    ("262.1", float("nan"), False),
    ("262.1", [262.1], False),
]


@pytest.mark.parametrize(("text", "value", "passes"), CASES)
def test_literal_matches_at_written_precision(text: str, value: object, passes: bool) -> None:
    assert parse_literal(text).matches(value) is passes


@pytest.mark.parametrize(
    ("text", "tol", "value", "passes"),
    [
        ("1.2", "0.3", 1.49, True),
        ("1.2", "0.3", 1.51, False),
        ("100", "10%", 109, True),
        ("100", "10%", 111, False),
        ("5%", "1", 0.059, True),      # a percent literal with an absolute tolerance in percent points
    ],
)
def test_explicit_tolerance_replaces_rounding(text: str, tol: str, value: float, passes: bool) -> None:
    assert parse_literal(text, parse_tolerance(tol)).matches(value) is passes


@pytest.mark.parametrize(
    ("text", "kind", "describe"),
    [
        ("262.1", "decimal", "to 1 decimal place(s)"),
        ("65{,}536{,}000", "int", "exact"),
        ("17.6%", "percent", "in percent, to 1 decimal place(s)"),
        ("6.55 × 10^7", "sci", "to 3 significant figure(s)"),
        ("three", "word", "exact"),
        ("(2048,)", "shape", "exact shape"),
        ("at least 3×", "bound", "as the bound >= 3"),
    ],
)
def test_literal_kind_and_description(text: str, kind: str, describe: str) -> None:
    lit = parse_literal(text)
    assert (lit.kind, lit.describe()) == (kind, describe)


@pytest.mark.parametrize("text", ["", "about 3", "3 MB", "1,23", "at least", "x^2"])
def test_unknown_forms_are_errors(text: str) -> None:
    with pytest.raises(LiteralError):
        parse_literal(text)
