"""Run it yourself: each problem's notebook runs in its check's sandbox, is cached like the check (the files it
read included), and must print what the check printed for the page (issue 26, hole 3)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import numbook.run.standalone as standalone
from numbook.cli import check_book
from numbook.run.runner import Runner

TINY = Path(__file__).parent / "fixtures" / "tiny"
PAGE = "problems/I.1.A01.md"


def book(tmp_path: Path, check: str, preload: tuple[str, ...] = (), **files: str) -> tuple[Runner, Path]:
    """A project at tmp_path/book with checks/x.py (and other files, by path); a runner with a cache, and a warm
    parent only where ``preload`` names a library (the checks that import it are forked from it)."""
    root = tmp_path / "book"
    (root / "checks").mkdir(parents=True)
    (root / "checks" / "x.py").write_text(textwrap.dedent(check), encoding="utf-8")
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")
    return Runner(root, cache_dir=".cache", preload=preload, timeout=60), root


def offered_output(dest: Path) -> str:
    nb = json.loads((dest / "x.ipynb").read_text(encoding="utf-8"))
    out = standalone.printed(nb)
    assert out is not None, "the notebook did not run"
    return out


def job(runner: Runner, root: Path, dest: Path) -> standalone.Job:
    res = runner.result("x.py")
    assert res.ok, res.stderr
    return standalone.Job(PAGE, 4, "I.1.A01", "X", root / "checks" / "x.py", dest, "", res)


@pytest.mark.parametrize("preload", [(), ("numpy",)], ids=["fresh", "forked"])
def test_a_notebook_cell_that_writes_outside_its_scratch_folder_is_refused_as_in_the_check(
        tmp_path: Path, preload: tuple[str, ...]) -> None:
    """A write to /tmp inside try/except: the check's sandbox refuses it, and now the notebook's too, in a fresh
    interpreter and in a child of the warm parent alike."""
    outside = tmp_path / "outside"
    outside.mkdir()
    runner, root = book(tmp_path, f"""\
        import numpy

        from numbook.check import value
        try:
            with open({str(outside / "escaped.txt")!r}, "w") as fh:
                fh.write("x")
            print("wrote")
        except OSError:
            print("refused")
        value("n", 1)
        """, preload)
    assert runner.result("x.py").stdout == "refused\n"
    standalone.offer(root / "checks" / "x.py", root / "checks", tmp_path / "site", pid="I.1.A01", title="X",
                     runner=runner)
    assert offered_output(tmp_path / "site") == "refused\n"
    assert not (outside / "escaped.txt").exists()


def test_a_changed_data_file_runs_the_notebook_again(tmp_path: Path) -> None:
    """The notebook's cache entry holds the files its run read: a changed data file misses it."""
    runner, root = book(tmp_path, "", **{"data/n.txt": "7\n"})
    data = root / "data" / "n.txt"
    (root / "checks" / "x.py").write_text(
        f"from numbook.check import value\nn = int(open({str(data)!r}).read())\nvalue('n', n)\nprint(f'n = {{n}}')\n",
        encoding="utf-8")
    environment = [runner.versions, runner.device, runner.machinery]
    cache = root / ".cache" / "notebooks"
    standalone.offer(root / "checks" / "x.py", root / "checks", tmp_path / "a", pid="I.1.A01", title="X",
                     runner=runner, cache=cache, environment=environment)
    assert offered_output(tmp_path / "a") == "n = 7\n"
    data.write_text("9\n", encoding="utf-8")
    again = Runner(root, cache_dir=".cache", preload=(), timeout=60)   # the next build
    assert again.result("x.py").stdout == "n = 9\n"
    standalone.offer(root / "checks" / "x.py", root / "checks", tmp_path / "b", pid="I.1.A01", title="X",
                     runner=again, cache=cache, environment=environment)
    assert offered_output(tmp_path / "b") == "n = 9\n"


def test_an_unseeded_draw_is_a_fault_of_the_page_with_path_and_line(tmp_path: Path) -> None:
    runner, root = book(tmp_path, """\
        import random

        from numbook.check import value

        print("a draw without a seed")
        x = random.random()
        value("x", x)
        print(f"x = {x:.6f}")
        """)
    found, offered = standalone.offer_all([job(runner, root, tmp_path / "site")], runner)
    page = runner.result("x.py").stdout.splitlines()[1].split(" = ")[1]
    notebook = offered_output(tmp_path / "site").splitlines()[1].split(" = ")[1]
    assert page != notebook
    assert [str(d) for d in found] == [
        f"{PAGE}:4: the notebook generated from checks/x.py prints {notebook} where the page's check printed {page} "
        f"(line 2 of its output: 'x = {page}'): a reader who runs it sees other numbers than the page (seed every "
        "random draw; declare a timing with value(..., measured=...))"]
    assert len(offered) == 1 and offered[0].spent > 0


def test_a_seeded_draw_passes_and_its_notebook_then_comes_from_the_cache_and_is_compared_again(
        tmp_path: Path) -> None:
    runner, root = book(tmp_path, """\
        import random

        from numbook.check import value

        random.seed(0)
        x = value("x", random.random())
        print(f"x = {x:.6f}")
        """)
    found, offered = standalone.offer_all([job(runner, root, tmp_path / "a")], runner)
    assert found == [] and not offered[0].cached
    assert offered_output(tmp_path / "a") == runner.result("x.py").stdout == "x = 0.844422\n"
    found, offered = standalone.offer_all([job(runner, root, tmp_path / "b")], runner)
    assert found == [] and offered[0].cached and offered[0].spent == 0
    assert offered_output(tmp_path / "b") == "x = 0.844422\n"


def test_a_notebook_run_under_the_cached_only_switch_is_not_compared(tmp_path: Path) -> None:
    """A build that may run nothing writes an uncached notebook without outputs: nothing to compare."""
    runner, root = book(tmp_path, "import random\nfrom numbook.check import value\n"
                                  "print(value('x', random.random()))\n")
    found, offered = standalone.offer_all([job(runner, root, tmp_path / "site")], runner, run=False)
    assert found == [] and standalone.printed(offered[0].notebook) is None


@pytest.mark.parametrize(("notebook", "check", "measured", "message"), [
    ("a 1\nb 2.50\n", "a 1\nb 2.50\n\n", False, None),
    ("a 1\nb 2.5\n", "a 1\nb 2.50\n", False,
     "prints 2.5 where the page's check printed 2.50 (line 2 of its output: 'b 2.50')"),
    ("took 1.2 ms for 16,384 rows\n", "took 0.9 ms for 16,384 rows\n", True, None),
    ("took 1.2 ms\n", "took 1.2 s\n", True, "prints 'took 1.2 ms' where the page's check printed 'took 1.2 s' "
                                            "(line 1 of its output)"),
    ("a\nb\n", "a\n", False, "prints 'b' at line 2 of its output, past the end of the page's check's output"),
    ("a\n", "a\nb\n", False, "stops printing at line 2 of the page's check's output, which prints 'b' there"),
    ("fp32 on x86_64, table (32000, 512)\n", "fp32 on x86_64, table (32000, 512)\n", False, None),
    ("x -1e-05\n", "x -1.2e-05\n", False,
     "prints -1e-05 where the page's check printed -1.2e-05 (line 1 of its output: 'x -1.2e-05')"),
])
def test_the_rule_compares_printed_lines_number_for_number(notebook: str, check: str, measured: bool,
                                                           message: str | None) -> None:
    assert standalone.mismatch(notebook, check, measured=measured) == message


def test_what_a_notebook_printed_is_its_stdout_streams_only() -> None:
    nb = {"cells": [{"cell_type": "markdown", "source": []},
                    {"cell_type": "code", "execution_count": 1, "outputs": [
                        {"output_type": "stream", "name": "stdout", "text": ["a 1\n"]},
                        {"output_type": "stream", "name": "stderr", "text": ["warning 3\n"]}]},
                    {"cell_type": "code", "execution_count": 2, "outputs": [
                        {"output_type": "execute_result", "data": {"text/plain": ["0.5"]}},
                        {"output_type": "stream", "name": "stdout", "text": ["b 2\n"]}]}]}
    assert standalone.printed(nb) == "a 1\nb 2\n"
    nb["cells"][2]["execution_count"] = None
    assert standalone.printed(nb) is None


def copy_tiny(tmp_path: Path, draw: str) -> Path:
    root = tmp_path / "tiny"
    shutil.copytree(TINY, root)
    cfg = root / "mkdocs.yml"
    cfg.write_text(cfg.read_text(encoding="utf-8").replace(
        '{cache_dir: "", timeout: 20}', '{cache_dir: "", timeout: 60, run_yourself: true}'), encoding="utf-8")
    check = root / "checks" / "i1_a01_embedding.py"
    check.write_text(check.read_text(encoding="utf-8") + f"import random\n{draw}print(f'draw {{random.random()}}')\n",
                     encoding="utf-8")
    return root


def notebook_faults(root: Path) -> list[str]:
    """verify's faults about notebooks (the tiny book's other faults are other tests' business)."""
    return [str(d) for d in check_book(root).diagnostics if "the notebook generated from" in d.message]


def test_verify_reports_a_notebook_that_prints_another_number_than_its_page(tmp_path: Path) -> None:
    faults = notebook_faults(copy_tiny(tmp_path, ""))
    assert len(faults) == 1, faults
    assert faults[0].startswith("problems/I.1.A01.md:4: the notebook generated from checks/i1_a01_embedding.py "
                                "prints 0."), faults
    assert "(line 2 of its output: 'draw 0." in faults[0]


def test_verify_passes_a_notebook_that_prints_what_its_page_shows(tmp_path: Path) -> None:
    assert notebook_faults(copy_tiny(tmp_path, "random.seed(1)\n")) == []


@pytest.mark.slow
def test_the_strict_build_fails_on_a_notebook_that_prints_another_number_than_its_page(tmp_path: Path) -> None:
    root = copy_tiny(tmp_path, "")
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict"], cwd=root, capture_output=True,
                          text=True, timeout=300, check=False, env=dict(os.environ, NO_MKDOCS_2_WARNING="1"))
    assert proc.returncode == 1
    assert ("WARNING -  problems/I.1.A01.md:4: the notebook generated from checks/i1_a01_embedding.py prints 0."
            in proc.stderr), proc.stderr
