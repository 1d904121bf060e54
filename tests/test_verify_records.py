"""What the verifier records for each marker, field by field: the record is what the page renders, the
ledger publishes and the hint shows, so a field that goes wrong silently is a wrong page (issue 18)."""

from __future__ import annotations

import pytest

from _results import Fixed
from numbook.core.result import FROZEN_HOW
from numbook.core.verify import PageContext, RecordKind, display, unbound_numbers, verify_page
from numbook.run.runner import CheckResult, Status

DEMO = CheckResult(
    "checks/demo.py", "ok", device="cpu: x86_64", ran_at="2026-12-03 06:00 UTC",
    inputs={"B": 4}, values={"fp32_mb": 262.144, "flag": True, "lat_ms": 1.5, "w": 2.0, "ctx": 8192},
    units={"w": "GB"}, dtypes={"fp32_mb": "torch.float32"}, lines={"fp32_mb": 7, "half": 9},
    facts={"ctx": {"source": "Llama 3 paper", "read": "2026-12-03"}},
    sanity={"half": {"ok": True, "message": "half of it", "operands": [1.0, 2.0]},
            "bare": {"ok": False, "message": ""}, "noflag": {"message": "no verdict recorded"}},
)
OTHER = CheckResult("checks/other.py", "ok", values={"w": 7.5})
BROKEN = CheckResult("checks/broken.py", Status.ERROR, stderr="ValueError: no\n")
RESULTS = {"demo.py": DEMO, "other.py": OTHER, "broken.py": BROKEN}


def ctx(check: str | None = "demo.py", results: dict[str, CheckResult] = RESULTS, scan: bool = False
        ) -> tuple[PageContext, Fixed]:
    return (PageContext("problems/X.md", check, check_line=4, problem=scan, scan_numbers=scan),
            Fixed(lambda name: results[name]))


def errors(text: str, context: tuple[PageContext, Fixed] | None = None) -> list[str]:
    return [str(d) for d in verify_page(text, *(context or ctx())).diagnostics]


@pytest.mark.parametrize(("lit", "math", "shown"), [
    ("17.6%", True, r"17.6\%"), (r"17.6\%", True, r"17.6\%"), ("2.5×", True, r"2.5\times "),
    ("≥ 3", True, r"\geq  3"), ("≤ 3", True, r"\leq  3"), (" 42 ", True, "42"),
    ("65{,}536", False, "65,536"), (r"17.6\%", False, "17.6%"), (r"3\times", False, "3×"),
    (r"65\,536", False, "65\u2009536"), (" 42 ", False, "42"), ("2.5×", False, "2.5×"),
])
def test_a_literal_is_shown_as_tex_in_math_and_as_text_in_prose(lit: str, math: bool, shown: str) -> None:
    assert display(lit, math) == shown


@pytest.mark.parametrize(("text", "line"), [
    ("[[about 3|fp32_mb]]", 1),            # a literal the book cannot test
    ("\n[[262.1|nope]]", 2),               # a value the check does not record
    ("[[1|broken:x]]", 1),                 # another check that failed
    ("[[sanity:nope]]", 1),                # an assertion the check does not make
    ("\n\n[[figure:nope]]", 3),            # a figure the check does not draw
    ("[[1|gone_check:x]]", 1),             # no such check (see the results below)
])
def test_a_marker_that_could_not_be_verified_is_recorded_as_unverified_and_not_ok(text: str, line: int) -> None:
    results = {**RESULTS, "gone_check.py": CheckResult("checks/gone_check.py", Status.MISSING)}
    rep = verify_page(text, *ctx(results=results))
    assert [(r.kind, r.ok, r.line) for r in rep.records] == [(RecordKind.UNVERIFIED, False, line)]
    assert len(rep.diagnostics) == 1 and rep.diagnostics[0].line == line


def test_a_claim_on_a_page_with_no_check_is_unverified_with_its_own_line() -> None:
    rep = verify_page("\n[[3|n]]", *ctx(check=None))
    assert [str(d) for d in rep.diagnostics] == [
        "problems/X.md:2: claim 'n' on a page with no check: add 'check:' to the front matter"]
    assert [(r.kind, r.ok) for r in rep.records] == [(RecordKind.UNVERIFIED, False)]


def test_a_verified_claim_records_value_rule_unit_source_and_provenance() -> None:
    rec = verify_page("[[262.1|fp32_mb]] MB and [[8,192|ctx]] tokens", *ctx()).records
    first, second = rec
    assert (first.kind, first.name, first.check, first.value, first.ok, first.test, first.unit, first.source_line,
            first.device, first.ran_at, first.how, first.source, first.shown) == (
        RecordKind.CLAIM, "fp32_mb", "checks/demo.py", 262.144, True, "to 1 decimal place(s)", "MB", 7,
        "cpu: x86_64", "2026-12-03 06:00 UTC", "ran for this build", "", "262.1")
    assert (second.source, second.unit, second.source_line) == ("Llama 3 paper (read 2026-12-03)", "", None)


@pytest.mark.parametrize(("cached", "frozen", "how"), [
    (False, False, "ran for this build"), (True, False, "from cache"), (False, True, FROZEN_HOW),
    (True, True, FROZEN_HOW),
])
def test_a_claim_says_how_its_value_came_to_this_build(cached: bool, frozen: bool, how: str) -> None:
    res = CheckResult("checks/demo.py", "ok", values={"x": 1.5}, cached=cached, frozen=frozen)
    rec = verify_page("[[1.5|x]]", *ctx(results={"demo.py": res})).records[0]
    assert rec.how == how


def test_a_sanity_marker_records_its_verdict_message_line_and_operands_and_counts_as_a_claim() -> None:
    rep = verify_page("Half. [[sanity:half]]", *ctx())
    assert [(r.kind, r.name, r.check, r.ok, r.message, r.source_line, r.operands) for r in rep.records] == [
        (RecordKind.SANITY, "half", "checks/demo.py", True, "half of it", 9, (1.0, 2.0))]
    assert rep.claims == {"checks/demo.py": 1}


def test_a_sanity_that_failed_or_recorded_no_verdict_is_an_error_and_not_ok() -> None:
    rep = verify_page("A. [[sanity:bare]]\nB. [[sanity:noflag]]", *ctx())
    assert [str(d) for d in rep.diagnostics] == [
        "problems/X.md:1: sanity 'bare' failed in checks/demo.py",
        "problems/X.md:2: sanity 'noflag' failed in checks/demo.py: no verdict recorded"]
    assert [(r.kind, r.ok, r.message) for r in rep.records] == [(RecordKind.SANITY, False, ""),
                                                                 (RecordKind.SANITY, False, "no verdict recorded")]


def test_a_marker_naming_nothing_lists_what_there_is_or_says_none() -> None:
    bare = CheckResult("checks/demo.py", "ok", values={"x": 1})
    assert errors("[[sanity:s]] [[figure:f]]", ctx(results={"demo.py": bare})) == [
        "problems/X.md:1: sanity marker 's' names no assertion in checks/demo.py (it asserts: none)",
        "problems/X.md:1: figure 'f' is not drawn by checks/demo.py (it draws: none)"]
    assert errors("[[sanity:s]]") == [
        "problems/X.md:1: sanity marker 's' names no assertion in checks/demo.py (it asserts: bare, half, noflag)"]
    only_inputs = CheckResult("checks/demo.py", "ok", inputs={"B": 4, "A": 1})
    assert errors("[[1|x]]", ctx(results={"demo.py": only_inputs})) == [
        "problems/X.md:1: claim 'x' names a value checks/demo.py does not record (it records: A, B)"]


def test_a_reasoned_allowance_renders_as_nothing_and_is_no_claim() -> None:
    rep = verify_page("The 2 here is structural [[relation:none|a count of sides, not a result]].", *ctx())
    assert [(r.kind, r.ok) for r in rep.records] == [(RecordKind.FREE, True)] and rep.claims == {}


def test_a_reference_splits_at_the_first_colon_only() -> None:
    assert errors("[[1|other:w:x]]") == [
        "problems/X.md:1: claim 'w:x' names a value checks/other.py does not record (it records: w)"]


def test_another_checks_failure_is_reported_at_the_claim_not_at_this_pages_check_line() -> None:
    assert [e.splitlines()[0] for e in errors("\n\n[[1|broken:x]]")] == [
        "problems/X.md:3: check 'checks/broken.py' raised: ValueError: no"]


@pytest.mark.parametrize(("text", "message"), [
    ("[[262.144000|fp32_mb]]", "problems/X.md:1: claim 'fp32_mb' is written with 9 significant digits, but "
                               "checks/demo.py computed it in torch.float32, which carries about 8: round it"),
    ("[[2.62144000e2|fp32_mb]]", "problems/X.md:1: claim 'fp32_mb' is written with 9 significant digits, but "
                                 "checks/demo.py computed it in torch.float32, which carries about 8: round it"),
    ("[[262.14400|fp32_mb]]", None),                   # 8 digits: what float32 carries
    ("[[262.144000|fp32_mb ± 0.1]]", None),            # a tolerance says the precision itself
    ("[[1.50000000000|lat_ms]]", None),                # no dtype recorded: no rule to apply
])
def test_a_claim_may_not_claim_more_digits_than_its_dtype_carries(text: str, message: str | None) -> None:
    assert errors(text) == ([message] if message else [])


@pytest.mark.parametrize(("text", "message"), [
    ("[[262.1|fp32_mb]] MiB", "problems/X.md:1: claim 'fp32_mb' is written in MiB, but checks/demo.py computed it "
                              "in MB: 262.144 MB = 250.0 MiB"),
    ("[[2|w]] MB", "problems/X.md:1: claim 'w' is written in MB, but checks/demo.py computed it in GB: "
                   "2.0 GB = 2000.0 MB"),
    ("[[1.5|lat_ms]] MB", "problems/X.md:1: claim 'lat_ms' is written in MB, but checks/demo.py computed it in ms"),
    ("[[262.1|fp32_mb]] MB", None),
    ("[[1.5|lat_ms]] ms", None),
])
def test_a_unit_written_after_a_claim_must_be_the_values_unit(text: str, message: str | None) -> None:
    assert errors(text) == ([message] if message else [])


def test_a_boolean_value_gets_no_conversion_in_a_unit_message() -> None:
    res = CheckResult("checks/demo.py", "ok", values={"flag": True}, units={"flag": "MB"})
    assert errors("[[1|flag]] MiB", ctx(results={"demo.py": res})) == [
        "problems/X.md:1: claim 'flag' is written in MiB, but checks/demo.py computed it in MB"]


@pytest.mark.parametrize(("text", "numbers"), [
    ("see <b>5</b> items", ["5"]), ("GPT-2 has 7 layers", ["7"]), ("Step 3 of 9 took 42", ["42"]),
    ("x_1 plus 4", ["4"]), ("1 and 0 and 12", ["12"]),
])
def test_numbers_in_prose_that_are_quantities(text: str, numbers: list[str]) -> None:
    assert unbound_numbers(text) == numbers


def test_a_number_right_after_a_code_span_is_still_a_number_of_the_prose() -> None:
    page = "## Statement\n\nThe `x`7 rows and `y` and `z`9 more.\n"
    assert [e for e in errors(page, ctx(scan=True)) if "unbound" in e] == [
        "problems/X.md:3: unbound number '7' in Statement: bind it with [[7|name]] or mark it [[7|free]]",
        "problems/X.md:3: unbound number '9' in Statement: bind it with [[9|name]] or mark it [[9|free]]"]


def test_a_number_right_after_a_claim_is_still_a_number_of_the_prose() -> None:
    page = "## Statement\n\nWith [[4|B]]5 more.\n"
    assert [e for e in errors(page, ctx(scan=True)) if "unbound" in e] == [
        "problems/X.md:3: unbound number '5' in Statement: bind it with [[5|name]] or mark it [[5|free]]"]


def _page(offset: int = 0, first_line: int | None = None, check: str | None = "demo.py",
          results: dict[str, CheckResult] = RESULTS) -> tuple[PageContext, Fixed]:
    return (PageContext("problems/X.md", check, line_offset=offset, first_line=first_line, check_line=4, problem=True,
                        scan_numbers=True), Fixed(lambda name: results[name]))


LONG = ("The step reads the whole cache of every sequence in the batch at every token, so each step is larger "
        "and slower [[262.1|fp32_mb]].")


def test_a_relation_sentence_is_named_at_its_line_shortened_past_ninety_characters() -> None:
    found = [str(d) for d in verify_page("## Statement\n\n" + LONG + "\n", *_page(offset=10)).diagnostics
             if "relation" in str(d)]
    assert len(found) == 1 and found[0].startswith("problems/X.md:13: relation sentence with no sanity (")
    assert "relation sentence with no sanity (larger, slower): '" in found[0]
    quoted = found[0].split("): '", 1)[1].split("': back it", 1)[0]
    assert len(quoted) == 88 and quoted.endswith("…") and LONG.startswith(quoted[:-1])


def test_a_relation_sentence_of_ninety_characters_is_quoted_whole() -> None:
    text = "It is larger than the weights, so the step is slower [[262.1|fp32_mb]]."
    sentence = text.replace("It is", "It is " + "x" * (90 - len(text) - 3) + " y")   # exactly 90 characters
    assert len(sentence) == 90
    found = [str(d) for d in verify_page("## Statement\n\n" + sentence + "\n", *_page()).diagnostics
             if "relation" in str(d)]
    assert f"'{sentence}': back it" in found[0]
    longer = sentence.replace(" y", " yz")
    found = [str(d) for d in verify_page("## Statement\n\n" + longer + "\n", *_page()).diagnostics
             if "relation" in str(d)]
    assert f"'{longer[:87]}…': back it" in found[0]


def test_section_and_given_faults_are_placed_on_the_pages_own_lines() -> None:
    no_given = [str(d) for d in verify_page("## Statement\n\nText.\n", *_page(offset=5)).diagnostics]
    assert "problems/X.md:6: input 'B' of checks/demo.py is not stated in Given: write it as [[4|B]]" in no_given
    assert "problems/X.md:6: missing section '## Given'" in no_given
    at_first = [str(d) for d in verify_page("## Statement\n\nText.\n", *_page(offset=5, first_line=2)).diagnostics]
    assert "problems/X.md:2: missing section '## Given'" in at_first
    given = [str(d) for d in verify_page("## Statement\n\nText.\n\n## Given\n\nNothing yet.\n",
                                         *_page(offset=5)).diagnostics]
    assert "problems/X.md:10: input 'B' of checks/demo.py is not stated in Given: write it as [[4|B]]" in given


def test_a_problem_page_with_no_check_or_a_failed_one_asks_for_no_inputs() -> None:
    assert not [d for d in verify_page("## Given\n\nNone.\n", *_page(check=None)).diagnostics if "input" in str(d)]
    failed = CheckResult("checks/demo.py", Status.ERROR, inputs={"B": 4}, stderr="ValueError: late\n")
    assert not [d for d in verify_page("## Given\n\nNone.\n", *_page(results={"demo.py": failed})).diagnostics
                if "input" in str(d)]


def test_the_sanity_sentence_rule_holds_on_problem_pages_only() -> None:
    page = "## Check — sanity\n\nThe loss is positive.\n"
    found = " ".join(str(d) for d in verify_page(page, *_page()).diagnostics)
    assert "problems/X.md:3: sanity sentence with no executed assertion" in found
    assert not [d for d in verify_page(page, *ctx()).diagnostics if "sanity sentence" in str(d)]


def test_a_check_that_records_only_assertions_says_it_records_nothing_a_claim_can_name() -> None:
    only = CheckResult("checks/demo.py", "ok", sanity={"s": {"ok": True, "message": ""}})
    assert errors("[[1|x]]", ctx(results={"demo.py": only})) == [
        "problems/X.md:1: claim 'x' names a value checks/demo.py does not record (it records: nothing)"]


def test_another_check_that_recorded_nothing_is_reported_at_the_claim() -> None:
    results = {**RESULTS, "empty.py": CheckResult("checks/empty.py", "ok")}
    assert errors("\n\n[[1|empty:x]]", ctx(results=results)) == [
        "problems/X.md:3: check 'checks/empty.py' ran but recorded nothing: record what the page states with "
        "numbook.check.given(), value(), sanity() or figure()"]


def test_markers_on_a_failed_check_are_unverified_and_another_checks_failure_sits_at_the_marker() -> None:
    failed = CheckResult("checks/demo.py", Status.ERROR, stderr="KeyError: k\n")
    rep = verify_page("[[sanity:x]]\n[[figure:f]]\n[[1|z]]\n\n[[sanity:broken:y]]",
                      *ctx(results={**RESULTS, "demo.py": failed}))
    assert [(r.kind, r.ok) for r in rep.records] == [(RecordKind.UNVERIFIED, False)] * 4
    assert [str(d).splitlines()[0] for d in rep.diagnostics] == [   # one fault per failed check
        "problems/X.md:4: check 'checks/demo.py' raised: KeyError: k",       # at the page's check: line
        "problems/X.md:5: check 'checks/broken.py' raised: ValueError: no"]  # at the marker that names it


def test_a_sanity_entry_without_a_message_has_none_in_its_record_or_its_fault() -> None:
    res = CheckResult("checks/demo.py", "ok", sanity={"quiet": {"ok": False}, "fine": {"ok": True}})
    rep = verify_page("A. [[sanity:quiet]] B. [[sanity:fine]]", *ctx(results={"demo.py": res}))
    assert [str(d) for d in rep.diagnostics] == ["problems/X.md:1: sanity 'quiet' failed in checks/demo.py"]
    assert [(r.ok, r.message) for r in rep.records] == [(False, ""), (True, "")]


def test_a_figure_names_the_figures_its_check_draws_and_records_its_provenance() -> None:
    res = CheckResult("checks/demo.py", "ok", cached=True, device="cpu: x",
                      figures={"a": {"caption": "A.", "svg": "<svg/>"}, "b": {"caption": "B.", "svg": "<svg/>"}})
    rep = verify_page("[[figure:a]]\n[[figure:c]]", *ctx(results={"demo.py": res}))
    assert [str(d) for d in rep.diagnostics] == [
        "problems/X.md:2: figure 'c' is not drawn by checks/demo.py (it draws: a, b)"]
    first = rep.records[0]
    assert (first.kind, first.caption, first.svg, first.how, first.device) == (
        RecordKind.FIGURE, "A.", "<svg/>", "from cache", "cpu: x")
