"""Markers stand alone: text glued to a marker changes the number the reader reads, and is an error."""

from __future__ import annotations

import pytest

from _results import Fixed
from numbook.core.result import CheckResult
from numbook.core.verify import PageContext, verify_page

RESULT = CheckResult("checks/demo.py", "ok", values={"B": 4, "x": 15.0, "frac": 0.15})


def faults(text: str) -> list[str]:
    ctx = PageContext("docs/x.md", "demo.py")
    return [str(d) for d in verify_page(text, ctx, Fixed(lambda name: RESULT)).diagnostics]


@pytest.mark.parametrize(("text", "glue", "reads"), [
    ("so B = [[4|B]]0 here.", "0", "40"),
    ("so B = [[4|B]].5 here.", ".5", "4.5"),
    ("so B = [[4|B]],000 here.", ",0", "4,0"),
    ("a share of [[0.15|frac]]% here.", "%", "0.15%"),
    ("a share of $[[0.15|frac]]\\%$ here.", "\\%", "0.15\\%"),
])
def test_text_glued_after_a_claim_is_an_error(text: str, glue: str, reads: str) -> None:
    marker = text[text.index("[["):text.index("]]") + 2]
    assert faults(text) == [f"docs/x.md:1: '{glue}' is glued to the claim {marker}: the reader reads {reads}, which "
                            "is not what the check computed; put what belongs to the number inside the literal (and "
                            "bind that value) or leave a space"]


@pytest.mark.parametrize(("text", "glue", "reads"), [
    ("so B = 1[[4|B]] here.", "1", "14"),
    ("so B = 3.[[4|B]] here.", "3.", "3.4"),
    ("so x = -[[15.0|x]] here.", "-", "-15.0"),
    ("so $x = -[[15.0|x]]$ here.", "-", "-15.0"),
])
def test_text_glued_before_a_claim_is_an_error(text: str, glue: str, reads: str) -> None:
    marker = text[text.index("[["):text.index("]]") + 2]
    assert faults(text) == [f"docs/x.md:1: '{glue}' is glued to the claim {marker}: the reader reads {reads}, which "
                            "is not what the check computed; bind the value the reader should read "
                            f"([[{reads}|name]]) or leave a space"]


def test_punctuation_and_hyphenated_words_are_not_glue() -> None:
    assert faults("A rank-[[4|B]] tensor. It is [[4|B]]. Then [[4|B]], and ([[4|B]]).") == []


def test_an_empty_literal_or_a_marker_without_a_name_is_an_error() -> None:
    assert faults("an empty [[|B]] literal") == [
        "docs/x.md:1: marker '[[|B]]' would be published as typed: its literal is empty: write the number the reader "
        "should read before the '|'"]
    assert faults("no name [[4]] here") == [
        "docs/x.md:1: marker '[[4]]' would be published as typed: it is not a claim [[literal|name]], a free number "
        "[[literal|free]], [[sanity:name]], [[figure:name]] or [[relation:none|why]]"]
    assert faults("in code `[[|B]]` it is text") == []
