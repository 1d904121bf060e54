"""A statement's words bound to its check: a flipped relation word fails, next to its sanity or not.

Each test is a sentence in, diagnostics out, against a check result that declares what it asserts.
"""

from __future__ import annotations

from typing import Any

import pytest

from _results import Fixed
from numbook.core.relations import declared_relations, stated_relations
from numbook.core.result import CheckResult
from numbook.core.verify import PageContext, verify_page


def result(relation: Any = "larger", operands: list[Any] | None = None, **extra: Any) -> CheckResult:
    entry: dict[str, Any] = {"ok": True, "message": "", "operands": operands or [3.62, 3.08]}
    if relation is not None:
        entry["relation"] = [relation] if isinstance(relation, str) else list(relation)
    sanity = {"rel": entry, **extra}
    return CheckResult("checks/demo.py", "ok", values={"masked": 3.62, "plain": 3.08, "loss_a": 10.86,
                                                        "loss_b": 6.72, "mb": 262.144, "mib": 250.0},
                       units={"mb": "MB", "mib": "MiB"}, sanity=sanity)


def faults(text: str, res: CheckResult | None = None) -> list[str]:
    r = res or result()
    ctx = PageContext("docs/x.md", "demo.py", scan_numbers=True)
    return [str(d) for d in verify_page(text, ctx, Fixed(lambda name: r)).diagnostics]


def words(text: str) -> list[tuple[str, str, str]]:
    return [(s.family, s.op, s.name) for s in stated_relations(text.lower().split())]


# -- the grammar ------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("text", "want"), [
    ("a is larger than b", [("cmp", ">", "larger")]),
    ("a is above b", [("cmp", ">", "larger")]),
    ("a exceeds b", [("cmp", ">", "larger")]),
    ("a does not exceed b", [("cmp", "<=", "at most")]),
    ("a is no larger than b", [("cmp", "<=", "at most")]),
    ("a is at least b", [("cmp", ">=", "at least")]),
    ("a is never smaller", [("cmp", ">=", "at least")]),
    ("the loss grows", [("trend", ">", "grows")]),
    ("the loss does not fall", [("trend", ">=", "does not fall")]),
    ("a is twice the size of b", [("ratio", "x2", "twice")]),
    ("the check computes it twice", []),
    ("a is not twice the size of b", [("ratio", "not x2", "not twice")]),
    ("the largest batch", [("extreme", "max", "largest")]),
    ("the layer receives no gradient", [("neg", "not", "not")]),
    ("padding does not help", [("neg", "not", "not")]),
    ("the same storage", []),
])
def test_the_grammar_reads_each_relation_with_its_negation(text: str, want: list[tuple[str, str, str]]) -> None:
    assert words(text) == want


def test_a_declaration_is_read_by_the_same_grammar() -> None:
    assert [d.name for d in declared_relations("does not exceed")] == ["at most"]
    assert [d.name for d in declared_relations("larger")] == ["larger"]
    assert declared_relations("bigly") == []


# -- a sentence backed by a sanity ---------------------------------------------------------------------------

GOOD = "The masked mean, [[3.62|masked]], is larger than the plain one. [[sanity:rel]]"


def test_the_word_the_sanity_declares_passes() -> None:
    assert faults(GOOD) == []
    assert faults(GOOD.replace("larger than", "above")) == []          # a synonym is no flip
    assert faults(GOOD.replace("is larger than", "is at least")) == []  # asserting > asserts >= too


def test_a_flipped_word_next_to_its_sanity_fails_with_the_word_and_what_the_check_asserted() -> None:
    text = GOOD.replace("larger", "smaller")
    assert faults(text) == [
        "docs/x.md:1: relation word 'smaller' says smaller, but sanity 'rel' of checks/demo.py asserts larger: "
        "'The masked mean, [[3.62|masked]], is smaller than the plain one. [[sanity:rel]]'"]


def test_a_negation_added_or_removed_fails() -> None:
    added = GOOD.replace("is larger", "is not larger")
    assert faults(added)[0].startswith("docs/x.md:1: relation word 'not larger' says at most, but sanity 'rel' of "
                                       "checks/demo.py asserts larger")
    res = result(relation="not")
    denied = "Padding with [[3.62|masked]] does not help the loss. [[sanity:rel]]"
    assert faults(denied, res) == []
    assert faults(denied.replace("does not help", "does help"), res) == [
        "docs/x.md:1: sanity 'rel' of checks/demo.py asserts not, but no sentence of this page that cites it says "
        "so (they say no relation)"]
    # cited twice, the negation said once is enough; removed from both, it fails
    twice = denied + "\n\nSee the check. [[sanity:rel]]"
    assert faults(twice, res) == []
    assert len(faults(twice.replace("does not help", "does help"), res)) == 1
    assert faults(denied, result(relation="larger"))[0].startswith(
        "docs/x.md:1: relation word 'not' says not, which no sanity of the sentence asserts ('rel' larger)")


def test_a_comparison_far_from_its_claim_is_still_bound() -> None:
    far = ("The masked mean, [[3.62|masked]], which the check computes over every one of the valid positions of "
           "the batch, is smaller than the plain one. [[sanity:rel]]")
    assert "relation word 'smaller' says smaller, but sanity 'rel'" in faults(far)[0]


def test_a_sanity_that_declares_no_relation_is_asked_for_one() -> None:
    assert faults(GOOD, result(relation=None)) == [
        "docs/x.md:1: sanity 'rel' of checks/demo.py backs 'larger' (larger) but declares no relation: add "
        "relation=\"larger\" to its sanity(): 'The masked mean, [[3.62|masked]], is larger than the plain one. "
        "[[sanity:rel]]'"]


def test_an_unknown_declaration_is_an_error() -> None:
    assert faults(GOOD, result(relation="bigly"))[0].startswith(
        "docs/x.md:1: sanity 'rel' of checks/demo.py declares relation 'bigly', which the relation grammar does "
        "not read: use one of larger, smaller")


def test_each_marker_backs_the_words_before_it() -> None:
    two = result(relation="larger", other={"ok": True, "message": "", "relation": ["falls"]})
    text = ("The masked mean is larger [[sanity:rel]], and the plain one falls with [[3.08|plain]] "
            "[[sanity:other]].")
    assert faults(text, two) == []
    flipped = text.replace("falls", "grows")
    out = faults(flipped, two)
    assert len(out) == 1 and out[0].startswith(
        "docs/x.md:1: relation word 'grows' says grows, but sanity 'other' of checks/demo.py asserts falls: "
        "'The masked mean is larger [[sanity:rel]], and the plain one grows with")


# -- a sentence that compares two bound values ----------------------------------------------------------------

def test_two_bound_values_compared_need_no_sanity_and_a_wrong_comparison_fails() -> None:
    assert faults("The loss along the vocabulary, [[10.86|loss_a]], is larger than [[6.72|loss_b]].") == []
    assert faults("The loss along the vocabulary, [[10.86|loss_a]], is smaller than [[6.72|loss_b]].") == [
        "docs/x.md:1: the sentence says 10.86 (loss_a) is smaller 6.72 (loss_b) ('smaller'), but the computed "
        "values are 10.86 and 6.72"]


def test_values_in_two_units_are_compared_in_one() -> None:
    # 262.144 MB is 250.0 MiB: larger as numbers, equal as quantities
    assert faults("The logits take [[262.144|mb]] MB, larger than [[250.0|mib]] MiB.") == [
        "docs/x.md:1: the sentence says 262.144 (mb) is larger 250.0 (mib) ('larger'), but the computed values "
        "are 262.144 and 250.0"]


def test_a_relation_sentence_with_one_bound_side_is_unbacked() -> None:
    out = faults("The masked mean, [[3.62|masked]], which the check computes over every valid position of the "
                 "batch, is larger than the plain one.")
    assert out and out[0].startswith("docs/x.md:1: relation sentence with no sanity (larger)")
