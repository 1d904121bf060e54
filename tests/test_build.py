"""One tiny book built for real with `mkdocs build --strict`, and broken copies of it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # real builds: the unit loop (-m "not slow and not browser") skips them

TINY = Path(__file__).parent / "fixtures" / "tiny"
A01 = "problems/I.1.A01.md"
CHECK = "checks/i1_a01_embedding.py"


def copy_tiny(tmp_path: Path) -> Path:
    root = tmp_path / "tiny"
    shutil.copytree(TINY, root)
    return root


def build(root: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1")
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(root / "site")],
                           cwd=root, capture_output=True, text=True, env=env, timeout=300, check=False)


def verify(root: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "numbook.cli", "verify"], cwd=root, capture_output=True,
                          text=True, timeout=300, check=False)


def edit(root: Path, rel: str, old: str, new: str) -> None:
    path = root / rel
    text = path.read_text(encoding="utf-8")
    assert old in text, f"{old!r} not in {rel}"
    path.write_text(text.replace(old, new, 1), encoding="utf-8")


def warnings(proc: subprocess.CompletedProcess[str]) -> list[str]:
    return [ln.split("-  ", 1)[1] for ln in proc.stderr.splitlines() if ln.startswith("WARNING")]


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = copy_tiny(tmp_path_factory.mktemp("clean"))
    proc = build(root)
    assert proc.returncode == 0, proc.stderr
    return root / "site"


def test_clean_book_builds_strict(built: Path) -> None:
    page = (built / "problems/I.1.A01/index.html").read_text(encoding="utf-8")
    assert "I.1.A01 · The memory of an embedding table</h1>" in page
    assert 'data-claim="fp32_mb"' in page and 'tabindex="0">65.5</span> MB' in page
    assert "table (32000, 512): 16,384,000 elements, 65,536,000 bytes in fp32" in page   # the printed output
    assert 'class="nb-stamp"' in page and "ran for this build" in page
    assert 'class="nb-sanity"' in page
    assert 'href="../I.1.A02/">I.1.A02 · Two tables</a>' in page                           # Used by


def test_math_is_drawn_at_build_time_and_reads_without_scripts(built: Path) -> None:
    page = (built / "problems/I.1.A01/index.html").read_text(encoding="utf-8")
    assert '<span class="arithmatex"><mjx-container class="MathJax" jax="SVG"><svg ' in page
    assert 'role="img" aria-label="the size of V"' in page   # $|V|$, named in words
    assert '<svg id="MJX-SVG-global-cache" style="display: none"' in page and "\\(" not in page
    assert "tex-svg" not in page and "mathjax-config" not in page   # no MathJax in the reader's browser


def test_math_mathjax_cannot_read_fails_the_build_with_path_and_line(tmp_path: Path) -> None:
    root = copy_tiny(tmp_path)
    edit(root, A01, "tokens to a vector of $d$ numbers", "tokens to a vector of $\\frac{d$ numbers")
    proc = build(root)
    assert proc.returncode != 0
    assert (f"{A01}:10: math that MathJax cannot read (Missing close brace): '\\\\frac{{d'") in warnings(proc)


def test_draws_on_links_to_the_earlier_problem(built: Path) -> None:
    page = (built / "problems/I.1.A02/index.html").read_text(encoding="utf-8")
    assert 'href="../I.1.A01/">I.1.A01 · The memory of an embedding table</a>' in page


def test_one_changed_digit_fails_the_build_with_path_line_claim_written_and_computed(tmp_path: Path) -> None:
    root = copy_tiny(tmp_path)
    edit(root, A01, "In fp32 that is [[65.5|fp32_mb]]", "In fp32 that is [[65.6|fp32_mb]]")
    proc = build(root)
    assert proc.returncode == 1
    assert warnings(proc) == [
        "problems/I.1.A01.md:32: claim 'fp32_mb' reads 65.6, checks/i1_a01_embedding.py computed 65.536 "
        "(compared to 1 decimal place(s))"
    ]
    out = verify(root)
    assert out.returncode == 1
    assert out.stderr.splitlines()[0] == warnings(proc)[0]


def test_a_raising_check_fails_with_its_traceback(tmp_path: Path) -> None:
    root = copy_tiny(tmp_path)
    edit(root, CHECK, 'value("numel", table.numel())', 'value("numel", table.numel())\nraise RuntimeError("boom")')
    proc = build(root)
    assert proc.returncode == 1
    assert "problems/I.1.A01.md:4: check 'checks/i1_a01_embedding.py' raised: RuntimeError: boom" in proc.stderr
    line = (root / CHECK).read_text(encoding="utf-8").splitlines().index('raise RuntimeError("boom")') + 1
    assert f'{root / CHECK}", line {line}, in <module>' in proc.stderr


def test_a_hanging_check_is_stopped_at_its_timeout(tmp_path: Path) -> None:
    root = copy_tiny(tmp_path)
    edit(root, CHECK, '"""I.1.A01: the memory of an embedding table."""',
         '"""I.1.A01: the memory of an embedding table."""\n# numbook: timeout=2\nimport time\ntime.sleep(600)')
    proc = build(root)
    assert proc.returncode == 1
    assert ("problems/I.1.A01.md:4: check 'checks/i1_a01_embedding.py' timed out after 2 s (raise it with a "
            "'# numbook: timeout=SECONDS' line in the check)") in warnings(proc)


def test_a_missing_check_file(tmp_path: Path) -> None:
    root = copy_tiny(tmp_path)
    (root / CHECK).unlink()
    proc = build(root)
    assert "problems/I.1.A01.md:4: check 'checks/i1_a01_embedding.py' does not exist " \
           "(named by 'check: i1_a01_embedding.py')" in warnings(proc)


def test_a_draws_on_target_that_does_not_exist(tmp_path: Path) -> None:
    root = copy_tiny(tmp_path)
    edit(root, "problems/I.1.A02.md", "draws_on: [I.1.A01]", "draws_on: [I.1.A09]")
    proc = build(root)
    assert warnings(proc) == ["problems/I.1.A02.md:5: draws on 'I.1.A09', which is no problem in this book"]


def test_malformed_front_matter(tmp_path: Path) -> None:
    root = copy_tiny(tmp_path)
    edit(root, "problems/I.1.A02.md", "draws_on: [I.1.A01]", "draws_on: [I.1.A01\ntags: x")
    proc = build(root)
    assert proc.returncode == 1
    assert any(w.startswith("problems/I.1.A02.md:6: malformed front matter:") for w in warnings(proc)), proc.stderr


def test_an_unknown_front_matter_field(tmp_path: Path) -> None:
    root = copy_tiny(tmp_path)
    edit(root, "problems/I.1.A02.md", "draws_on: [I.1.A01]", "draw_on: [I.1.A01]")
    proc = build(root)
    assert "problems/I.1.A02.md:5: front matter 'draw_on': Unrecognised configuration name: draw_on" \
        in warnings(proc)


def test_an_unbound_number_in_the_solution(tmp_path: Path) -> None:
    root = copy_tiny(tmp_path)
    edit(root, A01, "so it holds [[16,384,000|numel]] numbers", "so it holds 16,384,000 numbers")
    proc = build(root)
    assert warnings(proc) == [
        "problems/I.1.A01.md:28: unbound number '16,384,000' in Solution: bind it with [[16,384,000|name]] "
        "or mark it [[16,384,000|free]]"
    ]


def test_a_number_in_the_description_must_repeat_a_claim_of_the_page(tmp_path: Path) -> None:
    root = copy_tiny(tmp_path)
    edit(root, A01, "conventions: MB are 10^6 bytes.\n",
         'conventions: MB are 10^6 bytes.\ndescription: "A table of 32,000 rows of 512 numbers: 65.5 MB in fp32."\n')
    assert build(root).returncode == 0   # each number is one the prose binds: V, d, fp32_mb
    assert verify(root).returncode == 0

    edit(root, A01, "65.5 MB in fp32", "65.6 MB in fp32")   # a stale copy of the claim's 65.5
    message = ("problems/I.1.A01.md:6: number '65.6' MB in the description repeats no verified claim or free number "
               "of this page: a description cannot be bound, so each of its numbers must repeat one the prose binds "
               "([[65.6|name]]) or marks free ([[65.6|free]]), or leave it out")
    proc = build(root)
    assert proc.returncode == 1 and warnings(proc) == [message]
    checked = verify(root)
    assert checked.returncode == 1 and checked.stderr.splitlines()[0] == message


def test_quiet_does_not_hide_a_wrong_number(tmp_path: Path) -> None:
    root = copy_tiny(tmp_path)
    edit(root, A01, "In fp32 that is [[65.5|fp32_mb]]", "In fp32 that is [[65.6|fp32_mb]]")
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet"], cwd=root,
                          capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 1
    assert "1 faults in checks and claims; the first: problems/I.1.A01.md:32: claim 'fp32_mb' reads 65.6" \
        in proc.stderr


def test_a_claim_on_a_page_without_a_check_is_an_error(tmp_path: Path) -> None:
    root = copy_tiny(tmp_path)
    edit(root, "docs/index.md", "A book of two problems", "A book of [[2|pages]] problems")
    proc = build(root)
    assert warnings(proc) == [
        "docs/index.md:3: claim 'pages' on a page with no check: add 'check:' to the front matter"]


def test_quiet_does_not_hide_a_component_fault(tmp_path: Path) -> None:
    """Components report on the one road: a quiz with two keys fails a --quiet --strict build too."""
    root = copy_tiny(tmp_path)
    edit(root, "mkdocs.yml", "  - numbook\n", "  - numbook\n  - numbook.components\n")
    (root / "docs" / "quiz.md").write_text("# Quiz\n\n/// quiz | Which?\n- [x] a\n    Yes.\n- [x] b\n    Also.\n///\n",
                                           encoding="utf-8")
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet"], cwd=root,
                          capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 1
    assert "1 faults in checks and claims; the first: docs/quiz.md:3: /// quiz: 2 options are marked correct; " \
           "mark exactly one with '[x]'" in proc.stderr


def test_run_it_yourself_offers_the_check_as_a_script_and_an_executed_notebook(tmp_path: Path) -> None:
    import json

    root = copy_tiny(tmp_path)
    edit(root, "mkdocs.yml", '{cache_dir: "", timeout: 20}', '{cache_dir: "", timeout: 60, run_yourself: true}')
    edit(root, "mkdocs.yml", "strict: true", "strict: true\nsite_url: http://127.0.0.1:8000/")   # the local default
    proc = build(root)
    assert proc.returncode == 0, proc.stderr
    page = root / "site" / "problems" / "I.1.A01"
    html = (page / "index.html").read_text(encoding="utf-8")
    # the links are relative to the page, and say what the download needs: here nothing beyond Python
    assert '<a href="i1_a01_embedding.py" download="">script</a>' in html
    assert '<a href="i1_a01_embedding.ipynb" download="">notebook</a>' in html
    assert "It needs Python 3.11 or later and nothing beyond the standard library; not numbook." in html
    script = (page / "i1_a01_embedding.py").read_text(encoding="utf-8")
    assert script.startswith("# I.1.A01 · The memory of an embedding table\n# The check of this problem")
    notebook_text = (page / "i1_a01_embedding.ipynb").read_text(encoding="utf-8")
    assert "127.0.0.1" not in script and "127.0.0.1" not in notebook_text   # a local address is named nowhere
    assert "from numbook" not in script and "def given(name, x, **_):" in script
    # the script runs with Python alone: -I ignores the environment and the user's site-packages, -S every
    # site-packages (numbook included)
    ran = subprocess.run([sys.executable, "-I", "-S", "i1_a01_embedding.py"], cwd=page, capture_output=True,
                         text=True, timeout=60, check=False)
    assert ran.returncode == 0, ran.stderr
    assert "table (32000, 512): 16,384,000 elements, 65,536,000 bytes in fp32" in ran.stdout
    nb = json.loads((page / "i1_a01_embedding.ipynb").read_text(encoding="utf-8"))
    printed = "".join("".join(o.get("text", "")) for c in nb["cells"] if c["cell_type"] == "code"
                      for o in c["outputs"])
    assert "table (32000, 512): 16,384,000 elements, 65,536,000 bytes in fp32" in printed   # it ran at build time
    # the check's docstring is a Markdown cell, not a string the first code cell echoes
    assert [c["cell_type"] for c in nb["cells"][:3]] == ["markdown", "markdown", "code"]
    assert "".join(nb["cells"][1]["source"]) == "I.1.A01: the memory of an embedding table."
    assert not any(o.get("output_type") == "execute_result" and "I.1.A01" in "".join(o["data"]["text/plain"])
                   for c in nb["cells"] if c["cell_type"] == "code" for o in c["outputs"])


def test_a_notebook_that_fails_to_run_is_a_fault_of_its_page(tmp_path: Path) -> None:
    root = copy_tiny(tmp_path)
    edit(root, "mkdocs.yml", '{cache_dir: "", timeout: 20}', '{cache_dir: "", timeout: 60, run_yourself: true}')
    edit(root, CHECK, "V = given(", 'assert given.__module__ == "numbook.check", "runs only under numbook"\nV = given(')
    proc = build(root)
    assert proc.returncode == 1
    assert ("problems/I.1.A01.md:4: the notebook generated from checks/i1_a01_embedding.py raised: "
            "AssertionError: runs only under numbook") in warnings(proc), proc.stderr
