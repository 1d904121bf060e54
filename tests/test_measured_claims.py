"""Claims on measured values are tested against their intervals, and the page shows the interval beside the figure.

Markdown in, HTML out: a claim of a value with an interval renders as its number, then (after the unit written
after it) ``(n = 480, 5 seeds, 95% CI 37–46 ms)``; and the exact message of each way a claim can fail its interval:
a number the interval does not support, a bound the whole interval does not satisfy, two measured values compared
whose intervals overlap (or lie the other way).
"""

from __future__ import annotations

import markdown

from _results import Fixed
from numbook.core.verify import PageContext, RecordKind, verify_page
from numbook.html.extension import NumbookExtension
from numbook.run.runner import CheckResult

T5 = {"n": 480, "repeats": 5, "repeated": "seeds", "level": 0.95, "kind": "95% t interval over 5 seeds"}
MS = ("p99_ms", "tpot_ms", "old_ms", "new_ms", "near_ms", "slo_ms")
RESULT = CheckResult(
    "checks/serve.py", "ok",
    values={"p99_ms": 41.23, "tpot_ms": 1.41, "speedup": 3.4, "share": 0.176, "old_ms": 41.0, "new_ms": 52.0,
            "near_ms": 44.0, "slo_ms": 50.0, "steps": 12, "timed_ms": 3.2},
    units=dict.fromkeys(MS + ("timed_ms",), "ms"),
    measured={k: "served on this machine" for k in ("p99_ms", "tpot_ms", "speedup", "share", "old_ms", "new_ms",
                                                    "near_ms", "timed_ms")},
    uncertainty={"p99_ms": {**T5, "lo": 37.21, "hi": 45.93}, "tpot_ms": {**T5, "lo": 1.32, "hi": 1.5},
                 "speedup": {**T5, "lo": 2.9, "hi": 3.9, "n": 5, "repeated": "runs",
                             "kind": "95% percentile bootstrap over 5 runs (2000 resamples, seed 0)"},
                 "share": {**T5, "lo": 0.171, "hi": 0.181}, "old_ms": {**T5, "lo": 37.0, "hi": 46.0},
                 "new_ms": {**T5, "lo": 48.0, "hi": 60.0}, "near_ms": {**T5, "lo": 41.0, "hi": 48.0}},
    lines={"p99_ms": 14},
)
CTX = PageContext("problems/X.md", "serve.py", scan_numbers=True)


def render(text: str) -> str:
    md = markdown.Markdown(extensions=[NumbookExtension(context=CTX, results=Fixed(lambda name: RESULT)), "tables",
                                       "pymdownx.arithmatex"],
                           extension_configs={"pymdownx.arithmatex": {"generic": True}})
    return md.convert(text)


def messages(text: str) -> list[str]:
    return [str(d) for d in verify_page(text, CTX, Fixed(lambda name: RESULT)).diagnostics]


DATA = ('data-ci-lo="37.21" data-ci-hi="45.93" data-ci-level="0.95" data-ci-kind="95% t interval over 5 seeds" '
        'data-n="480" data-repeats="5"')
TIP = "95% t interval over 5 seeds: 37.21 to 45.93 ms, n = 480"


# -- what the page shows ------------------------------------------------------------------------------
def test_a_measured_figure_shows_its_samples_repeats_and_interval_after_its_unit() -> None:
    html = render("The p99 TTFT is [[41|p99_ms]] ms at this load.")
    assert html == (
        '<p>The p99 TTFT is <span class="nb-claim" data-claim="p99_ms" data-check="checks/serve.py" '
        f'data-value="41.23" data-device="" data-date="" {DATA} title="p99_ms = 41.23 ms · computed by '
        f'checks/serve.py, line 14 · compared to 0 decimal place(s), inside its 95% CI · {TIP} · (ran for this '
        f'build)" tabindex="0">41</span> ms <span class="nb-ci" title="{TIP}">(n = 480, 5 seeds, 95% CI 37–46 ms)'
        '</span> at this load.</p>')


def test_the_interval_is_shown_at_the_claims_precision_rounded_outwards() -> None:
    assert "(n = 480, 5 seeds, 95% CI 37.2–46.0 ms)" in render("The p99 is [[41.2|p99_ms]] ms.")
    assert "(n = 480, 5 seeds, 95% CI 37.21–45.93 ms)" in render("The p99 is [[41.23|p99_ms]] ms.")
    assert "[[" not in render("It takes [[1.41|tpot_ms]] milliseconds.")
    assert "(n = 480, 5 seeds, 95% CI 1.32–1.50 milliseconds)" in render("It takes [[1.41|tpot_ms]] milliseconds.")
    assert "(n = 480, 5 seeds, 95% CI 17.1–18.1%)" in render("The share is [[17.6%|share]] of the time.")
    assert "(n = 5, 5 runs, 95% CI 2.9–3.9×)" in render("Fusion is [[3.4×|speedup]] faster.")
    # a bound shows the interval to two digits of its width, not at the bound's own precision
    assert "(n = 480, 5 seeds, 95% CI 37.2–46.0 ms)" in render("The p99 stays under [[50|p99_ms]] ms.")


def test_a_glued_times_sign_and_a_claim_without_unit_keep_the_interval_after_them() -> None:
    html = render("The speedup is at least [[2|speedup]]× here.")
    assert html.endswith('tabindex="0">2</span>× <span class="nb-ci" title="95% percentile bootstrap over 5 runs '
                         '(2000 resamples, seed 0): 2.9 to 3.9, n = 5">(n = 5, 5 runs, 95% CI 2.9–3.9×)</span> '
                         'here.</p>')


def test_in_math_the_interval_is_in_the_claims_tooltip_only() -> None:
    html = render(r"$t_{99} = [[41|p99_ms]]\ \text{ms}$")
    assert "nb-ci" not in html and r"\class{nb-claim}{\cssId{nb-mc-1-10}{41}}\ \text{ms}" in html
    assert (f'"tip": "p99_ms = 41.23 ms · computed by checks/serve.py, line 14 · compared to 0 decimal place(s), '
            f'inside its 95% CI · {TIP} · (ran for this build)"') in html


def test_a_measured_value_without_an_interval_and_a_computed_value_show_no_interval() -> None:
    html = render("It took [[3.2|timed_ms]] ms over [[12|steps]] steps.")
    assert "nb-ci" not in html and "data-ci-lo" not in html
    assert messages("It took [[3|timed_ms]] ms.") == [   # no interval, no interval test: an integer stays exact
        "problems/X.md:1: claim 'timed_ms' reads 3, checks/serve.py computed 3.2 (compared exact)"]


def test_records_carry_the_interval_and_where_it_goes() -> None:
    rep = verify_page("The p99 is [[41|p99_ms]] ms, under [[50|p99_ms]] ms.", CTX, Fixed(lambda name: RESULT))
    point, bound = rep.records
    assert (point.kind, point.ok, point.ci_shown, point.bound) == (RecordKind.CLAIM, True, "37–46 ms", "")
    assert point.spread is not None and (point.spread.lo, point.spread.hi, point.spread.n) == (37.21, 45.93, 480)
    assert point.tail == point.end + len(" ms")
    assert (bound.ok, bound.bound, bound.test) == (True, "under", "as the bound < 50, over its whole 95% CI")


# -- a number: verified at its precision, and inside the interval ---------------------------------------
def test_an_integer_for_a_measured_value_is_compared_rounded_to_units() -> None:
    assert messages("The p99 is [[41|p99_ms]] ms.") == []
    assert messages("The p99 is [[42|p99_ms]] ms.") == [
        "problems/X.md:1: claim 'p99_ms' reads 42, checks/serve.py computed 41.23 (compared to 0 decimal place(s))"]


def test_a_number_the_interval_does_not_support_fails() -> None:
    assert messages("A step takes [[1.2|tpot_ms ± 0.3]] ms.") == [
        "problems/X.md:1: claim 'tpot_ms' reads 1.2, which its interval does not support: checks/serve.py measured "
        "1.41 ms, 95% CI 1.32 to 1.5 ms (n = 480, 5 seeds; 95% t interval over 5 seeds), and 1.2 lies outside it "
        "even widened by half its last written digit (± 0.05)"]
    assert messages("A step takes [[1.3|tpot_ms ± 0.3]] ms.") == []   # 1.3 is within 0.05 of the lower end


def test_a_percentage_is_held_to_its_interval_in_percent() -> None:
    assert messages("The share is [[18.5%|share ± 1]].") == [
        "problems/X.md:1: claim 'share' reads 18.5%, which its interval does not support: checks/serve.py measured "
        "0.176, 95% CI 0.171 to 0.181 (n = 480, 5 seeds; 95% t interval over 5 seeds), and 18.5% lies outside it "
        "even widened by half its last written digit (± 0.05 percentage points)"]


# -- a bound: the whole interval must satisfy it ---------------------------------------------------------
def test_a_bound_literal_is_tested_on_the_end_of_the_interval_it_bounds() -> None:
    assert messages("The p99 is [[under 46|p99_ms]] ms.") == []
    assert messages("The p99 is [[under 45|p99_ms]] ms.") == [
        "problems/X.md:1: claim 'p99_ms' states the bound < 45, which its interval does not satisfy: checks/serve.py "
        "measured 41.23 ms, 95% CI 37.21 to 45.93 ms (n = 480, 5 seeds; 95% t interval over 5 seeds), and its upper "
        "end 45.93 is not < 45: a bound on a measured value holds for its whole interval"]
    assert messages("The speedup is [[at least 3×|speedup]].") == [
        "problems/X.md:1: claim 'speedup' states the bound >= 3, which its interval does not satisfy: checks/serve.py "
        "measured 3.4, 95% CI 2.9 to 3.9 (n = 5, 5 runs; 95% percentile bootstrap over 5 runs (2000 resamples, seed "
        "0)), and its lower end 2.9 is not >= 3: a bound on a measured value holds for its whole interval"]
    assert messages("The speedup is [[at least 2.5×|speedup]].") == []


def test_words_of_bound_written_before_the_claim_make_it_a_bound() -> None:
    for ok in ("The p99 stays under [[50|p99_ms]] ms.", "The p99 is at most [[46|p99_ms]] ms.",
               "The speedup is at least [[2|speedup]]× here.", "It never falls below [[37|p99_ms]] ms.",
               "The p99 does not exceed [[46|p99_ms]] ms.", r"It holds $t_{99} \leq [[46|p99_ms]]$ ms.",
               "The p99 stays below [[50|p99_ms]] ms.", "The share is more than [[17%|share]].",
               "It is quick; the speedup is at least [[2|speedup]]× here."):
        assert messages(ok) == [], ok
    assert messages("The speedup is at least [[3|speedup]]× here.") == [
        "problems/X.md:1: claim 'speedup' states the bound >= 3 (written 'at least 3'), which its interval does not "
        "satisfy: checks/serve.py measured 3.4, 95% CI 2.9 to 3.9 (n = 5, 5 runs; 95% percentile bootstrap over 5 "
        "runs (2000 resamples, seed 0)), and its lower end 2.9 is not >= 3: a bound on a measured value holds for its "
        "whole interval"]
    assert messages("The p99 stays below [[45|p99_ms]] ms.") == [   # one fault: 'below' is the bound's own word
        "problems/X.md:1: claim 'p99_ms' states the bound < 45 (written 'below 45'), which its interval does not "
        "satisfy: checks/serve.py measured 41.23 ms, 95% CI 37.21 to 45.93 ms (n = 480, 5 seeds; 95% t interval "
        "over 5 seeds), and its upper end 45.93 is not < 45: a bound on a measured value holds for its whole interval"]


def test_a_bound_word_on_the_line_before_counts_and_a_value_claimed_again_is_still_bounded() -> None:
    assert messages("The p99 at this load stays well under\n[[50|p99_ms]] ms.") == []
    assert messages("The p99 is [[41|p99_ms]] ms, under [[50|p99_ms]] ms.") == []


def test_a_bound_word_after_another_value_compares_the_two() -> None:
    # "[[41|old_ms]] ms, is below [[52|new_ms]]": the words relate old_ms to new_ms; new_ms is a number again
    assert messages("The old p99, [[41|old_ms]] ms, is below [[52|new_ms]] ms.") == []


# -- two measured values compared: their intervals must lie apart ----------------------------------------
def test_two_measured_values_compared_must_have_intervals_apart_in_the_stated_direction() -> None:
    assert messages("The new p99, [[44|near_ms]] ms, is below [[52|new_ms]] ms.") == [
        "problems/X.md:1: the sentence says 44 (near_ms) is smaller 52 (new_ms) ('below'), but their intervals "
        "overlap: near_ms 95% CI 41.0 to 48.0 ms, new_ms 95% CI 48.0 to 60.0 ms; measured values compared must have "
        "intervals that lie apart in the stated direction"]
    assert messages("The old p99, [[41|old_ms]] ms, is larger than [[52|new_ms]] ms.") == [
        "problems/X.md:1: the sentence says 41 (old_ms) is larger 52 (new_ms) ('larger'), but their intervals lie the "
        "other way: old_ms 95% CI 37.0 to 46.0 ms, new_ms 95% CI 48.0 to 60.0 ms; measured values compared must have "
        "intervals that lie apart in the stated direction"]


EQUAL = ("but their intervals do not overlap: old_ms 95% CI 37.0 to 46.0 ms, new_ms 95% CI 48.0 to 60.0 ms; "
         "measured values said to be equal must have intervals that overlap")


def test_two_measured_values_said_equal_must_have_intervals_that_overlap() -> None:
    says = "problems/X.md:1: the sentence says 41 (old_ms) is equal 52 (new_ms)"
    assert messages("The old p99, [[41|old_ms]] ms, equals [[52|new_ms]] ms.") == [f"{says} ('equals'), {EQUAL}"]
    assert messages("The old p99, [[41|old_ms]] ms, is equal to [[52|new_ms]] ms.") == [f"{says} ('equal'), {EQUAL}"]
    assert messages("The old p99, [[41|old_ms]] ms, is identical to [[52|new_ms]] ms.") == [
        f"{says} ('identical'), {EQUAL}"]
    assert messages("The two p99s, [[41|old_ms]] ms and [[52|new_ms]] ms, are equal.") == [
        f"{says} ('equal'), {EQUAL}"]
    # intervals that overlap (41–48 and 48–60 touch) hold for equal, and fail for "does not equal"
    assert messages("The p99 near the limit, [[44|near_ms]] ms, equals [[52|new_ms]] ms.") == []
    assert messages("[[44|near_ms]] ms and [[52|new_ms]] ms are equal.") == []
    assert messages("The p99, [[41|old_ms]] ms, does not equal [[52|new_ms]] ms.") == []
    assert messages("The p99, [[44|near_ms]] ms, does not equal [[52|new_ms]] ms.") == [
        "problems/X.md:1: the sentence says 44 (near_ms) is differs 52 (new_ms) ('not equal'), but their intervals "
        "overlap: near_ms 95% CI 41.0 to 48.0 ms, new_ms 95% CI 48.0 to 60.0 ms; measured values compared must have "
        "intervals that lie apart in the stated direction"]


def test_a_measured_value_said_equal_to_a_computed_one_has_it_inside_its_interval() -> None:
    assert messages("The p99, [[52|new_ms]] ms, equals the target [[50|slo_ms]] ms.") == []
    assert messages("The p99, [[41|old_ms]] ms, equals the target [[50|slo_ms]] ms.") == [
        "problems/X.md:1: the sentence says 41 (old_ms) is equal 50 (slo_ms) ('equals'), but their intervals do not "
        "overlap: old_ms 95% CI 37.0 to 46.0 ms, slo_ms = 50.0 ms; measured values said to be equal must have "
        "intervals that overlap"]
    # two computed values said equal, or one value's words: no relation the verifier reads, as before
    assert messages("The target [[50|slo_ms]] ms equals [[12|steps]] steps.") == []
    assert messages("All [[12|steps]] steps are equal.") == []


def test_a_measured_value_compared_with_a_computed_one_holds_over_its_whole_interval() -> None:
    assert messages("The p99, [[44|near_ms]] ms, is below the target [[50|slo_ms]] ms.") == []
    assert messages("The p99, [[52|new_ms]] ms, is above the target [[50|slo_ms]] ms.") == [
        "problems/X.md:1: the sentence says 52 (new_ms) is larger 50 (slo_ms) ('above'), but their intervals overlap: "
        "new_ms 95% CI 48.0 to 60.0 ms, slo_ms = 50.0 ms; measured values compared must have intervals that lie "
        "apart in the stated direction"]


def test_the_checks_stamp_lists_its_measured_values_with_their_intervals() -> None:
    from dataclasses import replace

    from numbook.html.extension import _output

    one = replace(RESULT, values={"p99_ms": 41.23, "steps": 12, "timed_ms": 3.2}, stdout="p99 41.2 ms",
                  uncertainty={"p99_ms": RESULT.uncertainty["p99_ms"]})
    assert _output(one).endswith(
        '<p class="nb-stamp nb-stamp-measured"><span class="nb-stamp-label">Measured</span> p99_ms = 41.23 ms, '
        "95% CI 37.21–45.93 ms (n = 480, 5 seeds; 95% t interval over 5 seeds; served on this machine)</p>")
    assert "nb-stamp-measured" not in _output(replace(one, uncertainty={}))   # no interval, no list


def test_in_a_table_cell_the_interval_shows_alone_with_its_words_in_the_tooltip() -> None:
    html = render("The p99 over five seeds, at this load:\n\n| load | p99 (ms) |\n|---|---|\n"
                  "| high | [[41|p99_ms]] |\n\nAfter the table, [[41|p99_ms]] ms.")
    cell = f'<span class="nb-ci nb-ci-cell" title="n = 480, 5 seeds; {TIP}">(37–46)</span>'
    assert f'tabindex="0">41</span> {cell}</td>' in html
    # outside the table the same claim keeps the whole suffix
    assert html.count("nb-ci-cell") == 1
    assert f'<span class="nb-ci" title="{TIP}">(n = 480, 5 seeds, 95% CI 37–46 ms)' in html


def test_a_point_interval_shows_the_point_and_grouped_digits_stay_grouped() -> None:
    point = {**T5, "lo": 2.125, "hi": 2.125, "n": 5, "repeated": "runs", "kind": "95% t interval over 5 runs"}
    big = {**T5, "lo": 134217728.0, "hi": 134217728.0, "n": 5, "repeated": "runs", "kind": "95% t interval over 5 runs"}
    res = CheckResult("checks/serve.py", "ok", values={"ratio": 2.125, "bytes": 134217728}, units={},
                      measured={"ratio": "profiled", "bytes": "profiled"}, uncertainty={"ratio": point, "bytes": big})
    md = markdown.Markdown(extensions=[NumbookExtension(context=CTX, results=Fixed(lambda name: res))])
    html = md.convert("At least [[2×|ratio]] the scores, [[134,217,728|bytes]] bytes.")
    assert "(n = 5, 5 runs, the same in each: 2.125×)" in html
    assert "(n = 5, 5 runs, the same in each: 134,217,728 bytes)" in html
    # in a table cell: the point alone, not an interval from it to itself
    table = markdown.Markdown(extensions=[NumbookExtension(context=CTX, results=Fixed(lambda name: res)), "tables"])
    cell = table.convert("| ratio |\n|---|\n| [[2×|ratio]] |\n")
    assert '<span class="nb-ci nb-ci-cell" title="n = 5, 5 runs; 95% t interval over 5 runs: 2.125 to 2.125, n = 5">' \
           "(2.125×)</span>" in cell
