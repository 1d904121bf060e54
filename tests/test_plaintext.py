"""Math as text: what a reader sees (``plain``) and what a screen reader says (``spoken``), never TeX."""

from __future__ import annotations

import html as _html
import os
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from numbook.html.plaintext import plain, spoken

PLAIN = [
    (r"\class{nb-claim}{\cssId{nb-m-3}{31{,}999}}", "31,999"),
    (r"3.05 \times 10^{-5}", "3.05 × 10⁻⁵"),
    (r"\text{MiB}", "MiB"),
    (r"\mathrm{x}", "x"),
    (r"\frac{a}{b}", "a/b"),
    (r"\frac{a+b}{c}", "(a + b)/c"),
    (r"\frac{1}{2^{20}}", "1/2²⁰"),
    (r"a \cdot b", "a · b"),
    (r"x \approx 3", "x ≈ 3"),
    (r"m \le n", "m ≤ n"),
    (r"W_{1}", "W₁"),
    (r"x_{t}", "x_t"),
    (r"H_{kv}", "H_kv"),
    (r"\alpha + \Omega", "α + Ω"),
    (r"a\,b\;c~d", "a b c d"),
    (r"\left( x \right)", "(x)"),
    (r"\unknowncommand{kept}", "kept"),
    (r"2^{30}", "2³⁰"),
    (r"-5 + 3", "-5 + 3"),
    (r"QK^\top", "QKᵀ"),
    (r"\mathrm{MB} = 10^6\ \text{bytes}", "MB = 10⁶ bytes"),
    (r"\{ \\ }", "("),
    (r"L_b = (10, 7, 4, 2)", "L_b = (10, 7, 4, 2)"),
    (r"1{,}048{,}576", "1,048,576"),
    ("32,000", "32,000"),
    (r"\frac{1}{k}\sum_j \frac{1}{n_j}", "1/k Σ_j 1/n_j"),
]

SPOKEN = [
    (r"3.05 \times 10^{-5}", "3.05 times 10 to the power minus 5"),
    (r"\frac{a}{b}", "a over b"),
    (r"2^{30}", "2 to the power 30"),
    (r"x \approx y", "x approximately y"),
    (r"a = b", "a equals b"),
    (r"m \le n", "m at most n"),
    (r"\class{nb-claim}{\cssId{nb-m-3}{31{,}999}}", "31,999"),
    (r"\alpha", "alpha"),
    (r"|V| = 32{,}000", "the size of V equals 32,000"),          # a capital between bars: a set's size
    (r"\lvert V_2 \rvert", "the size of V sub 2"),
    (r"|x - y|", "absolute value of x minus y"),
    (r"T^* = 5", "T star equals 5"),                                # a starred letter, not a power
    (r"x^\star", "x star"),
    (r"\bar{p} = \bar{y}", "p bar equals y bar"),                   # accents are said, not dropped
    (r"\hat{m}_t", "m hat sub t"),
    (r"\frac{b-1}{2}", "the fraction with numerator b minus 1 and denominator 2, end fraction"),
    (r"\sqrt{a+b}", "the square root of a plus b, end root"),
    (r"\underbrace{m}_{\text{logsumexp}(z)} + 1", "m (which is logsumexp(z)) plus 1"),
    (r"a | b", "a | b"),
    (r"\sqrt{d}", "the square root of d"),
    (r"W_{1}", "W sub 1"),
    (r"\sum_{i=1}^{n} x_i", "the sum from i equals 1 to n of x sub i"),
    (r"\sum x", "the sum of x"),
    (r"b \lceil n/b \rceil", "b the ceiling of n over b"),
]


@pytest.mark.parametrize(("tex", "text"), PLAIN)
def test_plain_is_what_the_reader_sees(tex: str, text: str) -> None:
    assert plain(tex) == text


@pytest.mark.parametrize(("tex", "words"), SPOKEN)
def test_spoken_is_what_a_screen_reader_says(tex: str, words: str) -> None:
    assert spoken(tex) == words


TEX_ALPHABET = st.sampled_from([*r"\{}^_~&$%()[]=+-*/<>|,.'! 0123456789abxyzT", r"\frac", r"\text", r"\class",
                                r"\cssId", r"\times", r"\left", r"\right", r"\sqrt", r"\alpha", r"\\", r"\,",
                                r"\{", r"\}", r"\begin", r"\mathrm", r"\binom", r"\le", "\n", "\t"])


@settings(max_examples=600, deadline=None)
@given(st.lists(TEX_ALPHABET, max_size=40).map("".join) | st.text(max_size=40))
def test_no_output_holds_a_backslash_or_a_brace(tex: str) -> None:
    for out in (plain(tex), spoken(tex)):
        assert not set(out) & set("\\{}"), (tex, out)
        assert out == out.strip() and "  " not in out


SITE = Path(os.environ.get("NUMBOOK_SITE_DIR") or Path(__file__).resolve().parents[1] / "site")


@pytest.mark.skipif(not (SITE / "index.html").is_file(), reason="no built site/ to read the book's math from")
def test_every_formula_of_the_built_book_reads_as_text() -> None:
    """The book's math, as the built site holds it: the TeX of each equation where the browser draws it, and where
    the build drew it (``numbook.html.mathrender``), the names it gave each equation and each claim in it."""
    tex: set[str] = set()
    labels: set[str] = set()
    for page in SITE.rglob("*.html"):
        text = page.read_text(encoding="utf-8")
        tex |= set(re.findall(r'<(?:span|div) class="arithmatex">\\[(\[](.*?)\\[)\]]</(?:span|div)>', text, re.S))
        labels |= set(re.findall(r'<(?:svg|g) [^>]*aria-label="([^"]*)"', text))
    assert tex or labels
    for out in [*labels, *(f(_html.unescape(t)) for t in tex for f in (plain, spoken))]:
        assert not set(_html.unescape(out)) & set("\\{}"), out
