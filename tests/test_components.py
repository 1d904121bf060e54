"""The lesson components: Markdown in, HTML out, and every fault a warning with path:line."""

from __future__ import annotations

import logging
import textwrap
from collections.abc import Iterator

import markdown
import pytest

from _results import Fixed
from numbook.core.verify import PageContext
from numbook.html.components import makeExtension
from numbook.html.extension import NumbookExtension
from numbook.run.runner import CheckResult

EXTENSIONS = ["numbook", "numbook.components", "pymdownx.superfences", "attr_list", "md_in_html"]


PAGE: list[tuple[PageContext, Fixed]] = []


def render(src: str) -> str:
    """Convert a lesson snippet; inside ``checked_page`` the page has a check."""
    extensions: list[object] = [NumbookExtension(context=PAGE[-1][0], results=PAGE[-1][1]) if PAGE else "numbook",
                                *EXTENSIONS[1:]]
    md = markdown.Markdown(extensions=extensions)
    return md.convert(textwrap.dedent(src).strip("\n"))


def warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]


@pytest.fixture
def checked_page() -> Iterator[None]:
    """A page whose check recorded z = (8, 5) and n = 40."""
    res = CheckResult("checks/l_test.py", "ok", values={"z": [8, 5], "n": 40})
    PAGE.append((PageContext("lessons/x.md", "l_test.py", line_offset=4), Fixed(lambda name: res)))
    try:
        yield
    finally:
        PAGE.pop()


def test_extension_loads_by_its_dotted_name() -> None:
    assert type(makeExtension()).__name__ == "ComponentsExtension"
    assert "blocks" in markdown.Markdown(extensions=["numbook.components"]).parser.blockprocessors


# -- quick check ---------------------------------------------------------------------------------

QUIZ = """
/// quiz | Which tensor has a batch axis?
- [ ] `W`
    It is shared.
- [x] `X`
    Right.
///
"""


def test_quiz_renders_options_explanations_and_a_live_region(caplog: pytest.LogCaptureFixture) -> None:
    assert render(QUIZ) == (
        '<div class="nb-quiz" data-nb-quiz="" id="nb-quiz-1">\n'
        '<p class="nb-quiz__label">Quick check</p>\n'
        '<p class="nb-quiz__question" id="nb-quiz-1-q">Which tensor has a batch axis?</p>\n'
        '<div aria-labelledby="nb-quiz-1-q" class="nb-quiz__group" role="group">\n'
        '<ul class="nb-quiz__options">\n'
        '<li class="nb-quiz__option" data-correct="false"><button aria-pressed="false" class="nb-quiz__choice" '
        'type="button"><span class="nb-quiz__text"><code>W</code></span></button><div class="nb-quiz__why" '
        'data-search-exclude="" id="nb-quiz-1-why-1">\n<p>It is shared.</p>\n</div>\n</li>\n'
        '<li class="nb-quiz__option" data-correct="true"><button aria-pressed="false" class="nb-quiz__choice" '
        'type="button"><span class="nb-quiz__text"><code>X</code></span></button><div class="nb-quiz__why" '
        'data-search-exclude="" id="nb-quiz-1-why-2">\n<p>Right.</p>\n</div>\n</li>\n'
        "</ul>\n"
        "</div>\n"
        '<div aria-live="polite" class="nb-quiz__feedback" role="status"></div>\n'
        "</div>"
    )
    assert warnings(caplog) == []


def test_quiz_keeps_a_prompt_a_label_an_id_and_loose_options() -> None:
    html = render("""
        /// quiz | Which bug?
            id: bug-a
            label: Bug spotter
        Look at the code first.

        - [ ] a sum

            Explained in two paragraphs.

            The second one.

        - [X] a mean
            Right.
        ///
    """)
    assert 'id="nb-bug-a"' in html and '<p class="nb-quiz__label">Bug spotter</p>' in html
    assert '<div class="nb-quiz__prompt">\n<p>Look at the code first.</p>\n</div>' in html
    assert '<p>Explained in two paragraphs.</p>\n<p>The second one.</p>' in html
    assert 'data-correct="true"><button aria-pressed="false" class="nb-quiz__choice" type="button">' \
        '<span class="nb-quiz__text">a mean</span>' in html


def test_two_keys_are_a_fault_with_the_line(caplog: pytest.LogCaptureFixture) -> None:
    render("Intro.\n\n" + QUIZ.replace("- [ ] `W`", "- [x] `W`"))
    assert warnings(caplog) == ["<markdown>:4: /// quiz: 2 options are marked correct; mark exactly one with '[x]'"]


def test_no_key_and_a_missing_explanation(caplog: pytest.LogCaptureFixture) -> None:
    render("""
        /// quiz | Q?
        - [ ] a
        - [ ] b
            Because.
        ///
    """)
    assert warnings(caplog) == [
        "<markdown>:1: /// quiz: 0 options are marked correct; mark exactly one with '[x]'",
        "<markdown>:1: /// quiz: option 1 ('a') has no explanation; indent one under it",
    ]


def test_a_quiz_without_options_or_question(caplog: pytest.LogCaptureFixture) -> None:
    render("/// quiz\nJust text.\n///")
    assert warnings(caplog) == [
        "<markdown>:1: /// quiz: a quick check needs its question after '|': /// quiz | What shape is X @ W?",
        "<markdown>:1: /// quiz: end the block with a list of options, each starting with '[ ]' or '[x]'",
    ]


def test_an_unknown_or_invalid_option_still_renders_and_says_so(caplog: pytest.LogCaptureFixture) -> None:
    html = render(QUIZ.replace("axis?\n", "axis?\n    colour: red\n    id: 9lives\n"))
    assert 'class="nb-quiz"' in html and 'id="nb-quiz-1"' in html
    assert warnings(caplog) == [
        "<markdown>:1: /// quiz: unknown option 'colour' (known: answer, id, label)",
        "<markdown>:1: /// quiz: option 'id': '9lives' is not an id (letters, digits, '-' and '_', "
        "starting with a letter)",
    ]


def test_a_numeric_key_must_be_a_claim(caplog: pytest.LogCaptureFixture) -> None:
    render("/// quiz | Rows?\n- [x] 8\n    Yes.\n- [ ] 5\n    No.\n///")
    assert warnings(caplog) == [
        "<markdown>:1: /// quiz: the key '8' is a number; bind it to a check value as [[8|name]]"]


def test_a_claimed_key_passes_and_its_tooltip_waits_for_the_answer(
        checked_page: None, caplog: pytest.LogCaptureFixture) -> None:
    html = render("""
        /// quiz | Shape of X @ W?
            answer: z
        - [ ] (3, 5)
            W's shape.
        - [x] [[(8, 5)|z]]
            Rows by columns.
        ///
    """)
    assert warnings(caplog) == []
    assert ('<span class="nb-quiz__text"><span class="nb-claim" data-claim="z" data-check="checks/l_test.py" '
            'data-value="(8, 5)" data-device="" data-date="" tabindex="0" data-nb-title="z = (8, 5) · computed by '
            'checks/l_test.py · compared exact shape · (ran for this build)">(8, 5)</span></span>') in html
    assert ' title="' not in html


def test_a_wrong_option_that_matches_the_key_is_a_fault(checked_page: None, caplog: pytest.LogCaptureFixture) -> None:
    render("""
        /// quiz | How many logits?
            answer: n
        - [x] [[40|n]]
            8 × 5.
        - [ ] 40
            Oops, the same.
        - [ ] 13
            8 + 5.
        ///
    """)
    assert warnings(caplog) == ["lessons/x.md:5: /// quiz: the wrong option '40' also matches the key's value n = 40"]


def test_a_wrong_claim_in_a_key_fails_through_the_claim_itself(
        checked_page: None, caplog: pytest.LogCaptureFixture) -> None:
    render("/// quiz | Shape?\n    answer: z\n- [x] [[(8, 4)|z]]\n    Yes.\n- [ ] (3, 5)\n    No.\n///")
    assert warnings(caplog) == ["lessons/x.md:7: claim 'z' reads (8, 4), checks/l_test.py computed (8, 5) "
                                "(compared exact shape)"]


def test_a_moved_key_is_reported_at_its_line_with_the_answer_and_its_value(
        checked_page: None, caplog: pytest.LogCaptureFixture) -> None:
    render("""
        /// quiz | Shape of X @ W?
            answer: z
        - [x] [[40|n]] logits
            The count, not the shape.
        - [ ] [[(8, 5)|z]]
            Rows by columns.
        ///
    """)
    assert warnings(caplog) == ["lessons/x.md:7: /// quiz: the option marked [x], '40 logits', is not the answer: "
                                "the answer z = (8, 5) is option 2, '(8, 5)'; mark that one [x]"]


def test_an_answer_no_option_binds_and_a_bound_distractor_that_is_also_true(
        checked_page: None, caplog: pytest.LogCaptureFixture) -> None:
    render("/// quiz | How many?\n    answer: m\n- [x] [[40|n]]\n    Yes.\n- [ ] 13\n    No.\n///")
    assert warnings(caplog) == ["lessons/x.md:5: /// quiz: the answer 'm' is bound by no option: write the right "
                                "option as [[…|m]]"]
    caplog.clear()
    PAGE[-1] = (PageContext("lessons/x.md", "l_test.py", line_offset=4), Fixed(lambda name: CheckResult(
        "checks/l_test.py", "ok", values={"n": 40, "m": 40})))
    render("/// quiz | How many?\n    answer: n\n- [x] [[40|n]]\n    Yes.\n- [ ] [[40|m]]\n    No.\n///")
    assert warnings(caplog) == ["lessons/x.md:5: /// quiz: the wrong option '40' also matches the key's value n = 40"]


def test_block_lines_skip_fenced_examples_and_count_front_matter(
        checked_page: None, caplog: pytest.LogCaptureFixture) -> None:
    render("""
        ```markdown
        /// quiz | An example in an author guide
        ///
        ```

        /// quiz | Real?
        - [x] yes
            Yes.
        ///
    """)
    assert warnings(caplog) == ["lessons/x.md:10: /// quiz: a quick check needs at least two options"]


# -- shape debugger ---------------------------------------------------------------------------------

def test_shape_debugger_renders_controls_and_the_starting_shapes(caplog: pytest.LogCaptureFixture) -> None:
    html = render("/// shape-debugger\n    B: 2\n    F: 3\n    C: 4\n    max: 16\n///")
    assert warnings(caplog) == []
    assert html.startswith('<div class="nb-shapes" data-nb-shapes="" id="nb-shapes-1">\n'
                           '<p class="nb-shapes__label">Shape debugger</p>\n')
    assert ('<div class="nb-shapes__control"><label for="nb-shapes-1-B">Batch size, <var>B</var></label>'
            '<span class="nb-shapes__hint" id="nb-shapes-1-B-hint">requests per batch</span>'
            '<input aria-describedby="nb-shapes-1-B-hint" class="nb-shapes__number" data-dim="B" id="nb-shapes-1-B" '
            'inputmode="numeric" max="16" min="1" step="1" type="number" value="2" />'
            '<input aria-hidden="true" class="nb-shapes__range" data-dim="B" max="16" min="1" step="1" '
            'tabindex="-1" type="range" value="2" /></div>') in html
    rows = [
        ("X", "BF", "inputs", "(2, 3)", "6", "yes"),
        ("W", "FC", "weights (shared)", "(3, 4)", "12", "no"),
        ("b", "C", "bias (shared)", "(4,)", "4", "no"),
        ("Z", "BC", "logits", "(2, 4)", "8", "yes"),
    ]
    for name, dims, role, shape, count, grows in rows:
        assert (f'<tr data-dims="{dims}" data-tensor="{name}">\n<th scope="row"><code>{name}</code> '
                f'<span class="nb-shapes__role">{role}</span></th>\n<td class="nb-shapes__shape">{shape}</td>\n'
                f'<td class="nb-shapes__count">{count}</td>\n<td class="nb-shapes__grows">{grows}</td>\n</tr>') in html
    assert html.endswith('<div aria-hidden="true" class="nb-shapes__grids"></div>\n'
                         '<p aria-live="polite" class="nb-shapes__summary" role="status"></p>\n</div>')


def test_shape_debugger_groups_large_counts_and_keeps_a_caption() -> None:
    html = render("/// shape-debugger\n    B: 64\n    F: 64\n    C: 64\nMove *B*.\n///")
    assert '<td class="nb-shapes__count">4,096</td>' in html and '<td class="nb-shapes__shape">(64,)</td>' in html
    assert '<div class="nb-shapes__caption">\n<p>Move <em>B</em>.</p>\n</div>' in html


def test_shape_debugger_faults(caplog: pytest.LogCaptureFixture) -> None:
    html = render("/// shape-debugger | Title\n    B: 100\n    C: 0\n    max: 64\n///")
    assert 'value="64"' in html
    assert warnings(caplog) == [
        "<markdown>:1: /// shape-debugger: option 'C': expected a whole number of at least 1, got 0",
        "<markdown>:1: /// shape-debugger: takes no title after '|' (got 'Title'); write a caption in the block",
        "<markdown>:1: /// shape-debugger: B = 100 is larger than max = 64",
    ]


# -- your turn ----------------------------------------------------------------------------------------

YOUR_TURN = """
/// your-turn | Why one `W`?
    id: shared-w
    maxlength: 300
Explain.

//// hint
First.
////

//// hint
Second.
////

//// model-answer
Model.
////
///
"""


def test_your_turn_renders_box_counter_hints_and_answer(caplog: pytest.LogCaptureFixture) -> None:
    assert render(YOUR_TURN) == (
        '<section aria-labelledby="nb-shared-w-title" class="nb-yourturn" data-nb-box="shared-w" '
        'data-nb-yourturn="" id="nb-shared-w">\n'
        '<p class="nb-yourturn__label">Your turn · not marked</p>\n'
        '<p class="nb-yourturn__title" id="nb-shared-w-title">Why one <code>W</code>?</p>\n'
        '<div class="nb-yourturn__prompt">\n<p>Explain.</p>\n</div>\n'
        '<div class="nb-yourturn__field"><label class="nb-yourturn__field-label" for="nb-shared-w-text">'
        'Your answer</label><textarea aria-describedby="nb-shared-w-note nb-shared-w-count" '
        'class="nb-yourturn__text" id="nb-shared-w-text" maxlength="300" name="shared-w" rows="5"></textarea>\n'
        '<p class="nb-yourturn__meta"><span class="nb-yourturn__note" id="nb-shared-w-note">Your draft stays in '
        'this browser; nothing is sent or marked.</span><span class="nb-yourturn__count" id="nb-shared-w-count">'
        "0 / 300 characters</span></p>\n</div>\n"
        '<div class="nb-hints" data-nb-hints="">\n<div aria-live="polite" class="nb-hints__list">\n'
        '<div class="nb-hint" data-search-exclude="" id="nb-shared-w-hint-1" tabindex="-1">\n'
        '<p class="nb-hint__title">Hint 1 of 2</p>\n'
        "<p>First.</p>\n</div>\n"
        '<div class="nb-hint" data-search-exclude="" id="nb-shared-w-hint-2" tabindex="-1">\n'
        '<p class="nb-hint__title">Hint 2 of 2</p>\n'
        "<p>Second.</p>\n</div>\n</div>\n"
        '<button aria-controls="nb-shared-w-hint-1 nb-shared-w-hint-2" class="nb-hints__next" type="button">'
        "Show hint 1 of 2</button></div>\n"
        '<details class="nb-model-answer" data-search-exclude="">\n<summary>Model answer</summary>\n'
        '<div class="nb-model-answer__body">\n<p>Model.</p>\n</div>\n</details>\n'
        "</section>"
    )
    assert warnings(caplog) == []


def test_your_turn_without_hints_numbers_its_id() -> None:
    html = render("/// your-turn | Say it.\n///\n\n/// your-turn | Again.\n///")
    assert 'id="nb-your-turn-1"' in html and 'id="nb-your-turn-2"' in html and "nb-hints" not in html


def test_a_hint_outside_your_turn_and_a_reused_id(caplog: pytest.LogCaptureFixture) -> None:
    render("Text.\n\n/// hint\nStray.\n///\n\n" + YOUR_TURN + "\n" + YOUR_TURN)
    assert warnings(caplog) == [
        "<markdown>:3: /// hint: belongs inside a /// your-turn block (open it with four slashes: ////)",
        "<markdown>:27: /// your-turn: id 'nb-shared-w' is used twice on this page; give each block its own 'id'",
    ]


# -- lesson navigation and the audit -------------------------------------------------------------------

def test_lesson_nav_marks_previous_and_next() -> None:
    html = render("""
        /// lesson-nav
        - Previous: [Lesson 4](lesson-4.md)
        - Next: [Lesson 6](lesson-6.md)
        - Prepares for: [I.4.B07](../problems/I.4.B07.md), Step 7.
        ///
    """)
    assert html == (
        '<nav aria-label="Lesson navigation" class="nb-lesson-nav">\n<ul>\n'
        '<li class="nb-lesson-nav__previous"><span class="nb-lesson-nav__kind">Previous lesson</span>'
        '<a href="lesson-4.md" rel="prev">Lesson 4</a></li>\n'
        '<li class="nb-lesson-nav__next"><span class="nb-lesson-nav__kind">Next lesson</span>'
        '<a href="lesson-6.md" rel="next">Lesson 6</a></li>\n'
        '<li class="nb-lesson-nav__prepares"><span class="nb-lesson-nav__kind">Prepares you for</span>'
        '<a href="../problems/I.4.B07.md">I.4.B07</a>, Step 7.</li>\n'
        "</ul>\n</nav>"
    )


def test_lesson_nav_faults(caplog: pytest.LogCaptureFixture) -> None:
    render("/// lesson-nav\n- Later: [x](x.md)\n///\n\n/// lesson-nav\n- Next: soon\n///")
    assert warnings(caplog) == [
        "<markdown>:1: /// lesson-nav: write a list whose items start with 'Previous:', 'Next:' or 'Prepares for:'",
        "<markdown>:5: /// lesson-nav: 'Next lesson' has no link",
    ]


def test_a_block_whose_header_is_not_yaml_is_reported(caplog: pytest.LogCaptureFixture) -> None:
    html = render("/// quiz | Q?\n    id: [unclosed\n- [x] a\n    A.\n///")
    assert "nb-quiz" not in html
    assert warnings(caplog) == ["<markdown>:1: /// quiz: 1 block(s) not recognised (a header that is not "
                                "'key: value' lines?); starts at line(s) 1"]


def test_a_measured_keys_interval_suffix_hides_its_tooltip_until_the_answer(caplog: pytest.LogCaptureFixture) -> None:
    """A measured value in an option shows its interval after it; the suffix's tooltip (the interval in words) waits
    for the answer as the claim's does: both move to data-nb-title, which components.js puts back."""
    res = CheckResult("checks/l_test.py", "ok", values={"p99_ms": 41.23}, units={"p99_ms": "ms"},
                      measured={"p99_ms": "served on this machine"},
                      uncertainty={"p99_ms": {"n": 480, "repeats": 5, "repeated": "seeds", "lo": 37.21, "hi": 45.93,
                                              "level": 0.95, "kind": "95% t interval over 5 seeds"}})
    PAGE.append((PageContext("lessons/x.md", "l_test.py", line_offset=4), Fixed(lambda name: res)))
    try:
        html = render("""
            /// quiz | The p99 TTFT at this load?
                answer: p99_ms
            - [ ] 12 ms
                That is the p50.
            - [x] [[41|p99_ms]] ms
                Over 5 seeds.
            ///
        """)
    finally:
        PAGE.pop()
    assert warnings(caplog) == []
    assert ('(ran for this build)">41</span> ms <span class="nb-ci" data-nb-title="95% t interval over 5 seeds: '
            '37.21 to 45.93 ms, n = 480">(n = 480, 5 seeds, 95% CI 37–46 ms)</span>') in html
    assert ' title="' not in html
