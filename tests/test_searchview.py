"""The page as the search index reads it: math as text, hidden folds as entries that say so, no code cells."""

from __future__ import annotations

from typing import Any

from material.plugins.search.plugin import SearchIndex

from numbook.mkdocs.searchview import hidden_prefix, search_view


class _Page:
    """What the theme's search index reads of a page."""

    def __init__(self, content: str) -> None:
        self.content, self.meta, self.title, self.url = content, {}, "Page", "p/"
        self.toc: list[Any] = []


def entries(html: str, **kw: bool) -> list[dict[str, str]]:
    """The search index's entries for ``html`` as the theme's own search plugin makes them, from the view."""
    index = SearchIndex(lang=["en"], separator="", pipeline=[], fields={})
    index.add_entry_from_context(_Page(search_view(html, **kw)))
    return [{k: e[k] for k in ("location", "title", "text")} for e in index.entries]


PROBLEM = """<h1 id="b07">B07</h1><p>Intro.</p>
<h2 id="solution">Solution</h2><details class="nb-reveal"><summary><span class="nb-show">Show the solution</span>\
<span class="nb-hide">Hide the solution</span></summary><p>The mean is <span class="arithmatex">\\(\\class{nb-claim}\
{\\cssId{nb-m-3}{31{,}999}}\\)</span> tokens.</p></details>
<h2 id="variation">Variation</h2><p>Try it with twice the batch.</p>
<details class="success"><summary>Variation answers</summary><p>It doubles.</p></details>
<p>After the fold.</p>
<details class="note" open><summary>Shown</summary><p>Open text.</p></details>
"""


def test_hidden_folds_are_entries_that_say_where_they_are_hidden_and_math_is_text() -> None:
    got = entries(PROBLEM)
    assert got == [
        {"location": "p/", "title": "B07", "text": "<p>Intro.</p>"},
        {"location": "p/#solution", "title": "Solution",
         "text": "<p>(hidden under “Show the solution”)</p> <p>The mean is 31,999 tokens.</p>"},
        {"location": "p/#variation", "title": "Variation",
         "text": "<p>Try it with twice the batch.</p> <p>After the fold.</p> Shown<p>Open text.</p>"},
        {"location": "p/#variation", "title": "Variation",
         "text": "<p>(hidden under “Variation answers”)</p> <p>It doubles.</p>"},
    ]
    assert not any("\\" in e["text"] for e in got)


def test_notebook_code_cells_and_the_run_reports_tables_are_left_out() -> None:
    nb = ('<h1 id="n">Notebook</h1><div class="jp-Cell jp-MarkdownCell"><p>Prose.</p></div>'
          '<div class="jp-Cell jp-CodeCell jp-Notebook-cell"><div class="jp-InputPrompt">In [1]:</div>'
          '<div><pre>import torch</pre></div></div><p>After.</p>')
    assert [e["text"] for e in entries(nb)] == ["<p>Prose.</p><p>After.</p>"]
    report = ('<h1 id="r">Run report</h1><p>69 checks.</p><details class="nb-check"><summary>a.py · ok</summary>'
              '<p>device</p></details><table><tr><td>TTFT</td></tr></table>')
    assert [e["text"] for e in entries(report, report=True)] == ["<p>69 checks.</p>"]
    assert "TTFT" not in search_view(report, report=True)


def test_the_prefix_names_the_control_to_open() -> None:
    assert hidden_prefix('<span class="nb-show">Show the answer</span><span class="nb-hide">Hide</span>') \
        == "(hidden under “Show the answer”)"
    assert hidden_prefix("<b>Variation</b> answers") == "(hidden under “Variation answers”)"
    assert hidden_prefix("") == "(hidden under “Details”)"


def test_a_heading_inside_a_hidden_fold_starts_an_entry_that_says_it_is_hidden_and_excluded_folds_stay_out() -> None:
    page = ('<h2 id="solution">Solution</h2><details class="nb-reveal"><summary><span class="nb-show">Show the '
            'solution</span></summary><p>First.</p><h3 id="step-2">Step 2</h3><p>Second.</p></details>'
            '<h2 id="turn">Your turn</h2><details class="nb-model-answer" data-search-exclude=""><summary>Model '
            'answer</summary><h3 id="x">X</h3><p>Kept out.</p></details>')
    got = [(e["title"], e["text"]) for e in entries(page)]
    assert got == [
        ("Page", ""),
        ("Solution", "<p>(hidden under “Show the solution”)</p> <p>First.</p>"),
        ("Step 2", "<p>(hidden under “Show the solution”)</p> <p>Second.</p>"),
        ("Your turn", ""),
    ]


def test_a_marked_element_is_left_out_whole_even_with_its_own_tag_inside() -> None:
    page = ('<h1 id="a">A</h1><div class="nb-quiz__why" data-search-exclude=""><div><p>Inner.</p></div>'
            '<p>Still the explanation.</p></div><p>Prose.</p>')
    assert [e["text"] for e in entries(page)] == ["<p>Prose.</p>"]


FIXED = """<h1 id="a01">I.1.A01 · Table 1</h1>
<h2 id="statement">Statement<a class="headerlink" href="#statement">¶</a></h2><p>How large is the table?</p>
<h2 id="given">Given<a class="headerlink" href="#given">¶</a></h2><p>V = 1,007 tokens.</p>
<h2 id="find">Find</h2><p>The count.</p>
<h2 id="strategy">Strategy</h2><p>Multiply.</p>
<h2 id="step-1">Step 1 — the count</h2><p>Multiply the axes.</p>
<table><thead><tr><th>table</th><th>MB</th></tr></thead><tbody><tr><td>this one</td><td>0.4</td></tr></tbody></table>
<h2 id="check-numeric">Check — numeric</h2>
<h2 id="check-sanity">Check — sanity</h2><ul><li>Bytes are four an element.</li></ul>
<h2 id="where-this-breaks">Where this breaks</h2><p>Tied tables.</p>
<h2 id="variation">Variation</h2><p>Double d.</p>
<h2 id="draws-on">Draws on</h2><ul><li>I.1.A00</li></ul>
<h2 id="used-by">Used by</h2><ul><li>I.1.A02</li></ul>
"""


def test_a_problem_pages_fixed_sections_are_read_with_the_one_before_and_tables_are_left_out() -> None:
    got = entries(FIXED, problem=True)
    assert [(e["location"], e["title"]) for e in got] == [
        ("p/", "I.1.A01 · Table 1"), ("p/#statement", "Statement"), ("p/#step-1", "Step 1 — the count"),
        ("p/#check-numeric", "Check — numeric"), ("p/#where-this-breaks", "Where this breaks"),
        ("p/#variation", "Variation")]
    text = {e["title"]: e["text"] for e in got}
    assert text["Statement"] == ("<p>How large is the table?</p> <p>Given</p><p>V = 1,007 tokens.</p> "
                                 "<p>Find</p><p>The count.</p> <p>Strategy</p><p>Multiply.</p>")
    assert text["Check — numeric"] == "<p>Check — sanity</p><ul><li>Bytes are four an element.</li></ul>"
    assert text["Variation"] == ("<p>Double d.</p> <p>Draws on</p><ul><li>I.1.A00</li></ul> "
                                 "<p>Used by</p><ul><li>I.1.A02</li></ul>")
    assert text["Step 1 — the count"] == "<p>Multiply the axes.</p>"      # the table is not in the index
    assert "0.4" not in search_view(FIXED, problem=True)


def test_another_page_keeps_every_section_its_own_entry() -> None:
    titles = [e["title"] for e in entries(FIXED)]
    assert titles[:4] == ["I.1.A01 · Table 1", "Statement", "Given", "Find"] and len(titles) == 12
