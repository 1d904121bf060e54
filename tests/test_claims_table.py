"""Every form of literal an author may write, read into the rule that tests it; every form refused, with the
message the author sees. A table in, a parse (kind, number, precision, shape, bound) or a message out."""

from __future__ import annotations

from decimal import Decimal

import pytest

from numbook.core.claims import LiteralError, format_value, parse_literal, parse_tolerance

D = Decimal


@pytest.mark.parametrize(("text", "kind", "number", "places", "significant", "describe"), [
    ("  42 ", "int", D(42), 0, None, "exact"),
    ("65,536,000", "int", D(65536000), 0, None, "exact"),
    ("65{,}536", "int", D(65536), 0, None, "exact"),
    ("65\\,536", "int", D(65536), 0, None, "exact"),
    ("65 536", "int", D(65536), 0, None, "exact"),
    ("65\u2009536", "int", D(65536), 0, None, "exact"),
    ("65\u202f536", "int", D(65536), 0, None, "exact"),
    ("−1.5", "decimal", D("-1.5"), 1, 2, "to 1 decimal place(s)"),
    ("0.0520", "decimal", D("0.0520"), 4, 3, "to 4 decimal place(s)"),
    ("17.6%", "percent", D("17.6"), 1, 3, "in percent, to 1 decimal place(s)"),
    ("17.6\\%", "percent", D("17.6"), 1, 3, "in percent, to 1 decimal place(s)"),
    ("2.5×", "ratio", D("2.5"), 1, 2, "to 1 decimal place(s)"),
    ("3x", "ratio", D(3), 0, 1, "to 0 decimal place(s)"),
    ("4\\times", "ratio", D(4), 0, 1, "to 0 decimal place(s)"),
    ("three", "word", D(3), 0, None, "exact"),
    ("Twelve", "word", D(12), 0, None, "exact"),
    ("6.55e7", "sci", D("6.55E+7"), 3, 3, "to 3 significant figure(s)"),
    ("-6.55e7", "sci", D("-6.55E+7"), 3, 3, "to 3 significant figure(s)"),
    ("−6.55e7", "sci", D("-6.55E+7"), 3, 3, "to 3 significant figure(s)"),
    ("0e0", "sci", D(0), 1, 1, "to 1 significant figure(s)"),
    ("1e400", "sci", D("1E+400"), 1, 1, "to 1 significant figure(s)"),
    ("0.5e3", "sci", D("5E+2"), 1, 1, "to 1 significant figure(s)"),
    ("1.20 × 10^{9}", "sci", D("1.2E+9"), 3, 3, "to 3 significant figure(s)"),
    ("3 \\times 10^4", "sci", D("3E+4"), 1, 1, "to 1 significant figure(s)"),
    ("2·10^-3", "sci", D("0.002"), 1, 1, "to 1 significant figure(s)"),
    ("2 \\cdot 10^{−3}", "sci", D("0.002"), 1, 1, "to 1 significant figure(s)"),
    ("at least 5", "bound", D(5), 0, None, "as the bound >= 5"),
    ("more than 0", "bound", D(0), 0, None, "as the bound > 0"),
    ("at most 2.5%", "bound", D("2.5"), 0, None, "as the bound <= 2.5%"),
    ("under 3", "bound", D(3), 0, None, "as the bound < 3"),
    ("over 1e3", "bound", D("1E+3"), 0, None, "as the bound > 1000"),
    ("fewer than 2·10^-3", "bound", D("0.002"), 0, None, "as the bound < 0.002"),
    ("≥ 7", "bound", D(7), 0, None, "as the bound >= 7"),
    ("≤ 7", "bound", D(7), 0, None, "as the bound <= 7"),
    ("\\le 0.5", "bound", D("0.5"), 0, None, "as the bound <= 0.5"),
    ("\\geq 2", "bound", D(2), 0, None, "as the bound >= 2"),
    ("more than ten", "bound", D(10), 0, None, "as the bound > 10"),
])
def test_a_number_literal_reads_as_its_rule(text: str, kind: str, number: Decimal, places: int,
                                            significant: int | None, describe: str) -> None:
    lit = parse_literal(text)
    assert (lit.kind, lit.number, lit.places, lit.significant, lit.describe()) == (
        kind, number, places, significant, describe)
    assert lit.text == text                  # the literal keeps what the author wrote, spaces and all
    assert lit.percent == (kind == "percent" or text.endswith("%") and kind == "bound")


@pytest.mark.parametrize(("text", "shape"), [
    ("()", ()), ("[]", ()), ("(3,)", (3,)), ("[2, 3]", (2, 3)), ("(4, 512, 32000)", (4, 512, 32000)),
])
def test_a_shape_literal_is_its_dimensions(text: str, shape: tuple[int, ...]) -> None:
    lit = parse_literal(text)
    assert (lit.kind, lit.shape, lit.describe(), lit.text) == ("shape", shape, "exact shape", text)
    assert lit.matches(list(shape)) and not lit.matches([*shape, 1]) and not lit.matches(7)


@pytest.mark.parametrize(("text", "kinds"), [
    ("(6.0, 7.5)", ["decimal", "decimal"]), ("(6.0, 7.5,)", ["decimal", "decimal"]),
    ("(1e3, 50%)", ["sci", "percent"]), ("[0.25, three]", ["decimal", "word"]),
])
def test_a_vector_literal_is_its_elements(text: str, kinds: list[str]) -> None:
    lit = parse_literal(text)
    assert (lit.kind, [i.kind for i in lit.items], lit.text) == ("vector", kinds, text)
    assert lit.describe() == "element by element, each at its written precision"


def test_a_vector_matches_element_by_element_at_each_written_precision() -> None:
    lit = parse_literal("(6.0, 7.5)")
    assert lit.matches([6.04, 7.46]) and lit.matches((6.0, 7.5))
    assert not lit.matches([6.05, 7.5]) and not lit.matches([6.0]) and not lit.matches([6.0, 7.5, 1.0])
    assert not lit.matches(6.0) and not lit.matches("(6.0, 7.5)")


MISREAD = ("is not a literal this book can test (a number, a percentage, scientific notation, a number word, "
           "a shape, a vector or a bound)")


@pytest.mark.parametrize(("text", "message"), [
    ("", "empty literal"),
    ("  ", "empty literal"),
    ("( , 2)", "'( , 2)' is not a vector: write its elements separated by ', ', like (6.0, 7.5)"),
    ("(,)", "'(,)' is not a vector: write its elements separated by ', ', like (6.0, 7.5)"),
    ("(1, at least 2)", "'(1, at least 2)': a vector's elements are plain numbers"),
    ("((1, 2))", f"'((1, 2))' {MISREAD}"),
    ("less than", "a bound needs a number: 'less than'"),
    ("at least (2, 3)", "a bound needs a number: 'at least (2, 3)'"),
    ("at least at most 3", "a bound needs a number: 'at least at most 3'"),
    ("overflow", f"'overflow' {MISREAD}"),
    ("underscore", f"'underscore' {MISREAD}"),
    ("1e401", "'1e401': the exponent 401 is past any number a check records"),
    ("1e-401", "'1e-401': the exponent -401 is past any number a check records"),
    ("1,00", "'1,00' has a misplaced thousands separator: separate groups of exactly three digits, counted "
             "from the decimal point, like 65,536,000"),
    ("12,3456%", "'12,3456%' has a misplaced thousands separator: separate groups of exactly three digits, "
                 "counted from the decimal point, like 65,536,000"),
    ("1.5.2", f"'1.5.2' {MISREAD}"),
    ("about 3", f"'about 3' {MISREAD}"),
])
def test_a_literal_the_book_cannot_test_is_refused_with_what_to_write(text: str, message: str) -> None:
    with pytest.raises(LiteralError) as err:
        parse_literal(text)
    assert str(err.value) == message


@pytest.mark.parametrize(("text", "parsed"), [
    ("0.3", (D("0.3"), False)), ("10%", (D(10), True)), (" 5 % ", (D(5), True)), ("1,000", (D(1000), False)),
    ("+2", (D(2), False)),
])
def test_a_tolerance_is_an_amount_or_a_percentage(text: str, parsed: tuple[Decimal, bool]) -> None:
    assert parse_tolerance(text) == parsed


@pytest.mark.parametrize("text", ["x", "-1", "", "1e3", "3X"])
def test_a_tolerance_that_is_no_number_is_refused(text: str) -> None:
    with pytest.raises(LiteralError) as err:
        parse_tolerance(text)
    assert str(err.value) == f"tolerance '± {text.strip()}' is not a number"


@pytest.mark.parametrize(("value", "text"), [
    (True, "True"), (1.5, "1.5"), (0.1 + 0.2, "0.30000000000000004"), (float("inf"), "inf"), (float("nan"), "nan"),
    ([1], "(1,)"), ((1, 2), "(1, 2)"), ([1.5, [2, 3]], "(1.5, (2, 3))"), ("s", "s"), (None, "None"), (7, "7"),
])
def test_a_computed_value_is_shown_at_full_precision(value: object, text: str) -> None:
    assert format_value(value) == text


@pytest.mark.parametrize("value", [None, "3", {"a": 3}, [3], float("nan"), float("inf"), 10**400, object()])
def test_a_value_that_is_no_finite_number_matches_no_number_literal(value: object) -> None:
    for text in ("3", "3.0", "3%", "3×", "3e0", "three", "at least 0", "under 1e9"):
        assert not parse_literal(text).matches(value), (text, value)


def test_a_tolerance_says_whether_it_is_an_amount_or_a_percentage() -> None:
    assert parse_literal("100", parse_tolerance("10")).describe() == "within ± 10"
    assert parse_literal("100", parse_tolerance("10%")).describe() == "within ± 10%"
    assert parse_literal("100", parse_tolerance("10%")).matches(110) and not parse_literal(
        "100", parse_tolerance("10")).matches(110.5)


def test_an_exact_integer_is_compared_as_an_integer_not_as_a_float() -> None:
    big = 2**53 + 1     # a float cannot tell it from 2**53
    assert parse_literal(str(big)).matches(big) and not parse_literal(str(big)).matches(big - 1)
    assert parse_literal("3").matches(3.0) and parse_literal("three").matches(3)


def test_zero_in_scientific_notation_matches_zero_only() -> None:
    assert parse_literal("0e0").matches(0) and parse_literal("0e0").matches(0.0)
    assert not parse_literal("1e3").matches(0) and not parse_literal("0e0").matches(1e-300)
    assert parse_literal("1e0").matches(1.0) and not parse_literal("1e0").matches(2.0)


def test_a_value_too_large_for_the_written_decimals_is_no_match_and_no_crash() -> None:
    assert not parse_literal("3.14").matches(1e300)   # rounding it to 2 places needs 303 digits: no match
    assert not parse_literal("3.14%").matches(1e300)
