"""What the Markdown extension writes for assistive technology: Markdown in, HTML out."""

from __future__ import annotations

import textwrap

import markdown


def render(src: str) -> str:
    return markdown.Markdown(extensions=["numbook", "tables"]).convert(textwrap.dedent(src).strip("\n"))


def test_a_tables_empty_corner_is_no_column_header_and_the_named_headers_stay() -> None:
    html = render("""
        | | p50 | `p99` |
        |---|---|---|
        | TTFT | 1 | 2 |
    """)
    head = html.split("<tbody>")[0]
    assert "<td></td>" in head and "<th></th>" not in head
    assert "<th>p50</th>" in head and "<th><code>p99</code></th>" in head
    assert html.count("<th>") == 2


def test_a_table_without_an_empty_header_is_left_as_it_is() -> None:
    src = """
        | name | value |
        |---|---|
        |  | 2 |
    """
    html = render(src)
    assert html == markdown.Markdown(extensions=["tables"]).convert(textwrap.dedent(src).strip("\n"))
    assert "<td></td>" in html     # an empty body cell is a td already
