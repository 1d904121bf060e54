"""Claims on a page: Markdown in, HTML out, and the exact message of every fault."""

from __future__ import annotations

import base64
import logging

import markdown
import pytest
from markdown.extensions.toc import TocExtension

from _results import Fixed
from numbook.core.verify import PageContext, verify_page
from numbook.html.extension import NumbookExtension
from numbook.run.runner import CheckResult

RESULT = CheckResult(
    "checks/demo.py", "ok",
    inputs={"B": 4, "T": 512},
    values={"fp32_mb": 262.144, "numel": 65_536_000, "ratio": 0.17634, "shape": [4, 512, 32000]},
    sanity={"half": {"ok": True, "message": ""}},
    lines={"half": 12},
)


def ctx(problem: bool = False, result: CheckResult = RESULT, offset: int = 0) -> tuple[PageContext, Fixed]:
    return (PageContext("problems/X.md", "demo.py", line_offset=offset, check_line=4, problem=problem,
                        scan_numbers=problem), Fixed(lambda name: result))


def render(text: str, page: tuple[PageContext, Fixed], *extra: object) -> str:
    md = markdown.Markdown(extensions=[NumbookExtension(context=page[0], results=page[1]), "tables",
                                       "pymdownx.arithmatex", *extra],
                           extension_configs={"pymdownx.arithmatex": {"generic": True}})
    return md.convert(text)


def messages(text: str, page: tuple[PageContext, Fixed]) -> list[str]:
    return [str(d) for d in verify_page(text, *page).diagnostics]


def test_claim_renders_as_the_plain_number_with_provenance() -> None:
    html = render("Memory is [[262.1|fp32_mb]] MB.", ctx())
    assert html == (
        '<p>Memory is <span class="nb-claim" data-claim="fp32_mb" data-check="checks/demo.py" data-value="262.144" '
        'data-device="" data-date="" title="fp32_mb = 262.144 MB · computed by checks/demo.py · compared to 1 '
        'decimal place(s) · (ran for this build)" tabindex="0">262.1</span> MB.</p>'
    )


def test_claim_inside_math_is_tex_with_a_tooltip() -> None:
    html = render("$N = [[65{,}536{,}000|numel]]$ and $[[17.6%|ratio]]$", ctx())
    assert r"\(N = \class{nb-claim}{\cssId{nb-mc-1-5}{65{,}536{,}000}}\)" in html
    assert r"\(\class{nb-claim}{\cssId{nb-mc-1-36}{17.6\%}}\)" in html
    assert ('<script type="application/json" class="nb-claims">[{"id": "nb-mc-1-5", "shown": "65,536,000", '
            '"tip": "numel = 65536000 · computed by checks/demo.py · compared exact · (ran for this build)"}, '
            '{"id": "nb-mc-1-36", "shown": "17.6%", "tip": "ratio = 0.17634 · computed by checks/demo.py · '
            'compared in percent, to 1 decimal place(s) · (ran for this build)"}]</script>') in html


def test_claim_in_a_table_cell() -> None:
    html = render("| a | b |\n|---|---|\n| [[(4, 512, 32000)|shape]] | [[65,536,000|numel]] |", ctx())
    assert '<td><span class="nb-claim"' in html and ">(4, 512, 32000)</span></td>" in html
    assert ">65,536,000</span></td>" in html


def test_claims_in_code_are_left_alone() -> None:
    html = render("Write `[[262.1|fp32_mb]]` in the prose.\n\n```\n[[9|nope]]\n```", ctx())
    assert "<code>[[262.1|fp32_mb]]</code>" in html
    assert "[[9|nope]]" in html


def test_a_wrong_digit_is_an_error_naming_path_line_claim_written_and_computed(
        caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="mkdocs.plugins.numbook"):
        html = render("first line\n\nMemory is [[262.2|fp32_mb]] MB.", ctx(offset=7))
    assert caplog.messages == [
        "problems/X.md:10: claim 'fp32_mb' reads 262.2, checks/demo.py computed 262.144 "
        "(compared to 1 decimal place(s))"
    ]
    assert "nb-claim-bad" in html


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[[3|nope]]", "problems/X.md:1: claim 'nope' names a value checks/demo.py does not record "
                       "(it records: B, T, fp32_mb, numel, ratio, shape)"),
        ("[[about 3|numel]]", "problems/X.md:1: claim '[[about 3|numel]]': 'about 3' is not a literal this book "
                              "can test (a number, a percentage, scientific notation, a number word, a shape, "
                              "a vector or a bound)"),
        ("ok [[sanity:nope]]", "problems/X.md:1: sanity marker 'nope' names no assertion in checks/demo.py "
                               "(it asserts: half)"),
        ("[[17.7%|ratio]]", "problems/X.md:1: claim 'ratio' reads 17.7%, checks/demo.py computed 0.17634 "
                            "(compared in percent, to 1 decimal place(s))"),
        ("[[(4, 512)|shape]]", "problems/X.md:1: claim 'shape' reads (4, 512), checks/demo.py computed "
                               "(4, 512, 32000) (compared exact shape)"),
    ],
)
def test_fault_messages(text: str, message: str) -> None:
    assert messages(text, ctx()) == [message]


def test_free_numbers_and_tolerances() -> None:
    assert messages("In [[2024|free]], [[260|fp32_mb ± 5]] and [[250|fp32_mb ± 10%]].", ctx()) == []
    assert messages("[[250|fp32_mb ± 1%]]", ctx()) == [
        "problems/X.md:1: claim 'fp32_mb' reads 250, checks/demo.py computed 262.144 (compared within ± 1%)"]


PROBLEM = """## Statement

Logits of shape $(B, T, |V|)$.

## Given

$B = [[4|B]]$ and $T = [[512|T]]$.

## Find

Memory.

## Strategy

Count.

## Solution

### Step 1 — count

There are [[65,536,000|numel]] values, [[262.1|fp32_mb]] MB at 4 bytes each, and 2048 rows.

## Answer

[[262.1|fp32_mb]] MB.

## Check — numeric

```check
```

## Check — sanity

- Half. [[sanity:half]]
- A sentence that nothing backs.

## Where this breaks

Never.

## Variation

Double $B$.
"""


def test_problem_rules_unbound_numbers_and_unbacked_sanity_sentences() -> None:
    assert messages(PROBLEM, ctx(problem=True, offset=6)) == [
        "problems/X.md:27: unbound number '4' in Solution: bind it with [[4|name]] or mark it [[4|free]]",
        "problems/X.md:27: unbound number '2048' in Solution: bind it with [[2048|name]] or mark it [[2048|free]]",
        "problems/X.md:41: sanity sentence with no executed assertion: end it with [[sanity:name]] naming a "
        "sanity() in the check",
    ]


def test_given_states_every_input_and_only_inputs() -> None:
    text = PROBLEM.replace("$B = [[4|B]]$ and $T = [[512|T]]$.", "$B = [[4|B]]$, memory [[262.1|fp32_mb]].")
    assert messages(text, ctx(problem=True))[:2] == [
        "problems/X.md:7: claim 'fp32_mb' in Given binds to a computed value; Given states inputs, recorded in "
        "checks/demo.py with given()",
        "problems/X.md:21: unbound number '4' in Solution: bind it with [[4|name]] or mark it [[4|free]]",
    ]
    assert messages(text, ctx(problem=True))[-1] == (
        "problems/X.md:5: input 'T' of checks/demo.py is not stated in Given: write it as [[512|T]]")


def test_missing_sections_are_reported() -> None:
    assert messages("## Statement\n\nText.\n", ctx(problem=True))[:2] == [
        "problems/X.md:1: missing section '## Given'",
        "problems/X.md:1: missing section '## Find'",
    ]


@pytest.mark.parametrize(
    ("result", "message"),
    [
        (CheckResult("checks/demo.py", "missing"),
         "problems/X.md:4: check 'checks/demo.py' does not exist (named by 'check: demo.py')"),
        (CheckResult("checks/demo.py", "timeout", timeout_s=5),
         "problems/X.md:4: check 'checks/demo.py' timed out after 5 s (raise it with a "
         "'# numbook: timeout=SECONDS' line in the check)"),
        (CheckResult("checks/demo.py", "error", returncode=1,
                     stderr='Traceback (most recent call last):\n  File "checks/demo.py", line 3, in <module>\n'
                            "    1 / 0\nZeroDivisionError: division by zero\n"),
         "problems/X.md:4: check 'checks/demo.py' raised: ZeroDivisionError: division by zero\n"
         "    Traceback (most recent call last):\n"
         '      File "checks/demo.py", line 3, in <module>\n'
         "        1 / 0\n"
         "    ZeroDivisionError: division by zero"),
    ],
)
def test_a_failed_check_is_one_error_at_the_check_line(result: CheckResult, message: str) -> None:
    assert messages("[[262.1|fp32_mb]] and [[4|B]]", ctx(result=result)) == [message]


def test_solution_and_answer_are_behind_a_reveal_on_problem_pages() -> None:
    html = render("## Solution\n\n### Step 1 — count\n\nText.\n\n## Answer\n\nIt is [[262.1|fp32_mb]].\n\n"
                  "## Check — numeric\n\nShown.", ctx(problem=True))
    assert html.startswith('<h2>Solution</h2>\n<details class="nb-reveal"><summary>'
                           '<span class="nb-show">Show the solution</span>'
                           '<span class="nb-hide">Hide the solution</span></summary>'
                           "<h3>Step 1 — count</h3>\n<p>Text.</p>\n</details>")
    assert ('<h2>Answer</h2>\n<details class="nb-reveal"><summary>'
            '<span class="nb-show">Show the answer</span><span class="nb-hide">Hide the answer</span></summary>'
            '<p>It is') in html
    assert html.endswith("<h2>Check — numeric</h2>\n<p>Shown.</p>")
    assert "<details" not in render("## Solution\n\nText.", ctx(problem=False))
    with_permalinks = render("## Solution\n\nText.", ctx(problem=True), TocExtension(permalink=True))
    assert "headerlink" in with_permalinks
    assert ('<details class="nb-reveal"><summary>'
            '<span class="nb-show">Show the solution</span><span class="nb-hide">Hide the solution</span>'
            '</summary><p>Text.</p>') in with_permalinks


def test_inline_math_across_a_line_break_and_display_blocks() -> None:
    html = render("Near $\\ln |V| + \\tfrac12 =\n[[262.1|fp32_mb]]$, then [[262.1|fp32_mb]].\n\n"
                  "$$\nN = [[65{,}536{,}000|numel]]\n$$", ctx())
    assert "\\class{nb-claim}{\\cssId{nb-mc-2-0}{262.1}}\\)" in html
    assert 'then <span class="nb-claim"' in html
    assert "N = \\class{nb-claim}{\\cssId{nb-mc-5-4}{65{,}536{,}000}}" in html


def test_figures_drawn_by_the_check() -> None:
    svg = ('<?xml version="1.0"?>\n<!DOCTYPE svg>\n<svg xmlns="http://www.w3.org/2000/svg">\n'
           '  <path d="M0 0"/>\n</svg>\n')
    result = CheckResult("checks/demo.py", "ok", figures={"tput": {"caption": "Throughput.", "svg": svg}})
    html = render("[[figure:tput]]", ctx(result=result))
    data = base64.b64encode(svg.encode()).decode()
    assert html == (f'<figure class="nb-figure" data-figure="tput"><img src="data:image/svg+xml;base64,{data}" '
                    'alt="Throughput."><figcaption>Throughput. <span class="nb-figure-source">Drawn by '
                    "checks/demo.py for this build.</span></figcaption></figure>")
    assert messages("[[figure:nope]]", ctx(result=result)) == [
        "problems/X.md:1: figure 'nope' is not drawn by checks/demo.py (it draws: tput)"]


@pytest.mark.parametrize(("text", "shown"), [
    ("Rates divide by the span, [[310.0|free]] ms here [[relation:none|the definition of the span]]. Next.",
     '<p>Rates divide by the span, <span class="nb-free">310.0</span> ms here. Next.</p>'),
    ("By definition [[relation:none|a definition]], then more.", "<p>By definition, then more.</p>"),
    ("A ceiling. [[relation:none|the reciprocal of the floor]] The next sentence.",
     "<p>A ceiling.  The next sentence.</p>"),
])
def test_a_marker_that_renders_as_nothing_leaves_no_space_before_a_stop(text: str, shown: str) -> None:
    assert render(text, ctx()) == shown
