"""The lessons in a real browser: quick checks, the shape debugger, drafts, hints, instant navigation."""

from __future__ import annotations

from typing import Any

import pytest

pytestmark = pytest.mark.browser

LESSONS = [f"lessons/lesson-{n}/" for n in range(1, 7)]


def text(page: Any, selector: str) -> str:
    return " ".join(page.locator(selector).inner_text().split())


# -- quick check ---------------------------------------------------------------------------------------

def test_a_wrong_then_a_right_answer_give_feedback_with_the_explanation(tab: Any) -> None:
    page = tab.open("lessons/lesson-5/")
    quiz = page.locator("#nb-l5-batch-shape")
    assert quiz.locator(".nb-quiz__why").first.is_hidden()
    assert quiz.locator(".nb-quiz__feedback").is_hidden()

    wrong = quiz.get_by_role("button", name="(3, 5)")
    wrong.click()
    feedback = quiz.locator(".nb-quiz__feedback")
    feedback.get_by_text("Not quite.").wait_for()
    assert text(page, "#nb-l5-batch-shape .nb-quiz__feedback") == (
        "Not quite. That is W's own shape. The product keeps X's batch axis: one output row per request.")
    assert feedback.get_attribute("role") == "status"
    assert wrong.get_attribute("aria-pressed") == "true"
    assert "is-wrong" in (quiz.locator(".nb-quiz__option").nth(0).get_attribute("class") or "")

    right = quiz.get_by_role("button", name="(8, 5)")
    right.focus()
    page.keyboard.press("Enter")  # the keyboard works as well as the mouse
    feedback.get_by_text("Correct.").wait_for()
    assert text(page, "#nb-l5-batch-shape .nb-quiz__feedback") == (
        "Correct. Eight requests, five class scores each; the three features are summed away.")
    assert wrong.get_attribute("aria-pressed") == "false" and right.get_attribute("aria-pressed") == "true"
    assert "(right answer)" in right.inner_text() and "(not right)" in wrong.inner_text()


def test_two_quick_picks_leave_the_feedback_of_the_last(tab: Any) -> None:
    page = tab.open("lessons/lesson-2/")
    page.evaluate("""() => {
        const buttons = document.querySelectorAll("#nb-l2-product-shape .nb-quiz__choice");
        buttons[0].click();
        buttons[1].click();
    }""")
    feedback = page.locator("#nb-l2-product-shape .nb-quiz__feedback")
    feedback.get_by_text("Correct.").wait_for()
    page.wait_for_timeout(200)
    assert text(page, "#nb-l2-product-shape .nb-quiz__feedback") == (
        "Correct. One row for each row of A, one column for each column of B.")


def test_the_keys_claim_tooltip_appears_only_once_the_key_is_found(tab: Any) -> None:
    page = tab.open("lessons/lesson-5/")
    claim = page.locator("#nb-l5-batch-shape .nb-quiz__choice .nb-claim")
    assert claim.get_attribute("title") is None
    assert "z8_shape = (8, 5)" in (claim.get_attribute("data-nb-title") or "")
    page.locator("#nb-l5-batch-shape").get_by_role("button", name="(8, 5)").click()
    assert "z8_shape = (8, 5)" in (claim.get_attribute("title") or "")


# -- shape debugger -----------------------------------------------------------------------------------

def shapes(page: Any) -> dict[str, tuple[str, str]]:
    rows = page.locator("#nb-l5-shapes tbody tr")
    return {rows.nth(i).get_attribute("data-tensor"): (
        rows.nth(i).locator(".nb-shapes__shape").inner_text(), rows.nth(i).locator(".nb-shapes__count").inner_text())
        for i in range(rows.count())}


def test_the_batch_grows_x_and_z_but_not_w_and_b(tab: Any) -> None:
    page = tab.open("lessons/lesson-5/")
    assert shapes(page) == {"X": ("(4, 3)", "12"), "W": ("(3, 5)", "15"), "b": ("(5,)", "5"), "Z": ("(4, 5)", "20")}

    page.get_by_label("Batch size, B").fill("8")
    assert shapes(page) == {"X": ("(8, 3)", "24"), "W": ("(3, 5)", "15"), "b": ("(5,)", "5"), "Z": ("(8, 5)", "40")}
    assert text(page, "#nb-l5-shapes .nb-shapes__summary") == (
        "B went from 4 to 8. Changed: X (8, 3), 24 elements and Z (8, 5), 40 elements. "
        "Unchanged: W (3, 5), 15 elements and b (5,), 5 elements.")
    changed = page.locator("#nb-l5-shapes tr.is-changed")
    assert [changed.nth(i).get_attribute("data-tensor") for i in range(changed.count())] == ["X", "Z"]
    assert page.locator("#nb-l5-shapes .nb-shapes__range[data-dim=B]").input_value() == "8"
    assert page.locator("#nb-l5-shapes .nb-shapes__grid").nth(3).locator(".nb-shapes__cells > span").count() == 40

    page.get_by_label("Output classes, C").focus()
    page.keyboard.press("ArrowUp")  # a number field steps with the arrow keys
    assert shapes(page) == {"X": ("(8, 3)", "24"), "W": ("(3, 6)", "18"), "b": ("(6,)", "6"), "Z": ("(8, 6)", "48")}
    assert text(page, "#nb-l5-shapes .nb-shapes__summary").startswith("C went from 5 to 6. Changed: W (3, 6)")


def test_the_slider_and_out_of_range_values(tab: Any) -> None:
    page = tab.open("lessons/lesson-5/")
    page.locator("#nb-l5-shapes .nb-shapes__range[data-dim=B]").fill("64")
    assert shapes(page)["Z"] == ("(64, 5)", "320")
    assert page.get_by_label("Batch size, B").input_value() == "64"
    assert "(first 16 shown)" in page.locator("#nb-l5-shapes .nb-shapes__grid").nth(0).inner_text()

    number = page.get_by_label("Input features, F")
    number.fill("500")
    assert shapes(page)["W"] == ("(64, 5)", "320") and number.input_value() == "64"
    number.fill("")
    number.dispatch_event("change")  # an empty field goes back to the last good size
    assert number.input_value() == "64"


# -- your turn ----------------------------------------------------------------------------------------

def test_a_draft_survives_a_reload_and_belongs_to_its_page(tab: Any) -> None:
    page = tab.open("lessons/lesson-5/")
    box = page.get_by_label("Your explanation")
    counter = page.locator("#nb-l5-shared-weights-count")
    assert counter.inner_text() == "0 / 800 characters"
    box.fill("Each row is one request's five scores.")
    assert counter.inner_text() == "38 / 800 characters"

    page.reload(wait_until="load")
    page.wait_for_function("() => window.numbookComponents !== undefined")
    assert page.get_by_label("Your explanation").input_value() == "Each row is one request's five scores."
    assert counter.inner_text() == "38 / 800 characters"

    other = tab.open("lessons/lesson-1/")
    assert other.get_by_label("Your description").input_value() == ""


def test_the_counter_stops_at_the_limit(tab: Any) -> None:
    page = tab.open("lessons/lesson-5/")
    box = page.get_by_label("Your explanation")
    assert box.get_attribute("maxlength") == "800"
    box.fill("x" * 799)
    box.press("End")
    page.keyboard.type("yz")
    assert len(box.input_value()) == 800
    counter = page.locator("#nb-l5-shared-weights-count")
    assert counter.inner_text() == "800 / 800 characters" and "is-full" in (counter.get_attribute("class") or "")


def test_hints_open_one_at_a_time_in_order(tab: Any) -> None:
    page = tab.open("lessons/lesson-5/")
    box = page.locator("#nb-l5-shared-weights")
    hints = box.locator(".nb-hint")
    button = box.locator(".nb-hints__next")
    assert [hints.nth(i).is_visible() for i in range(3)] == [False, False, False]
    for n in (1, 2, 3):
        assert button.inner_text() == f"Show hint {n} of 3"
        button.click()
        assert [hints.nth(i).is_visible() for i in range(3)] == [i < n for i in range(3)]
        assert hints.nth(n - 1).locator(".nb-hint__title").inner_text() == f"Hint {n} of 3"
    assert button.is_hidden()
    assert page.evaluate("document.activeElement.id") == "nb-l5-shared-weights-hint-3"

    answer = box.locator("details.nb-model-answer")
    assert answer.get_attribute("open") is None and not answer.locator(".nb-model-answer__body").is_visible()
    answer.locator("summary").click()
    assert answer.locator(".nb-model-answer__body").is_visible()


# -- instant navigation and every page -----------------------------------------------------------------

def test_next_lesson_with_instant_navigation_initialises_the_new_page(tab: Any) -> None:
    page = tab.open("lessons/lesson-4/")
    page.wait_for_load_state("networkidle")  # instant navigation starts once the sitemap is in
    page.evaluate("window.__samePage = true")
    page.locator("nav.nb-lesson-nav a[rel=next]").click()
    page.wait_for_url("**/lessons/lesson-5/")
    page.locator("#nb-l5-shapes .nb-shapes__grid").first.wait_for()
    assert page.evaluate("window.__samePage") is True  # no full reload: Material swapped the content
    assert page.locator("h1").inner_text().startswith("Batches: many requests, one model")
    assert page.locator(".nb-quiz.is-ready").count() == page.locator(".nb-quiz").count() == 5

    page.get_by_label("Batch size, B").fill("2")
    assert shapes(page)["Z"] == ("(2, 5)", "10")
    page.get_by_label("Your explanation").fill("draft on lesson 5")
    page.locator("#nb-l5-bug-sum").get_by_role("button", name="The size of each update: it doubles too").click()
    page.locator("#nb-l5-bug-sum .nb-quiz__feedback").get_by_text("Correct.").wait_for()
    assert text(page, "#nb-l5-bug-sum .nb-quiz__feedback").startswith("Correct. A sum has one term")

    page.locator("nav.nb-lesson-nav a[rel=next]").click()
    page.wait_for_url("**/lessons/lesson-6/")
    page.locator("#nb-l6-labels .nb-hints__next").wait_for()
    assert page.evaluate("window.__samePage") is True
    page.locator("nav.nb-lesson-nav a[rel=prev]").click()
    page.wait_for_url("**/lessons/lesson-5/")
    page.locator("#nb-l5-shapes .nb-shapes__grid").first.wait_for()
    assert page.get_by_label("Your explanation").input_value() == "draft on lesson 5"
    assert page.locator("[data-nb-ready]").count() == page.locator(
        "[data-nb-quiz], [data-nb-shapes], [data-nb-yourturn]").count()


@pytest.mark.parametrize("path", ["lessons/", *LESSONS, *[f"lessons/notebooks/lesson-{n}/" for n in range(1, 7)]])
def test_every_lesson_page_loads_without_errors_or_remote_requests(tab: Any, path: str) -> None:
    page = tab.open(path)
    page.wait_for_load_state("networkidle")
    components = page.locator("[data-nb-quiz], [data-nb-shapes], [data-nb-yourturn]")
    assert page.locator("[data-nb-ready]").count() == components.count()
    if path in LESSONS:
        n = LESSONS.index(path) + 1
        assert (page.locator(".nb-lesson-eyebrow").text_content() or "").startswith(f"Lesson {n} of 6")
        assert page.locator(".nb-lesson-nav__prepares a[href*='problems/I.4.B']").count() >= 1
        prev, nxt = page.locator("nav.nb-lesson-nav a[rel=prev]"), page.locator("nav.nb-lesson-nav a[rel=next]")
        assert prev.count() == (n > 1) and nxt.count() == (n < 6)
        if n > 1:
            assert (prev.get_attribute("href") or "").endswith(f"lesson-{n - 1}/")
        assert page.locator(".nb-quiz").count() >= 2 and page.locator(".nb-yourturn").count() == 1
        assert page.locator(".nb-claim-bad").count() == 0


def test_a_notebook_is_executed_and_offered_for_download(tab: Any) -> None:
    page = tab.open("lessons/notebooks/lesson-1/")
    assert "65,536,000 elements" in page.locator(".jupyter-wrapper").inner_text()
    link = page.get_by_role("link", name="lesson-1.ipynb")
    response = page.request.get(link.evaluate("a => a.href"))
    assert response.ok and '"cells"' in response.text()
