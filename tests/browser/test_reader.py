"""The reader's side in a real browser: provenance on every number, search that finds prose, solutions at body size."""

from __future__ import annotations

import json
from typing import Any

import pytest

pytestmark = pytest.mark.browser


def test_a_prose_claim_shows_its_provenance_on_keyboard_focus(tab: Any) -> None:
    page = tab.open("problems/I.4.B07/")
    claim = page.locator(".nb-claim[title]:visible").first
    claim.focus()
    tip = page.locator("#nb-tip")
    tip.wait_for(state="visible")
    text = tip.inner_text()
    assert "computed by checks/i4_b07_logits_to_scalar.py" in text and "cpu: " in text and " UTC" in text
    page.keyboard.press("Escape")
    tip.wait_for(state="hidden")


def test_a_math_claim_takes_focus_and_shows_its_provenance(tab: Any) -> None:
    page = tab.open("problems/I.4.B07/")
    page.wait_for_function("() => document.querySelector('.nb-math-claim') !== null")
    entries = json.loads(page.locator("script.nb-claims").first.text_content() or "[]")
    assert entries, "the page carries an index of its math claims"
    first = page.locator(f"#{entries[0]['id']}")
    assert first.get_attribute("tabindex") == "0"
    first.focus()
    page.locator("#nb-tip").wait_for(state="visible")
    assert entries[0]["tip"] == page.locator("#nb-tip").inner_text()


def test_the_page_says_once_how_to_read_the_marks(tab: Any) -> None:
    page = tab.open("problems/I.4.B07/")
    assert page.locator(".nb-legend").count() == 1


def test_the_browser_tab_names_the_problem_by_its_id(tab: Any) -> None:
    page = tab.open("problems/I.4.B07/")
    assert page.title().startswith("I.4.B07 · From a logit tensor to one scalar")


def test_the_solution_reads_at_body_size_and_its_toggle_says_hide_when_open(tab: Any) -> None:
    page = tab.open("problems/I.4.B07/")
    statement = page.locator("h2#statement + p")
    reveal = page.locator("details.nb-reveal").first
    summary = reveal.locator("summary")
    assert summary.inner_text().strip() == "Show the solution"
    summary.click()
    assert summary.inner_text().strip() == "Hide the solution"
    size = "el => getComputedStyle(el).fontSize"
    assert reveal.locator("p").first.evaluate(size) == statement.evaluate(size)


def test_check_output_that_is_wider_than_the_column_scrolls_and_shows_it(tab: Any) -> None:
    page = tab.open("problems/I.4.B07/")
    out = page.locator("pre.nb-output").first
    style = out.evaluate("el => [getComputedStyle(el).overflowX, getComputedStyle(el).backgroundImage]")
    assert style[0] == "auto" and "gradient" in style[1]


def test_search_leaves_out_check_output_and_hidden_explanations(tab: Any, site_dir: Any) -> None:
    index = json.loads((site_dir / "search" / "search_index.json").read_text(encoding="utf-8"))
    page = " ".join(doc.get("text", "") for doc in index["docs"] if doc["location"].startswith("problems/I.4.B07"))
    assert "Shape trace" not in page                  # a line of I.4.B07's printed output
    assert "from numbook.check import" not in page    # its check's source
    assert "OutputSource" not in page
    assert "cross_entropy" in page                    # the prose still is
    lessons = " ".join(doc.get("text", "") for doc in index["docs"] if doc["location"].startswith("lessons/lesson-5"))
    assert "own shape" not in lessons and "Batches" in lessons   # a quick check's explanation stays hidden


def test_a_lesson_names_previous_and_next_once(tab: Any) -> None:
    page = tab.open("lessons/lesson-2/")
    assert page.locator(".nb-lesson-nav, [class*='lesson-nav']").count() >= 1
    assert page.locator("nav.md-footer__inner").is_hidden()
