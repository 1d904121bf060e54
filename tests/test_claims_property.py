"""No text an author can type crashes the claim parser or the claim processor (hypothesis).

Whatever the literal, ``parse_literal`` either returns a literal or raises ``LiteralError``;
whatever the value, ``matches`` returns a bool; whatever the Markdown, ``verify_page`` returns
records and diagnostics. A typo is a diagnostic with ``path:line``, never a traceback.
"""

from __future__ import annotations

import contextlib
import string

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from _results import Fixed
from numbook.core.claims import LiteralError, parse_literal, parse_tolerance
from numbook.core.verify import PageContext, verify_page
from numbook.run.runner import CheckResult

RESULT = CheckResult("checks/demo.py", "ok", inputs={"B": 4}, values={"x": 262.144, "n": 65_536_000,
                                                                        "s": [4, 512], "v": [6.0, 7.5]},
                     sanity={"ok": {"ok": True, "message": ""}})
ALPHABET = string.digits + string.ascii_letters + " ,.{}()[]|\\$`%~×·−+-±≥≤<>^_:*#\n\t\u2009\u202f"
FRAGMENTS = st.sampled_from(["[[", "]]", "|", "±", "$", "$$", "`", "```", "    ", "## Given", "## Answer",
                             "[[sanity:ok]]", "[[figure:f]]", "free", "x", "n", "s", "v", "B", "other:x",
                             "{,}", "\\,", "1e999999", "6.55 × 10^7", "(4, 512)", "at least", "17.6%", "\n",
                             "\n\n", "- ", "1. ", "!!! note", "three", "~65.5", "−1.5", "32,00"])
MARKDOWN = st.lists(st.one_of(FRAGMENTS, st.text(ALPHABET, max_size=8)), max_size=40).map("".join)
VALUES = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True, allow_infinity=True),
                   st.text(max_size=5), st.lists(st.integers(-5, 10**6), max_size=4),
                   st.lists(st.floats(), max_size=3), st.integers(min_value=10**300, max_value=10**400))


@settings(max_examples=600, deadline=None)
@given(st.text(ALPHABET, max_size=30), VALUES)
def test_any_literal_parses_or_raises_literal_error_and_matching_never_raises(text: str, value: object) -> None:
    try:
        literal = parse_literal(text)
    except LiteralError:
        return
    assert isinstance(literal.matches(value), bool)
    literal.describe()


@settings(max_examples=300, deadline=None)
@given(st.text(ALPHABET, max_size=12))
def test_any_tolerance_parses_or_raises_literal_error(text: str) -> None:
    with contextlib.suppress(LiteralError):
        parse_tolerance(text)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(MARKDOWN, st.booleans())
def test_any_markdown_through_the_claim_processor_gives_diagnostics_never_a_traceback(text: str,
                                                                                       problem: bool) -> None:
    ctx = PageContext("problems/X.md", "demo.py", problem=problem, scan_numbers=True)
    report = verify_page(text, ctx, Fixed(lambda name: RESULT))
    lines = text.count("\n") + 1
    for d in report.diagnostics:
        assert d.path == "problems/X.md" and 1 <= d.line <= lines
    for rec in report.records:
        assert text.split("\n")[rec.row][rec.start:rec.end].startswith("[[")


def test_the_typed_tilde_that_crashed_the_build_is_a_diagnostic() -> None:
    ctx = PageContext("problems/X.md", "demo.py")
    assert [str(d) for d in verify_page("About [[~65.5|x]] MB.", ctx, Fixed(lambda name: RESULT)).diagnostics] == [
        "problems/X.md:1: claim '[[~65.5|x]]': '~65.5' is not a literal this book can test (a number, a "
        "percentage, scientific notation, a number word, a shape, a vector or a bound)"]
