"""Math drawn at build time: TeX in, SVG out, with the provenance of math claims and names for screen readers."""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from numbook.html.mathrender import MathError, MathRenderer, NodeMissing, equations, render_page

ROOT = Path(__file__).resolve().parents[1]

if shutil.which("node") is None:
    if os.environ.get("CI") == "true":
        raise RuntimeError("CI must test the math renderer: install Node.js (apt-get install -y nodejs)")
    pytest.skip("Node.js is not installed: the math renderer needs it", allow_module_level=True)

CLAIMS = [{"id": "nb-mc-1-2", "shown": "32{,}000", "tip": "V = 32000 · computed by checks/x.py, line 3"}]
PAGE = (
    '<html><body><article class="md-content__inner md-typeset">'
    '<p>Vocabulary <span class="arithmatex">\\(|V| = \\class{nb-claim}{\\cssId{nb-mc-1-2}{32{,}000}}\\)</span>'
    ' and <span class="arithmatex">\\(3.05 \\times 10^{-5} &lt; 1\\)</span>.</p>'
    '<div class="arithmatex">\\[\\frac{a}{b}\\]</div>'
    f'<script type="application/json" class="nb-claims">{json.dumps(CLAIMS)}</script>'
    "</article></body></html>"
)


@pytest.fixture(scope="module")
def renderer() -> Iterator[MathRenderer]:
    r = MathRenderer()
    yield r
    r.close()


def test_the_tex_of_each_equation_is_read_unescaped_with_its_kind() -> None:
    assert equations(PAGE) == [
        ("|V| = \\class{nb-claim}{\\cssId{nb-mc-1-2}{32{,}000}}", False),
        ("3.05 \\times 10^{-5} < 1", False),
        ("\\frac{a}{b}", True),
    ]


def test_every_equation_becomes_svg_and_no_tex_is_left(renderer: MathRenderer) -> None:
    out, n = render_page(PAGE, renderer)
    assert n == 3
    assert out.count("<mjx-container") == 3 and out.count('display="true"') == 1
    assert "\\(" not in out and "\\[" not in out and "\\frac" not in out
    # the glyphs once, hidden, at the top of the article (inside what instant navigation swaps)
    assert re.search(r'<article class="md-content__inner md-typeset"><svg id="MJX-SVG-global-cache" '
                     r'style="display: none" aria-hidden="true"', out)
    used = set(re.findall(r'xlink:href="#(MJX-[^"]+)"', out))
    drawn = set(re.findall(r'<path id="(MJX-[^"]+)"', out))
    assert used and used <= drawn


def test_a_math_claim_is_a_focus_stop_with_its_hint_and_a_label_without_tex(renderer: MathRenderer) -> None:
    out, _ = render_page(PAGE, renderer)
    g = re.search(r'<g [^>]*id="nb-mc-1-2"[^>]*>', out)
    assert g is not None
    tag = g.group(0)
    assert 'tabindex="0"' in tag and 'role="note"' in tag and 'class="nb-claim nb-math-claim"' in tag
    assert f'data-nb-tip="{CLAIMS[0]["tip"]}"' in tag
    assert 'aria-label="32,000: V = 32000 · computed by checks/x.py, line 3"' in tag
    assert out[g.end():].startswith(f"<title>{CLAIMS[0]['tip']}</title>")   # hover shows the hint


def test_an_equation_is_named_by_its_spoken_text_and_holds_its_claims_as_a_group(renderer: MathRenderer) -> None:
    out, _ = render_page(PAGE, renderer)
    svgs = re.findall(r"<svg [^>]*>", out)[1:]   # the first is the hidden glyph cache
    assert len(svgs) == 3
    # an image's children are presentational: an equation with a focus stop inside is a group
    assert 'role="group"' in svgs[0] and 'role="img"' in svgs[1] and 'role="img"' in svgs[2]
    for head in svgs:
        label = re.search(r'aria-label="([^"]*)"', head)
        assert label is not None and label.group(1).strip()
        assert not re.search(r"[\\{}]", label.group(1)), label.group(1)
        assert "aria-hidden" not in head


def test_tex_mathjax_cannot_read_is_an_error_naming_the_equation(renderer: MathRenderer) -> None:
    with pytest.raises(MathError) as err:
        render_page('<p><span class="arithmatex">\\(\\frac{a}{\\)</span></p>', renderer)
    assert str(err.value) == "math that MathJax cannot read (Missing close brace): '\\\\frac{a}{'"
    with pytest.raises(MathError) as err:   # an unknown command is an error, not red text on the page
        render_page('<p><span class="arithmatex">\\(\\tims 2\\)</span></p>', renderer)
    assert "Undefined control sequence \\tims" in str(err.value)
    # and the renderer goes on with the next page
    assert render_page('<p><span class="arithmatex">\\(x\\)</span></p>', renderer)[1] == 1


def test_a_page_without_math_is_left_as_it_is(renderer: MathRenderer) -> None:
    assert render_page("<p>No math, $5 only.</p>", renderer) == ("<p>No math, $5 only.</p>", 0)


def test_pages_are_kept_between_builds_by_their_equations(tmp_path: Path) -> None:
    first = MathRenderer(cache_dir=tmp_path)
    out, _ = render_page(PAGE, first)
    first.close()
    again = MathRenderer(node="/nonexistent/node", cache_dir=tmp_path)   # starting Node would fail
    assert render_page(PAGE, again)[0] == out
    with pytest.raises(NodeMissing):
        render_page(PAGE.replace("\\frac{a}{b}", "\\frac{a}{c}"), again)   # another page: Node is needed


def test_the_sites_mathjax_stylesheet_is_the_renderers(renderer: MathRenderer) -> None:
    renderer.render([("x", False)])
    css = (ROOT / "docs/assets/numbook/mathjax.css").read_text(encoding="utf-8")
    assert css.split("*/\n", 1)[1].strip() == renderer.css.strip()


def test_without_node_the_build_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.delenv("NUMBOOK_NODE", raising=False)
    with pytest.raises(NodeMissing, match=r"install it \(Debian: apt-get install -y nodejs\)"):
        MathRenderer().render([("x", False)])
