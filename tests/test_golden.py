"""Golden Markdown-in / HTML-out pairs: ``tests/golden/<case>.md`` renders to ``<case>.html``.

Each ``.html`` holds the rendered page, then the page's diagnostics after a
``<!-- diagnostics -->`` line. Regenerate them after an intended change with
``pytest tests/test_golden.py --update-golden`` (as pymdown-extensions' ``--update``), and
read the diff before committing it. A case whose first line is ``<!-- problem -->`` is
rendered as a problem page.
"""

from __future__ import annotations

import logging
from pathlib import Path

import markdown
import pytest

from _results import Fixed
from numbook.core.diagnostics import Reporter
from numbook.core.verify import PageContext
from numbook.html.extension import NumbookExtension
from numbook.html.session import Session
from numbook.run.runner import CheckResult

GOLDEN = Path(__file__).parent / "golden"
CASES = sorted(p.stem for p in GOLDEN.glob("*.md"))
RESULT = CheckResult(
    "checks/demo.py", "ok", device="cpu: x86_64", ran_at="2026-12-02 12:00 UTC",
    inputs={"B": 4},
    values={"fp32_mb": 262.144, "fp32_mib": 250.0, "numel": 65_536_000, "ratio": 0.17634,
            "shape": [4, 512, 32000], "boosts": [6.0, 7.5], "small": 0.5, "speedup": 3.2, "xw_shape": [4, 5]},
    sanity={"half": {"ok": True, "message": "bf16 is half of fp32"}},
    lines={"fp32_mb": 7, "half": 12},
)


def convert(case: str) -> str:
    text = (GOLDEN / f"{case}.md").read_text(encoding="utf-8")
    problem = text.startswith("<!-- problem -->")
    ctx = PageContext(f"tests/golden/{case}.md", "demo.py", problem=problem, scan_numbers=True)
    session = Session(Reporter(level=logging.DEBUG), default=ctx, results=Fixed(lambda name: RESULT))
    md = markdown.Markdown(extensions=[NumbookExtension(session=session), "numbook.components", "tables",
                                       "pymdownx.superfences", "pymdownx.arithmatex", "md_in_html"],
                           extension_configs={"pymdownx.arithmatex": {"generic": True}})
    html = md.convert(text)
    faults = "\n".join(str(d) for d in session.reporter.faults)
    return f"{html}\n<!-- diagnostics -->\n{faults}\n"


@pytest.mark.parametrize("case", CASES)
def test_golden(case: str, request: pytest.FixtureRequest) -> None:
    out = GOLDEN / f"{case}.html"
    got = convert(case)
    if request.config.getoption("--update-golden"):
        out.write_text(got, encoding="utf-8")
    assert out.is_file(), f"no golden output for {case}: run pytest --update-golden"
    assert got == out.read_text(encoding="utf-8")


def test_check_output_keeps_table_rows_and_lets_sentences_wrap() -> None:
    from numbook.html.extension import _output

    out = CheckResult("checks/demo.py", "ok", ran_at="2026-12-02 12:00 UTC", stdout=(
        "  dtype          max       ln(max)\n"
        "  fp32     3.403e+38       88.7228\n"
        "bisection on the naive fp16 loss: finite at s = 10.4140625, not finite from s = 10.421875\n"
        "B=1  tok/s |########  | 353\n"))
    html = _output(out)
    assert html.startswith(
        '<pre class="nb-output"><code>  dtype          max       ln(max)\n  fp32     3.403e+38       88.7228\n'
        '<span class="nb-prose">bisection on the naive fp16 loss: finite at s = 10.4140625, not finite from '
        's = 10.421875</span>\nB=1  tok/s |########  | 353</code></pre>')
