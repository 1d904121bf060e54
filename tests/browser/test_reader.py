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


def test_on_a_phone_a_wide_equation_fades_out_where_more_of_it_is_beyond_the_edge(browser: Any, base_url: str) -> None:
    context = browser.new_context(viewport={"width": 390, "height": 844})
    page = context.new_page()
    page.goto(base_url + "problems/I.4.B07/", wait_until="load")
    page.evaluate("() => document.querySelectorAll('details').forEach(d => { d.open = true; })")
    fades = """el => [getComputedStyle(el).maskImage, getComputedStyle(el).getPropertyValue('--nb-fade-start'),
                     getComputedStyle(el).getPropertyValue('--nb-fade-end'), el.scrollWidth > el.clientWidth]"""
    found = page.evaluate("""() => [...document.querySelectorAll('div.arithmatex')]
        .filter(el => el.scrollWidth > el.clientWidth + 20).length""")
    assert found >= 1, "I.4.B07 has display math wider than a phone"
    wide = page.locator("div.arithmatex").nth(page.evaluate("""() => [...document.querySelectorAll('div.arithmatex')]
        .findIndex(el => el.scrollWidth > el.clientWidth + 20)"""))
    mask, start, end, scrolls = wide.evaluate(fades)
    assert scrolls and "linear-gradient" in mask
    assert start == "0px" and end != "0px"          # at the start: the end fades, the start does not
    wide.evaluate("el => { el.scrollLeft = el.scrollWidth; }")
    page.wait_for_timeout(100)
    _, start, end, _ = wide.evaluate(fades)
    assert start != "0px" and end == "0px"          # scrolled to the end: the other way round
    context.close()


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


def test_a_table_of_nine_numeric_columns_fits_the_column_at_1280(tab: Any) -> None:
    page = tab.open("inference/batching/")
    wraps = page.locator(".md-typeset__scrollwrap")
    assert wraps.count() >= 4
    # every table of the page fits: nothing to scroll to on a desktop
    assert wraps.evaluate_all("els => els.filter(e => e.scrollWidth > e.clientWidth + 1).length") == 0


def test_on_a_phone_a_wide_table_scrolls_and_shows_that_it_does(browser: Any, base_url: str) -> None:
    context = browser.new_context(viewport={"width": 390, "height": 844})
    page = context.new_page()
    page.goto(base_url + "inference/batching/", wait_until="load")
    wrap = page.locator(".md-typeset__scrollwrap").first
    scrolls, shadow = wrap.evaluate("e => [e.scrollWidth > e.clientWidth, getComputedStyle(e).backgroundImage]")
    context.close()
    assert scrolls and "radial-gradient" in shadow      # the shadow at the edge with more to see


def test_on_a_phone_the_run_report_is_a_list_of_closed_folds_not_a_table(browser: Any, base_url: str) -> None:
    context = browser.new_context(viewport={"width": 390, "height": 844})
    page = context.new_page()
    page.goto(base_url + "report/", wait_until="load")
    height = page.evaluate("document.documentElement.scrollHeight")
    folds = page.locator("details.nb-check")
    n, opened = folds.count(), page.locator("details.nb-check[open]").count()
    first = folds.first
    first.locator("summary").click()
    shown = first.locator("li").first.is_visible()
    context.close()
    assert n > 50 and opened == 0 and shown
    assert height < 20_000, height    # 423,172 px when each check was a table row and its inputs a table


def test_a_printed_sentence_wraps_and_a_printed_table_row_does_not(tab: Any) -> None:
    page = tab.open("problems/I.4.B04/")
    prose = page.locator("pre.nb-output .nb-prose").first
    width, col = prose.evaluate("e => [e.getBoundingClientRect().width, e.closest('pre').clientWidth]")
    assert width <= col
    assert prose.evaluate("e => getComputedStyle(e).whiteSpace") == "pre-wrap"


def test_a_problem_offers_its_check_as_a_script_and_a_notebook_that_download(tab: Any) -> None:
    page = tab.open("problems/I.4.B07/")
    links = page.locator(".nb-run-yourself a")
    hrefs = links.evaluate_all("els => els.map(a => a.href)")   # resolved: Material's instant navigation
    assert hrefs == [tab.base_url + "problems/I.4.B07/i4_b07_logits_to_scalar.py",   # may rewrite the attribute
                     tab.base_url + "problems/I.4.B07/i4_b07_logits_to_scalar.ipynb"]
    for href in ("i4_b07_logits_to_scalar.py", "i4_b07_logits_to_scalar.ipynb"):
        response = page.request.get(tab.base_url + "problems/I.4.B07/" + href)
        assert response.status == 200
    nb = json.loads(page.request.get(tab.base_url + "problems/I.4.B07/i4_b07_logits_to_scalar.ipynb").text())
    assert any(c.get("outputs") for c in nb["cells"] if c["cell_type"] == "code")   # executed at build time


def test_a_notebook_page_sits_in_the_navigation_and_links_back_to_its_lesson(tab: Any) -> None:
    page = tab.open("lessons/notebooks/lesson-3/")
    assert page.locator(".md-nav__link--active").first.inner_text().strip().startswith("Lesson 3 notebook")
    back = page.locator(".jupyter-wrapper a", has_text="lesson 3").first
    assert back.evaluate("a => a.href") == tab.base_url + "lessons/lesson-3/"
    footer = page.locator("nav.md-footer__inner")
    assert "Lesson 2 notebook" in footer.inner_text() and "Lesson 4 notebook" in footer.inner_text()
    back.click()
    page.wait_for_url("**/lessons/lesson-3/")


def test_the_404_page_is_styled_where_the_site_is_served(tab: Any) -> None:
    page = tab.page
    response = page.goto(tab.base_url + "no/such/page/", wait_until="load")
    assert response is not None and response.status == 404
    # the stylesheet loaded: Material's header is laid out, not an unstyled list
    assert page.locator("header.md-header").evaluate("e => getComputedStyle(e).position") == "sticky"


def test_a_problem_page_moves_under_a_megabyte_and_loads_no_mathjax(browser: Any, base_url: str) -> None:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    sizes: dict[str, int] = {}
    page.on("response", lambda r: sizes.__setitem__(r.url, len(r.body())) if r.ok else None)
    page.goto(base_url + "problems/I.4.B07/", wait_until="networkidle")
    context.close()
    total = sum(sizes.values())
    assert total < 1_000_000, f"I.4.B07 moved {total:,} bytes: {sorted(sizes.items(), key=lambda kv: -kv[1])[:4]}"
    assert not any(("mathjax" in url.lower() and url.endswith(".js")) or "search_index.json" in url for url in sizes)


def test_the_math_shows_with_javascript_off(browser: Any, base_url: str) -> None:
    context = browser.new_context(viewport={"width": 1280, "height": 900}, java_script_enabled=False)
    page = context.new_page()
    page.goto(base_url + "problems/I.4.B07/", wait_until="load")
    drawn = page.evaluate("""() => [...document.querySelectorAll('span.arithmatex svg, div.arithmatex svg')]
        .filter(svg => svg.getBoundingClientRect().width > 4 && svg.querySelector('use')).length""")
    total = page.locator(".arithmatex").count()
    context.close()
    assert total > 50 and drawn == total
