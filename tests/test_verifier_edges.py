"""Edges of the verifier that a broken verifier would pass silently (issue 18): where math begins and
ends, claims bound to another check, a check's header, a build that runs nothing, figures through the
runner, and the scratch folder a check runs in. Each is a page or a check in, a verdict out."""

from __future__ import annotations

from pathlib import Path

import pytest

from _project import project
from _results import Fixed
from numbook.core.verify import PageContext, RecordKind, verify_page
from numbook.run.runner import CheckResult, Runner, Status, read_header

DEMO = CheckResult("checks/demo.py", "ok", inputs={"B": 4}, values={"fp32_mb": 262.144, "numel": 65_536_000},
                   sanity={"half": {"ok": True, "message": ""}})
OTHER = CheckResult("checks/other.py", "ok", values={"w": 7.5}, sanity={"holds": {"ok": True, "message": ""},
                                                                         "fails": {"ok": False, "message": "no"}})
GONE = CheckResult("checks/gone.py", Status.MISSING)
RESULTS = {"demo.py": DEMO, "other.py": OTHER, "gone.py": GONE}


def ctx() -> tuple[PageContext, Fixed]:
    return PageContext("problems/X.md", "demo.py", check_line=4), Fixed(lambda name: RESULTS[name])


def in_math(text: str) -> list[tuple[str, bool]]:
    """Each claim's name and whether the verifier took it for TeX math."""
    return [(r.name, r.math) for r in verify_page(text, *ctx()).records if r.kind == RecordKind.CLAIM]


@pytest.mark.parametrize(("text", "math"), [
    (r"rent is \$[[262.1|fp32_mb]] a month", False),                  # an escaped dollar is a dollar sign
    (r"\$5 buys $x = [[262.1|fp32_mb]]$", True),                      # ... and opens no math of its own
    ("a $ left open\n\n[[262.1|fp32_mb]] MB", False),                 # an unclosed $ stops at its paragraph
    ("$x =\n[[262.1|fp32_mb]]$", True),                               # ... but runs on within it
    ("$a$ then [[262.1|fp32_mb]] then $b$", False),                   # between two inline spans: prose
    ("$$\nN = [[65{,}536{,}000|numel]]\n$$", True),                   # a display block
    ("$$\nN = 1\n$$\n[[262.1|fp32_mb]]", False),                      # after the block closes: prose
    ("$$N = [[65{,}536{,}000|numel]]$$ and [[262.1|fp32_mb]]", None),  # both on one line
])
def test_where_math_begins_and_ends(text: str, math: bool | None) -> None:
    found = in_math(text)
    if math is None:
        assert found == [("numel", True), ("fp32_mb", False)]
    else:
        assert found == [(found[0][0], math)]


def test_a_comma_grouped_number_inside_math_is_refused_with_its_tex_spelling() -> None:
    assert [str(d) for d in verify_page("$N = [[65,536,000|numel]]$", *ctx()).diagnostics] == [
        "problems/X.md:1: claim '[[65,536,000|numel]]': inside math a comma is read as punctuation and renders "
        "as '65, 536, 000'; write 65{,}536{,}000"]


def test_a_claim_bound_to_another_check_is_verified_against_that_check() -> None:
    rep = verify_page("Width [[7.5|other:w]] and [[7.50|other.py:w]]; here [[262.1|fp32_mb]].", *ctx())
    assert rep.diagnostics == []
    assert [(r.name, r.check, r.ok) for r in rep.records] == [("w", "checks/other.py", True),
                                                              ("w", "checks/other.py", True),
                                                              ("fp32_mb", "checks/demo.py", True)]
    assert rep.claims == {"checks/other.py": 2, "checks/demo.py": 1}


@pytest.mark.parametrize(("text", "message"), [
    ("[[7.6|other:w]]", "problems/X.md:1: claim 'w' reads 7.6, checks/other.py computed 7.5 "
                        "(compared to 1 decimal place(s))"),
    ("[[7.5|other:nope]]", "problems/X.md:1: claim 'nope' names a value checks/other.py does not record "
                           "(it records: w)"),
    ("\n\n[[7.5|gone:w]]", "problems/X.md:3: check 'checks/gone.py' does not exist "
                           "(named by 'gone:' in a marker on this page)"),
    ("Holds. [[sanity:other:fails]]", "problems/X.md:1: sanity 'fails' failed in checks/other.py: no"),
])
def test_a_wrong_claim_on_another_check_names_that_check(text: str, message: str) -> None:
    assert [str(d) for d in verify_page(text, *ctx()).diagnostics] == [message]


def test_a_sanity_marker_may_name_another_checks_assertion() -> None:
    rep = verify_page("It holds. [[sanity:other:holds]]", *ctx())
    assert rep.diagnostics == [] and [(r.kind, r.check, r.ok) for r in rep.records] == [
        (RecordKind.SANITY, "checks/other.py", True)]


@pytest.mark.parametrize(("header", "message"), [
    ("# numbook: timeout\n", "timeout needs a number of seconds: write timeout=SECONDS"),
    ("# numbook: timeout=soon\n", "timeout='soon' is no number of seconds: write timeout=SECONDS"),
    ("# numbook: timeout=0\n", "timeout=0 must be more than 0 seconds"),
    ("# numbook: timeout=-5\n", "timeout=-5 must be more than 0 seconds"),
    ("# numbook: alone=yes\n", "alone takes no value (got alone=yes): write 'alone'"),
    ("# numbook: requires=tpu\n", "requires='tpu': use cpu or cuda"),
    ("# numbook: fast\n", "unknown numbook header key 'fast' (known: "),
    ("# numbook: env=1BAD\n", "env: '1BAD' is no environment variable name"),
])
def test_a_malformed_header_is_refused_with_what_to_write(header: str, message: str) -> None:
    with pytest.raises(ValueError) as err:
        read_header(header)
    assert str(err.value).startswith(message)



def test_a_check_with_a_malformed_header_is_an_error_that_says_so_and_runs_nothing(tmp_path: Path) -> None:
    root = project(tmp_path, bad="# numbook: timeout\nopen('ran.txt', 'w')\n")
    res = Runner(root, cache_dir=".cache").result("bad.py")
    assert (res.status, res.stderr) == ("error", "checks/bad.py: timeout needs a number of seconds: "
                                                 "write timeout=SECONDS")
    assert not (root / ".cache").exists()


def test_a_build_that_executes_nothing_runs_no_check_and_shows_no_cached_result(tmp_path: Path) -> None:
    root = project(tmp_path, a="from numbook.check import value\nvalue('x', 1)\n")
    assert Runner(root, cache_dir=".cache").result("a.py").values == {"x": 1}      # a result in the cache ...
    floor = Runner(root, cache_dir=".cache", execute=False).result("a.py")
    assert (floor.status, floor.values, floor.cached) == (Status.SKIPPED, {}, False)  # ... that the floor ignores
    assert Runner(root, cache_dir=".cache", execute=False).result("gone.py").status == Status.MISSING


FIGURE = """
    import os
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from numbook.check import figure, value
    fig, ax = plt.subplots()
    ax.plot([0, 1], [0, 1])
    figure("line", fig, "A line.")
    value("cwd", os.getcwd())
    value("tmp", os.environ["TMPDIR"])
    with open("scratch.txt", "w") as fh:   # the working folder is the check's to write in
        fh.write("x")
    value("wrote", os.path.exists("scratch.txt"))
"""


def test_a_figure_comes_back_through_the_runner_and_the_scratch_folder_is_gone_after(tmp_path: Path) -> None:
    root = project(tmp_path, fig=FIGURE)
    res = Runner(root, cache_dir=None).result("fig.py")
    assert res.status == "ok", res.stderr
    assert list(res.figures) == ["line"] and res.figures["line"]["caption"] == "A line."
    assert res.figures["line"]["svg"].lstrip().startswith("<?xml") and "<svg" in res.figures["line"]["svg"]
    cwd, tmp = Path(res.values["cwd"]), Path(res.values["tmp"])
    assert res.values["wrote"] and cwd.name == "work" and tmp.parent == cwd.parent
    assert not cwd.is_relative_to(root) and cwd.parent.name.startswith("numbook-")
    assert not cwd.parent.exists()                    # the runner removed the scratch folder
    assert not (root / "checks" / "scratch.txt").exists()


TRACE = "Traceback (most recent call last):\n  File \"x.py\", line 2\n\nValueError: no\n"


@pytest.mark.parametrize(("res", "message", "detail"), [
    (CheckResult("checks/x.py", Status.MISSING), "check 'checks/x.py' does not exist (named by 'check: x.py')", ""),
    (CheckResult("checks/x.py", Status.TIMEOUT, stderr=TRACE, timeout_s=2.5),
     "check 'checks/x.py' timed out after 2.5 s (raise it with a '# numbook: timeout=SECONDS' line in the check)",
     '    Traceback (most recent call last):\n      File "x.py", line 2\n    ValueError: no'),
    (CheckResult("checks/x.py", "frozen-missing", stderr="  no frozen result for checks/x.py \n"),
     "no frozen result for checks/x.py", ""),
    (CheckResult("checks/x.py", "frozen-stale", stderr="stale: the source changed\n"),
     "stale: the source changed", ""),
    (CheckResult("checks/x.py", "frozen-invalid", stderr="checks/frozen/x.json is not JSON\n"),
     "checks/frozen/x.json is not JSON", ""),
    (CheckResult("checks/x.py", Status.SKIPPED), "", ""),
    (CheckResult("checks/x.py", Status.OUT_OF_MEMORY, stderr="MemoryError\n", memory_limit=2**30),
     "check 'checks/x.py' ran out of memory: it may use 1 GiB (raise it with a '# numbook: memory=…' line in "
     "the check)", "    MemoryError"),
    (CheckResult("checks/x.py", Status.ERROR, stderr=TRACE), "check 'checks/x.py' raised: ValueError: no",
     '    Traceback (most recent call last):\n      File "x.py", line 2\n    ValueError: no'),
    (CheckResult("checks/x.py", Status.ERROR, returncode=-9), "check 'checks/x.py' raised: exit code -9", ""),
])
def test_a_check_that_produced_nothing_is_one_message_with_its_traceback(res: CheckResult, message: str,
                                                                          detail: str) -> None:
    from numbook.core.verify import failure_message

    assert failure_message(res, "x.py") == (message, detail)


def test_a_failed_check_is_one_error_at_its_check_line_however_many_claims_name_it() -> None:
    bad = CheckResult("checks/demo.py", Status.ERROR, stderr="ValueError: no\n")
    context = PageContext("problems/X.md", "demo.py", check_line=4)
    rep = verify_page("[[1|a]]\n[[2|b]]\n[[sanity:c]]\n[[figure:d]]", context, Fixed(lambda name: bad))
    assert [str(d).splitlines()[0] for d in rep.diagnostics] == [
        "problems/X.md:4: check 'checks/demo.py' raised: ValueError: no"]
    assert [r.kind for r in rep.records] == [RecordKind.UNVERIFIED] * 4


def test_a_check_that_recorded_nothing_is_an_error_that_says_what_to_record() -> None:
    empty = CheckResult("checks/demo.py", "ok")
    context = PageContext("problems/X.md", "demo.py", check_line=4)
    assert [str(d) for d in verify_page("[[1|a]] and [[2|b]]", context, Fixed(lambda name: empty)).diagnostics] == [
        "problems/X.md:4: check 'checks/demo.py' ran but recorded nothing: record what the page states with "
        "numbook.check.given(), value(), sanity() or figure()"]


def test_a_pages_lines_are_read_once_per_text_and_an_edit_reads_them_again() -> None:
    from numbook.core.structure import walk

    text = "Prose.\n\n```python\nx = 1\n```\n"
    first = walk(text)
    assert [(ln.index, ln.code) for ln in first] == [(0, False), (1, False), (2, True), (3, True), (4, True),
                                                     (5, False)]
    assert walk("".join(text)) is first   # the same text, another string: the lines already read
    edited = walk(text.replace("```python", "    indented"))
    assert [ln.code for ln in edited] != [ln.code for ln in first]


@pytest.mark.parametrize(("description", "faults"), [
    ("65,536,000 numbers, 262.1 MB, 3 layers", []),          # a claim in math (65{,}536{,}000), one in prose, a free
    ("Llama 3 8B's table on a GPT-2 budget", []),            # names are not quantities, as in the prose
    ("262.2 MB", ["262.2"]),                                 # a copy that no longer matches the claim
    ("7.6 wide", ["7.6"]),                                   # the page writes 7.6, but that claim fails: no support
    ("12 heads and 40 of them", ["40"]),                     # each number on its own: 12 is marked free on the page
    ("[[262.1|fp32_mb]] MB", ["[["]),                        # published as typed: a marker is refused, though it holds
    ("65{,}536{,}000 numbers", ["{,}"]),                     # ... and so is TeX's thousands separator
])
def test_a_description_may_only_repeat_numbers_the_page_binds_or_marks_free(description: str,
                                                                             faults: list[str]) -> None:
    page = ("$N = [[65{,}536{,}000|numel]]$ elements, [[262.1|fp32_mb]] MB, [[3|free]] layers, "
            "[[12|free]] heads and a wrong width [[7.6|other:w]].")
    context = PageContext("problems/X.md", "demo.py", scan_numbers=True, description=description,
                          description_line=5)
    found = [d for d in verify_page(page, context, Fixed(lambda name: RESULTS[name])).diagnostics
             if "description" in d.message]
    assert [d.message.split("'")[1] for d in found] == faults
    if faults == ["[["]:
        assert found[0].message.startswith("the description holds a marker ('[['): it is published as written")
    assert all(d.line == 5 for d in found)


# -- issue 26, holes 5 and 6: units, and every place a reader reads ------------------------------------------
UNITS = CheckResult("checks/demo.py", "ok", values={
    "step_ms": 12.5, "elems": 4, "frac": 0.15, "pct": 15.0, "cache_mib": 512.0, "tflops_peak": 989.0},
    units={"pct": "%", "frac": "fraction", "tflops_peak": "TFLOP/s"})


def unit_faults(text: str) -> list[str]:
    context = PageContext("problems/X.md", "demo.py", check_line=4)
    return [str(d) for d in verify_page(text, context, Fixed(lambda name: UNITS)).diagnostics]


@pytest.mark.parametrize(("text", "message"), [
    ("[[12.5|step_ms]] s", "claim 'step_ms' is written in s, but checks/demo.py computed it in ms: 12.5 ms = 0.0125 s"),
    ("[[12.5|step_ms]] seconds", "claim 'step_ms' is written in s, but checks/demo.py computed it in ms: 12.5 ms = "
                                 "0.0125 s"),
    ("[[512|cache_mib]] megabytes", "claim 'cache_mib' is written in MB, but checks/demo.py computed it in MiB: "
                                    "512.0 MiB = 536.870912 MB"),
    ("[[4|elems]] GiB", "claim 'elems' is followed by the unit 'GiB', but checks/demo.py records no unit for it: "
                        "record the unit it is computed in (value(\"elems\", x, unit=\"GiB\") or given(…, unit=…)), "
                        "so that a wrong unit on the page fails"),
    ("[[0.15|frac]] %", "claim 'frac' is followed by '%', so the reader reads 0.15%, but checks/demo.py recorded it "
                        "as a fraction: 0.15 is 15.0%; write the percentage inside the literal ([[15.0%|frac]] "
                        "compares 100 × the value), or record the value in percent (unit=\"%\")"),
    ("[[0.15|frac]] percent", "claim 'frac' is followed by 'percent', so the reader reads 0.15%, but checks/demo.py "
                              "recorded it as a fraction: 0.15 is 15.0%; write the percentage inside the literal "
                              "([[15.0%|frac]] compares 100 × the value), or record the value in percent (unit=\"%\")"),
    ("[[989|tflops_peak]] TFLOP", "claim 'tflops_peak' is written in TFLOP, but checks/demo.py computed it in TFLOP/s"),
])
def test_a_unit_after_a_claim_is_read_in_symbols_and_words_and_must_be_the_values(text: str, message: str) -> None:
    assert unit_faults(text) == [f"problems/X.md:1: {message}"]


@pytest.mark.parametrize("text", [
    "[[12.5|step_ms]] ms", "[[12.5|step_ms]] milliseconds", "[[15|pct]] %", "[[15|pct]] percent",
    "[[15%|frac]] of it", "[[989|tflops_peak]] TFLOP/s", "[[4|elems]] elements", "$[[4|elems]]\\,B$",
])
def test_the_right_unit_or_no_unit_word_passes(text: str) -> None:
    assert unit_faults(text) == []


def scanned(text: str, **kw: object) -> list[str]:
    context = PageContext("problems/X.md", "demo.py", scan_numbers=True, **kw)  # type: ignore[arg-type]
    return [str(d) for d in verify_page(text, context, Fixed(lambda name: RESULTS[name])).diagnostics
            if "number" in d.message]


@pytest.mark.parametrize(("text", "number"), [
    ("## Step 2 — 48 layers", "48"),                       # a heading
    ("It takes 262MB.", "262"),                           # a unit glued to the digits
    ("It takes _262.2_ MB.", "262.2"),                    # emphasis
    ("It takes *262.2* MB.", "262.2"),
    ("The cache holds\n2048. tokens of context", "2048"),  # a paragraph is not interrupted by a list
    ("Take sequence 513 of them.", "513"),                # "sequence" names nothing: 513 may be a length
    ("About 10¹¹ FLOPs.", "10¹¹"),                        # a superscript power
    ("A share of .85 of it.", ".85"),                     # a leading decimal point
    ("$x = 2^{15}$", "15"),                               # a power that defines no unit
    ("$y = \\frac{3}{4}$", "3"),                          # the numbers inside \frac
    ("See [the 7 rows](x.md \"all 9 of them\")", "7"),    # link text and its title
])
def test_every_place_a_reader_reads_is_scanned(text: str, number: str) -> None:
    assert any(f"unbound number '{number}'" in e for e in scanned(text)), scanned(text)


@pytest.mark.parametrize("text", [
    "1. one\n2. two\n3. three", "Intro.\n\n12. twelve\n13. thirteen", "MB are 10⁶ bytes, MiB 2²⁰.",
    "$10^{6}$ and $2^{30}$", "Llama 3 8B and GPT-2 in fp32", "Step 3 of 9", "x_1 and $t_{2}$",
])
def test_list_ordinals_unit_powers_and_names_are_not_quantities(text: str) -> None:
    assert scanned(text) == []


def test_a_number_in_a_power_suggests_a_literal_the_parser_reads() -> None:
    assert scanned("About 10¹¹ and .85.") == [
        "problems/X.md:1: unbound number '10¹¹': bind it with [[1e11|name]] or mark it [[1e11|free]]",
        "problems/X.md:1: unbound number '.85': bind it with [[0.85|name]] or mark it [[0.85|free]]"]


def test_title_and_conventions_are_scanned_at_their_own_lines() -> None:
    fields = {"title": (3, "The 48 layers"), "conventions": (7, "MB are 10⁶ bytes; 262.1 MB is the budget")}
    found = scanned("Body [[262.1|fp32_mb]] MB.", fields=fields)
    assert found == ["problems/X.md:3: number '48' in the front matter's 'title' repeats no verified claim or free "
                     "number of this page: it is published as written and cannot be bound, so it must repeat a number "
                     "the prose binds ([[48|name]]) or marks free ([[48|free]]), or leave it out"]


def test_the_frame_a_build_puts_around_a_page_is_not_scanned() -> None:
    page = "# I.4.B07 · 48 layers\n\nBody text.\n\n## Draws on\n\n- [I.1.A01 · 16 bytes](x.md)\n"
    # the build's H1 stands 2 lines before the body (file line 5), and Draws on past its last line (6)
    assert scanned(page, line_offset=2, first_line=5, last_line=6) == []
    assert scanned(page, line_offset=2) != []


def test_a_description_number_must_repeat_a_claim_of_the_same_unit() -> None:
    page = "[[262.1|fp32_mb]] MB"
    assert scanned(page, description="262.1 MB") == []
    assert scanned(page, description="262.1 GB") == [
        "problems/X.md:1: number '262.1' GB in the description repeats no verified claim or free number of this "
        "page: a description cannot be bound, so each of its numbers must repeat one the prose binds "
        "([[262.1|name]]) or marks free ([[262.1|free]]), or leave it out"]
