"""The runner: one subprocess per check, a timeout, and a cache keyed by what can change a result."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from numbook.runner import Runner, read_header


def project(tmp_path: Path, **checks: str) -> Path:
    (tmp_path / "checks").mkdir()
    for name, src in checks.items():
        (tmp_path / "checks" / f"{name}.py").write_text(textwrap.dedent(src), encoding="utf-8")
    return tmp_path


SIMPLE = """
    from numbook.check import given, value
    n = given("n", 3)
    value("square", n * n)
    print("square", n * n)
"""


def test_a_check_runs_in_a_subprocess_and_returns_its_values_and_output(tmp_path: Path) -> None:
    runner = Runner(project(tmp_path, a=SIMPLE), cache_dir=".cache")
    res = runner.result("a.py")
    assert (res.status, res.inputs, res.values, res.stdout) == ("ok", {"n": 3}, {"square": 9}, "square 9\n")
    assert not res.cached and res.elapsed_s > 0 and res.device.startswith(("cpu", "cuda"))


def test_one_run_per_key_per_process_and_the_disk_cache_serves_the_next_build(tmp_path: Path) -> None:
    root = project(tmp_path, a=SIMPLE)
    first = Runner(root, cache_dir=".cache")
    assert first.result("a.py") is first.result("a.py")            # same process: not run twice
    second = Runner(root, cache_dir=".cache").result("a.py")        # a new build: from disk
    assert second.cached and second.values == {"square": 9}


def test_changing_the_check_or_a_project_module_it_imports_changes_the_key(tmp_path: Path) -> None:
    root = project(tmp_path, a="from helper import K\nfrom numbook.check import value\nvalue('k', K)\n",
                   helper="K = 1\n")
    runner = Runner(root, cache_dir=".cache")
    key0, _ = runner.key(root / "checks/a.py")
    (root / "checks/helper.py").write_text("K = 2\n", encoding="utf-8")
    key1, _ = runner.key(root / "checks/a.py")
    assert key0 != key1
    assert Runner(root, cache_dir=".cache").result("a.py").values == {"k": 2}


def test_timeout_and_error_results(tmp_path: Path) -> None:
    root = project(tmp_path, slow="# numbook: timeout=1\nimport time\ntime.sleep(30)\n",
                   bad="raise ValueError('no')\n", silent="print('hi')\n")
    runner = Runner(root, cache_dir=None)
    res = runner.run_many(["slow.py", "bad.py", "silent.py", "gone.py"])
    assert res["slow.py"].status == "timeout" and res["slow.py"].elapsed_s < 10
    assert res["bad.py"].status == "error" and res["bad.py"].stderr.strip().endswith("ValueError: no")
    assert res["silent.py"].status == "error" and "did not write its values" in res["silent.py"].stderr
    assert res["gone.py"].status == "missing"


def test_failed_results_are_not_cached(tmp_path: Path) -> None:
    root = project(tmp_path, bad="raise ValueError('no')\n")
    Runner(root, cache_dir=".cache").result("bad.py")
    assert not list((root / ".cache").glob("*.json"))


@pytest.mark.parametrize(
    ("source", "requires", "timeout", "alone"),
    [("x = 1\n", "cpu", None, False), ("# numbook: requires=cuda, timeout=300\n", "cuda", 300.0, False),
     ("# numbook: timeout=60, alone\n", "cpu", 60.0, True)],
)
def test_header(source: str, requires: str, timeout: float | None, alone: bool) -> None:
    header = read_header(source)
    assert (header.requires, header.timeout, header.alone) == (requires, timeout, alone)


def test_alone_checks_run_after_the_others_one_at_a_time(tmp_path: Path) -> None:
    stamp = "import time\nfrom numbook.check import value\nvalue('t0', time.time()); time.sleep(0.3)\n" \
            "value('t1', time.time())\n"
    root = project(tmp_path, a=stamp, b=stamp, m1="# numbook: alone\n" + stamp, m2="# numbook: alone\n" + stamp)
    res = Runner(root, cache_dir=None, jobs=4).run_many(["m1.py", "a.py", "m2.py", "b.py"])
    spans = {k: (r.values["t0"], r.values["t1"]) for k, r in res.items()}
    assert max(spans["a.py"][1], spans["b.py"][1]) <= min(spans["m1.py"][0], spans["m2.py"][0])
    first, second = sorted([spans["m1.py"], spans["m2.py"]])
    assert first[1] <= second[0]


def test_header_rejects_unknown_keys() -> None:
    with pytest.raises(ValueError, match="unknown numbook header key 'gpu'"):
        read_header("# numbook: gpu=yes\n")
