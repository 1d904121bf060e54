"""The runner: one subprocess per check, a timeout, and a cache keyed by what can change a result."""

from __future__ import annotations

import json
import os
import shutil
import textwrap
import time
from pathlib import Path

import pytest

from _project import project
from numbook.run.runner import CheckResult, Runner, Status, read_header

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


def test_a_perturbed_run_is_a_run_of_its_own_not_the_plain_result(tmp_path: Path) -> None:
    runner = Runner(project(tmp_path, a=SIMPLE), cache_dir=".cache")
    plain = runner.result("a.py")
    nudged = runner.result("a.py", perturb="n")
    assert plain.values == {"square": 9} and nudged.values["square"] != 9 and nudged.key != plain.key
    assert Runner(runner.root, cache_dir=".cache").result("a.py", perturb="n").values == nudged.values   # cached


def test_an_edited_helper_module_is_recomputed(tmp_path: Path) -> None:
    root = project(tmp_path, a="from _helper import K\nfrom numbook.check import value\nvalue('k', K)\n",
                   _helper="K = 1\n")
    first = Runner(root, cache_dir=".cache").result("a.py")
    assert first.values == {"k": 1} and first.reads == {"checks/_helper.py": first.reads["checks/_helper.py"],
                                                          "checks/a.py": first.reads["checks/a.py"]}
    assert Runner(root, cache_dir=".cache").result("a.py").cached
    (root / "checks/_helper.py").write_text("K = 22\n", encoding="utf-8")
    again = Runner(root, cache_dir=".cache").result("a.py")
    assert (again.cached, again.values) == (False, {"k": 22})


READS_JSON = """
    import json, pathlib
    from numbook.check import value
    params = json.loads((pathlib.Path(__file__).parent / "_params.json").read_text())
    value("n", params["n"])
"""


def test_a_changed_data_file_is_recomputed_and_a_deleted_one_invalidates(tmp_path: Path) -> None:
    root = project(tmp_path, a=READS_JSON)
    (root / "checks/_params.json").write_text('{"n": 1}', encoding="utf-8")
    assert Runner(root, cache_dir=".cache").result("a.py").values == {"n": 1}
    assert Runner(root, cache_dir=".cache").result("a.py").cached
    (root / "checks/_params.json").write_text('{"n": 2}', encoding="utf-8")
    res = Runner(root, cache_dir=".cache").result("a.py")
    assert (res.cached, res.values) == (False, {"n": 2})
    (root / "checks/_params.json").unlink()
    gone = Runner(root, cache_dir=".cache").result("a.py")
    assert (gone.cached, gone.status) == (False, "error") and "FileNotFoundError" in gone.stderr
    assert gone.reads["checks/_params.json"] is None                    # a file it tried to read, absent
    (root / "checks/_params.json").write_text('{"n": 3}', encoding="utf-8")
    assert Runner(root, cache_dir=".cache").result("a.py").values == {"n": 3}


def test_a_package_inside_the_project_on_the_path_invalidates_when_edited(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    root = project(tmp_path, a="from harness import K\nfrom numbook.check import value\nvalue('k', K)\n")
    (root / "pkg/harness").mkdir(parents=True)
    (root / "pkg/harness/__init__.py").write_text("from .consts import K\n", encoding="utf-8")
    (root / "pkg/harness/consts.py").write_text("K = 1\n", encoding="utf-8")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(root / "pkg"), os.environ.get("PYTHONPATH", "")]))
    res = Runner(root, cache_dir=".cache").result("a.py")
    assert res.values == {"k": 1} and "pkg/harness/consts.py" in res.reads
    assert Runner(root, cache_dir=".cache").result("a.py").cached
    (root / "pkg/harness/consts.py").write_text("K = 2\n", encoding="utf-8")
    assert Runner(root, cache_dir=".cache").result("a.py").values == {"k": 2}


def test_the_cache_serves_a_copy_of_the_project(tmp_path: Path) -> None:
    root = project(tmp_path / "one", a=READS_JSON)
    (root / "checks/_params.json").write_text('{"n": 1}', encoding="utf-8")
    Runner(root, cache_dir=".cache").result("a.py")
    copy = tmp_path / "two"
    shutil.copytree(root, copy)
    assert Runner(copy, cache_dir=".cache").result("a.py").cached


ENV = """
    import os
    from numbook.check import value
    value("foo", os.environ.get("NB_TEST_FOO", "unset"))
    value("bar", os.environ.get("NB_TEST_BAR", "unset"))
"""


def test_an_undeclared_variable_is_invisible_and_a_declared_one_is_keyed(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    root = project(tmp_path, a="# numbook: env=NB_TEST_FOO\n" + textwrap.dedent(ENV))
    monkeypatch.setenv("NB_TEST_FOO", "1")
    monkeypatch.setenv("NB_TEST_BAR", "1")
    assert Runner(root, cache_dir=".cache").result("a.py").values == {"foo": "1", "bar": "unset"}
    monkeypatch.setenv("NB_TEST_BAR", "2")                                # not declared: not keyed
    assert Runner(root, cache_dir=".cache").result("a.py").cached
    monkeypatch.setenv("NB_TEST_FOO", "2")                                # declared: a new key
    res = Runner(root, cache_dir=".cache").result("a.py")
    assert (res.cached, res.values) == (False, {"foo": "2", "bar": "unset"})


def test_timeout_and_error_results(tmp_path: Path) -> None:
    root = project(tmp_path, slow="# numbook: timeout=1\nimport time\ntime.sleep(30)\n",
                   bad="raise ValueError('no')\n", silent="print('hi')\n")
    runner = Runner(root, cache_dir=None)
    res = runner.run_many(["slow.py", "bad.py", "silent.py", "gone.py"])
    assert res["slow.py"].status == "timeout" and res["slow.py"].elapsed_s < 10
    assert res["bad.py"].status == "error" and res["bad.py"].stderr.strip().endswith("ValueError: no")
    assert res["silent.py"].status == "error" and "did not write its values" in res["silent.py"].stderr
    assert res["gone.py"].status == "missing"


def test_a_traceback_names_the_checks_own_file_and_line(tmp_path: Path) -> None:
    root = project(tmp_path, bad="x = 1\nraise ValueError('no')\n")
    res = Runner(root, cache_dir=None).result("bad.py")
    assert res.stderr.splitlines() == [
        "Traceback (most recent call last):",
        f'  File "{root / "checks/bad.py"}", line 2, in <module>',
        "    raise ValueError('no')",
        "ValueError: no",
    ]


def test_failed_results_are_cached_until_their_key_changes(tmp_path: Path) -> None:
    root = project(tmp_path, bad="raise ValueError('no')\n", slow="# numbook: timeout=1\nimport time\ntime.sleep(30)\n")
    first = Runner(root, cache_dir=".cache").run_many(["bad.py", "slow.py"])
    assert [first[c].status for c in ("bad.py", "slow.py")] == ["error", "timeout"]
    started = time.perf_counter()
    second = Runner(root, cache_dir=".cache").run_many(["bad.py", "slow.py"])
    assert time.perf_counter() - started < 1.0                          # the timeout is not waited out again
    assert [(second[c].status, second[c].cached) for c in ("bad.py", "slow.py")] == [("error", True),
                                                                                     ("timeout", True)]
    assert second["bad.py"].stderr == first["bad.py"].stderr
    assert not Runner(root, cache_dir=None).result("bad.py").cached     # --no-cache runs it again
    (root / "checks/bad.py").write_text("raise ValueError('still no')\n", encoding="utf-8")
    third = Runner(root, cache_dir=".cache").result("bad.py")
    assert not third.cached and third.stderr.strip().endswith("ValueError: still no")


def test_statuses_are_an_enum_that_compares_as_strings(tmp_path: Path) -> None:
    res = Runner(project(tmp_path, a=SIMPLE), cache_dir=".cache").result("a.py")
    assert res.status is Status.OK and res.status == "ok" and f"{res.status}" == "ok"
    assert json.loads(json.dumps({"s": res.status})) == {"s": "ok"}
    assert CheckResult("checks/x.py", "frozen-stale").status is Status.FROZEN_STALE
    assert [s.value for s in Status] == ["ok", "error", "timeout", "out-of-memory", "missing", "skipped",
                                         "frozen-missing", "frozen-stale", "frozen-invalid"]
    with pytest.raises(ValueError, match="'fine' is not a valid Status"):
        CheckResult("checks/x.py", "fine")


def test_a_check_past_its_memory_limit_fails_with_a_message_naming_the_limit(tmp_path: Path) -> None:
    root = project(tmp_path, big="buf = bytearray(20 * 2**30)\n",
                   small="# numbook: memory=64MiB\nbuf = bytearray(256 * 2**20)\n",
                   raised="# numbook: memory=1GiB\nfrom numbook.check import value\n"
                          "value('n', len(bytearray(256 * 2**20)))\n")
    res = Runner(root, cache_dir=None).run_many(["big.py", "small.py", "raised.py"])
    assert res["big.py"].status == "out-of-memory" and res["big.py"].stderr.strip().endswith("MemoryError")
    assert res["big.py"].memory_message() == (
        "check 'checks/big.py' ran out of memory: it may use 8 GiB (raise it with a '# numbook: memory=…' line "
        "in the check)")
    assert (res["small.py"].status, res["small.py"].memory_limit) == ("out-of-memory", 64 * 2**20)
    assert "it may use 64 MiB" in res["small.py"].memory_message()
    assert res["raised.py"].values == {"n": 256 * 2**20}


def test_progress_is_reported_as_each_check_finishes(tmp_path: Path) -> None:
    root = project(tmp_path, a=SIMPLE, b=SIMPLE, c="# numbook: alone\n" + textwrap.dedent(SIMPLE))
    seen: list[tuple[int, int, str, list[str]]] = []
    Runner(root, cache_dir=None, jobs=2).run_many(
        ["a.py", "b.py", "c.py"], progress=lambda done, total, res, running: seen.append(
            (done, total, res.check, running)))
    assert [(d, t) for d, t, _, _ in seen] == [(1, 3), (2, 3), (3, 3)]
    assert sorted(c for _, _, c, _ in seen[:2]) == ["checks/a.py", "checks/b.py"] and seen[2][2:] == ("checks/c.py", [])


def test_prune_removes_the_entries_no_check_of_the_build_reaches(tmp_path: Path) -> None:
    root = project(tmp_path, a=SIMPLE, b=SIMPLE)
    Runner(root, cache_dir=".cache").run_many(["a.py", "b.py"])
    assert len(list((root / ".cache").glob("*.json"))) == 2
    runner = Runner(root, cache_dir=".cache")
    runner.run_many(["a.py"])
    assert runner.prune() == 1
    assert [f.stem for f in (root / ".cache").glob("*.json")] == [runner.result("a.py").key]


@pytest.mark.parametrize(
    ("source", "requires", "timeout", "alone"),
    [("x = 1\n", "cpu", None, False), ("# numbook: requires=cuda, timeout=300\n", "cuda", 300.0, False),
     ("# numbook: timeout=60, alone\n", "cpu", 60.0, True)],
)
def test_header(source: str, requires: str, timeout: float | None, alone: bool) -> None:
    header = read_header(source)
    assert (header.requires, header.timeout, header.alone) == (requires, timeout, alone)


@pytest.mark.parametrize(
    ("source", "memory", "env"),
    [("x = 1\n", "default", ()), ("# numbook: memory=16GiB, env=FOO,BAR\n", 16 * 2**30, ("FOO", "BAR")),
     ("# numbook: env=FOO BAR, alone, memory=512MiB\n", 512 * 2**20, ("FOO", "BAR")),
     ("# numbook: memory=none\n", None, ())],
)
def test_header_memory_and_env(source: str, memory: int | None | str, env: tuple[str, ...]) -> None:
    header = read_header(source)
    assert (header.memory, header.env) == (memory, env)


def test_header_rejects_a_bad_size() -> None:
    with pytest.raises(ValueError, match=r"memory='lots': use a size like 16GiB, 512MiB or none"):
        read_header("# numbook: memory=lots\n")


def test_alone_checks_run_after_the_others_one_at_a_time(tmp_path: Path) -> None:
    stamp = "import time\nfrom numbook.check import value\nvalue('t0', time.time()); time.sleep(0.3)\n" \
            "value('t1', time.time())\n"
    long = stamp.replace("0.3", "1.0")   # long enough to overlap however late the second interpreter starts
    root = project(tmp_path, a=long, b=long, m1="# numbook: alone\n" + stamp, m2="# numbook: alone\n" + stamp,
                   bad="# numbook: alone=yes\n" + stamp)   # a header that does not parse: an error, not alone
    order: list[str] = []
    res = Runner(root, cache_dir=None, jobs=4).run_many(["m1.py", "a.py", "m2.py", "bad.py", "b.py"],
                                                        progress=lambda done, total, r, running: order.append(r.check))
    assert res["bad.py"].status == "error"
    assert order[0] == "checks/bad.py"   # at once, in the shared phase: a header that does not parse is not alone
    spans = {k: (r.values["t0"], r.values["t1"]) for k, r in res.items() if k != "bad.py"}
    assert max(spans["a.py"][1], spans["b.py"][1]) <= min(spans["m1.py"][0], spans["m2.py"][0])
    first, second = sorted([spans["m1.py"], spans["m2.py"]])
    assert first[1] <= second[0]
    assert spans["a.py"][0] < spans["b.py"][1] and spans["b.py"][0] < spans["a.py"][1]   # jobs=4: side by side


def test_one_job_runs_the_checks_one_at_a_time(tmp_path: Path) -> None:
    stamp = "import time\nfrom numbook.check import value\nvalue('t0', time.time()); time.sleep(0.3)\n" \
            "value('t1', time.time())\n"
    root = project(tmp_path, a=stamp, b=stamp, c=stamp)
    res = Runner(root, cache_dir=None, jobs=1).run_many(["a.py", "b.py", "c.py"])
    spans = sorted((r.values["t0"], r.values["t1"]) for r in res.values())
    assert all(earlier[1] <= later[0] for earlier, later in zip(spans, spans[1:], strict=False))


def test_header_rejects_unknown_keys() -> None:
    with pytest.raises(ValueError, match="unknown numbook header key 'gpu' \\(known: requires, timeout, alone, "
                       "memory, env, processes\\)"):
        read_header("# numbook: gpu=yes\n")


def test_a_cache_entry_is_served_only_under_its_own_key_and_cache_version(tmp_path: Path) -> None:
    """A cache file names its key twice: in its file name and inside. An entry under another check's key (a
    bundle merged wrongly, a copied file) or from an older cache format is run again, never served."""
    root = project(tmp_path, a="from numbook.check import value\nvalue('x', 1)\n",
                   b="from numbook.check import value\nvalue('x', 2)\n")
    first = Runner(root)
    a, b = first.result("a.py"), first.result("b.py")
    cache = root / ".cache" / "numbook"   # the default: a folder inside a folder that does not exist yet
    (cache / f"{b.key}.json").write_text((cache / f"{a.key}.json").read_text(encoding="utf-8"), encoding="utf-8")
    again = Runner(root).result("b.py")
    assert (again.cached, again.values) == (False, {"x": 2})
    data = json.loads((cache / f"{b.key}.json").read_text(encoding="utf-8"))
    assert data["key"] == b.key   # the run above wrote b's own entry back
    data["cache_version"] = "2"
    (cache / f"{b.key}.json").write_text(json.dumps(data), encoding="utf-8")
    assert Runner(root).result("b.py").cached is False
    assert Runner(root).result("b.py").cached is True


EVERY_RECORD = """
    import numpy as np
    from numbook.check import fact, given, sanity, value
    n = given("n", 3, unit="MB", nudge=2)
    vocab = fact("vocab", "V")
    x = value("x", np.float32(n) / 2, unit="MB")
    value("width", 8, fixed="a property of the layout")
    value("ms", 1.5, measured="the wall time of one step on this machine")
    sanity("half_of_n", 2 * x == n, "x is half of n", operands=(2 * x, n))
    busy = 0
    for i in range(200000):
        busy += i
"""


def test_every_record_of_a_check_comes_back_in_its_result(tmp_path: Path) -> None:
    root = project(tmp_path, rec=EVERY_RECORD)
    (root / "checks" / "facts.yml").write_text(
        "vocab:\n  value: 32000\n  source: the model card, v2\n  read: 2026-12-01\n", encoding="utf-8")
    res = Runner(root, cache_dir=None).result("rec.py")
    assert res.status == "ok", res.stderr
    assert res.inputs == {"n": 3, "V": 32000} and res.values == {"x": 1.5, "width": 8, "ms": 1.5}
    assert res.units == {"n": "MB", "x": "MB"} and res.dtypes == {"x": "float32"}
    assert res.facts == {"V": {"key": "vocab", "source": "the model card, v2", "read": "2026-12-01"}}
    assert res.fixed == {"width": "a property of the layout"}
    assert res.measured == {"ms": "the wall time of one step on this machine"}
    assert res.nudges == {"n": 2}
    assert res.sanity == {"half_of_n": {"ok": True, "message": "x is half of n", "operands": [3.0, 3]}}
    assert res.lines["half_of_n"] == 9 and res.lines["V"] == 5
    assert res.figures == {} and res.returncode == 0 and res.stderr == ""
    runner = Runner(root, cache_dir=None)
    assert (res.requires, res.versions, res.device) == ("cpu", runner.versions, runner.device)
    assert (res.timeout_s, res.memory_limit) == (runner.timeout, runner.memory)
    assert (res.key, res.source_hash) == runner.key(root / "checks" / "rec.py")
    assert res.cpu_s is not None and 0 < res.cpu_s < res.elapsed_s + 5


def test_a_check_that_ends_without_its_values_says_why(tmp_path: Path) -> None:
    root = project(tmp_path, plain="print('hello')\n", raises="import sys\nprint('x', file=sys.stderr)\nsys.exit(2)\n",
                   silent="import sys\nsys.exit(3)\n", warns="import sys\nprint('careful', file=sys.stderr)\n")
    res = Runner(root, cache_dir=None).run_many(["plain.py", "raises.py", "silent.py", "warns.py"])
    assert res["warns.py"].stderr == ("careful\n\nchecks/warns.py did not write its values: "
                                      "does it import numbook.check?")
    assert (res["plain.py"].status, res["plain.py"].stdout) == ("error", "hello\n")
    assert res["plain.py"].stderr == "\nchecks/plain.py did not write its values: does it import numbook.check?"
    assert (res["raises.py"].status, res["raises.py"].returncode, res["raises.py"].stderr) == ("error", 2, "x\n")
    assert (res["silent.py"].status, res["silent.py"].returncode, res["silent.py"].stderr) == ("error", 3, "")


def test_running_out_of_memory_is_told_apart_only_under_a_memory_limit(tmp_path: Path) -> None:
    root = project(tmp_path, oom="raise MemoryError\n", late="raise MemoryError('no')\nprint('never')\n",
                   other="print('MemoryError is only a word here')\nraise ValueError('no')\n")
    limited = Runner(root, cache_dir=None).run_many(["oom.py", "late.py", "other.py"])
    assert [limited[c].status for c in ("oom.py", "late.py", "other.py")] == ["out-of-memory", "out-of-memory", "error"]
    unlimited = Runner(root, cache_dir=None, memory=None).result("oom.py")
    assert (unlimited.status, unlimited.memory_limit) == ("error", None)


def test_what_the_runner_answers_before_it_runs_anything(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A missing check, a build that runs nothing, a header that does not parse, and a merged-results build
    (NUMBOOK_CACHED_ONLY) that finds no result: each is an answer with its check's name, not a run."""
    root = project(tmp_path, ok="from numbook.check import value\nvalue('x', 1)\n", bad="# numbook: timeout=soon\n")
    runner = Runner(root, cache_dir=None)
    assert (runner.result("gone.py").check, runner.result("gone.py").status) == ("checks/gone.py", "missing")
    skipped = Runner(root, cache_dir=None, execute=False).result("ok.py")
    assert (skipped.check, skipped.status, skipped.values) == ("checks/ok.py", "skipped", {})
    bad = runner.result("bad.py")
    assert (bad.status, bad.stderr.split(": ", 1)[0]) == ("error", "checks/bad.py") and "timeout" in bad.stderr
    assert runner.result("checks/ok.py") is runner.result("ok.py")   # one check, two spellings: one run
    assert runner.rel(tmp_path.parent / "elsewhere.py") == str(tmp_path.parent / "elsewhere.py")
    monkeypatch.setenv("NUMBOOK_CACHED_ONLY", "1")
    refused = Runner(root, cache_dir=".cache").result("ok.py")
    key, own = runner.key(root / "checks" / "ok.py")
    assert (refused.check, refused.status, refused.key, refused.source_hash, refused.values) == (
        "checks/ok.py", "error", key, own, {})
    assert (refused.device, refused.versions) == (runner.device, runner.versions)
    assert refused.stderr == ("checks/ok.py has no result in the merged results and NUMBOOK_CACHED_ONLY forbids "
                              "running it: its shard did not run it, or its files changed since")


def test_a_runner_is_made_with_its_defaults(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from numbook.core.result import DEFAULT_CACHE_DIR, DEFAULT_MEMORY, DEFAULT_TIMEOUT
    from numbook.run.executor import MACHINERY, PRELOAD

    monkeypatch.chdir(tmp_path)
    runner = Runner(Path("."))
    assert (runner.root, runner.checks_dir, runner.cache_dir) == (tmp_path, tmp_path / "checks",
                                                                    tmp_path / DEFAULT_CACHE_DIR)
    assert (runner.timeout, runner.memory, runner.jobs, runner.execute) == (DEFAULT_TIMEOUT, DEFAULT_MEMORY,
                                                                           os.cpu_count(), True)
    assert runner.preload == PRELOAD == ("torch", "numpy") and runner.keys == set()
    assert runner.machinery == MACHINERY and len(MACHINERY) >= 16   # the tool's own sources, in every key
    monkeypatch.setattr(os, "cpu_count", lambda: None)                # a platform that cannot count its cores
    assert Runner(Path(".")).jobs == 1
    other = Runner(tmp_path, "tests", "", 5.0, 3, False, memory=None, preload=())
    assert (other.checks_dir, other.cache_dir, other.timeout, other.jobs, other.execute, other.memory,
            other.preload) == (tmp_path / "tests", None, 5.0, 3, False, None, ())


def test_the_list_of_files_a_run_read_is_read_back_sorted_with_missing_files_as_none(tmp_path: Path) -> None:
    from numbook.run.executor import read_list

    assert read_list(tmp_path / "absent.txt") == {}
    listing = tmp_path / "reads.txt"
    listing.write_bytes(b"abc\tchecks/b.py\n-\tchecks/gone.txt\nnot a record\nd\xc3\xa9f\tdata/caf\xc3\xa9.txt\n"
                        b"abc\tchecks/b.py\n")
    assert list(read_list(listing).items()) == [("checks/b.py", "abc"), ("checks/gone.txt", None),
                                                 ("data/café.txt", "déf")]


def test_a_file_whose_name_holds_a_tab_or_bytes_that_are_not_utf8_is_listed_as_read(tmp_path: Path) -> None:
    """A file name is bytes: the list of files a check read keeps a tab in a name and a name in Latin-1."""
    root = project(tmp_path, a="""
        import os
        from numbook.check import value
        here = os.fsencode(os.path.dirname(os.path.abspath(__file__)))
        for name in (b"tab\\there.txt", b"caf\\xe9.txt"):
            with open(os.path.join(here, name), "rb") as f:
                f.read()
        value("n", 2)
    """)
    (root / "checks" / "tab\there.txt").write_text("x", encoding="utf-8")
    (Path(os.fsdecode(os.path.join(os.fsencode(root / "checks"), b"caf\xe9.txt")))).write_bytes(b"y")
    res = Runner(root, cache_dir=".cache").result("a.py")
    assert res.status == "ok", res.stderr
    assert {"checks/tab\there.txt", "checks/caf\udce9.txt"} <= set(res.reads)
    assert Runner(root, cache_dir=".cache").result("a.py").cached   # their hashes hold on the next build


def test_killing_a_group_ends_every_process_in_it_and_a_gone_group_is_no_error() -> None:
    import signal
    import subprocess
    import sys

    from numbook.run.executor import kill_group

    proc = subprocess.Popen([sys.executable, "-c", "import subprocess, sys, time\n"
                             "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
                             "print('ready', flush=True)\ntime.sleep(60)\n"],
                            stdout=subprocess.PIPE, text=True, start_new_session=True)
    assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
    kill_group(proc.pid)
    assert proc.wait(timeout=10) == -signal.SIGKILL
    proc.stdout.close()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.killpg(proc.pid, 0)   # the grandchild, in the same group, is gone too
        except ProcessLookupError:
            break
        time.sleep(0.05)
    else:
        raise AssertionError("a process of the group outlived the kill")
    kill_group(proc.pid)   # gone: no error


def test_a_group_the_runner_may_not_kill_is_no_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """A check that ran a setuid program leaves a process the runner's user may not signal: the runner goes on."""
    from numbook.run.executor import kill_group

    def refuse(pid: int, sig: int) -> None:
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(os, "killpg", refuse)
    kill_group(12345)


def test_a_gpu_check_is_limited_in_data_not_address_space(tmp_path: Path) -> None:
    """CUDA maps far more address space than it uses: a GPU check's memory limit is on its data (RLIMIT_DATA),
    a CPU check's on its address space (RLIMIT_AS)."""
    import numbook.run.sandbox as sandbox

    runner = Runner(tmp_path, cache_dir=None)
    env = runner.executor.environment
    gpu = env(read_header("# numbook: requires=cuda\n"), tmp_path, "checks/g.py", limit=2**30, device=runner.device)
    cpu = env(read_header(""), tmp_path, "checks/c.py", limit=2**30, device=runner.device)
    assert (gpu[sandbox.LIMIT_KIND_ENV], cpu[sandbox.LIMIT_KIND_ENV]) == ("data", "as")
    assert (gpu[sandbox.MEMORY_ENV], env(read_header(""), tmp_path, "c", limit=None, device=runner.device)[
        sandbox.MEMORY_ENV]) == (str(2**30), "")


def test_a_gpu_check_on_a_machine_without_a_usable_gpu_is_not_run_here(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """It would run on a CPU, and give a CPU's figures for a GPU's: it is served from its frozen GPU result or,
    with none, is a fault that says so."""
    monkeypatch.setenv("NUMBOOK_DEVICE", "cpu: test")
    root = project(tmp_path, g="# numbook: requires=cuda\nfrom numbook.check import value\nvalue('x', 1)\n")
    res = Runner(root, cache_dir=None).result("g.py")
    assert (res.status, res.values, res.requires) == ("frozen-missing", {}, "cuda")
    assert res.stderr == ("checks/g.py needs cuda and this build has no usable GPU (cpu: test); there is no frozen "
                          "result at checks/frozen/g.json: run `nox -s freeze` on a GPU machine")


def test_a_gpu_check_where_the_gpu_is_usable_runs_live_and_records_the_driver(tmp_path: Path,
                                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    import numbook.run.machine as machine

    probes: list[str] = []

    def usable(device: str) -> machine.GpuStatus:
        probes.append(device)
        return machine.GpuStatus(True, driver="550.54")

    monkeypatch.setattr(machine, "gpu_status", usable)
    monkeypatch.setenv("NUMBOOK_DEVICE", "cuda: pretend")
    root = project(tmp_path, g="# numbook: requires=cuda\nfrom numbook.check import value\nvalue('x', 1)\n",
                   h="# numbook: requires=cuda\nfrom numbook.check import value\nvalue('x', 2)\n")
    runner = Runner(root, cache_dir=None)
    res = runner.run_many(["g.py", "h.py"])
    assert [(r.status, r.driver, r.device, r.values["x"]) for r in res.values()] == [
        ("ok", "550.54", "cuda: pretend", 1), ("ok", "550.54", "cuda: pretend", 2)]
    assert probes == ["cuda: pretend"]   # probed once per runner


def test_a_gpu_check_that_cannot_run_here_says_why_the_gpu_is_not_usable(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    import numbook.run.machine as machine

    why = "NVIDIA H200 answers nvidia-smi, but torch 2.13.0+cpu cannot use it"
    monkeypatch.setattr(machine, "gpu_status", lambda device: machine.GpuStatus(False, why))
    monkeypatch.setenv("NUMBOOK_DEVICE", "cuda: NVIDIA H200")
    root = project(tmp_path, g="# numbook: requires=cuda\nfrom numbook.check import value\nvalue('x', 1)\n")
    res = Runner(root, cache_dir=None).result("g.py")
    assert res.status == "frozen-missing"
    assert res.stderr.startswith(f"checks/g.py needs cuda and this build has no usable GPU ({why}); ")


def test_a_result_says_when_it_ran_in_utc_whatever_the_local_zone(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    import datetime
    import re

    monkeypatch.setenv("TZ", "IST-5:30")   # UTC+5:30, in POSIX form (no zone files needed): no minute is UTC's
    time.tzset()
    try:
        root = project(tmp_path, a="from numbook.check import value\nvalue('x', 1)\n")
        before = datetime.datetime.now(datetime.UTC).replace(second=0, microsecond=0, tzinfo=None)
        ran_at = Runner(root, cache_dir=None).result("a.py").ran_at
        after = datetime.datetime.now(datetime.UTC).replace(tzinfo=None)
    finally:
        monkeypatch.delenv("TZ")
        time.tzset()
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2} \d{2}:\d{2} UTC", ran_at)
    assert before <= datetime.datetime.strptime(ran_at, "%Y-%m-%d %H:%M UTC") <= after


def test_a_result_file_written_by_the_check_itself_is_an_error_not_a_crash(tmp_path: Path) -> None:
    write = "import json, os, sys\nprint('its own words', file=sys.stderr)\n" \
            "json.dump({}, open(os.environ['NUMBOOK_RESULT'], 'w'))\n"
    root = project(tmp_path, forged=write.format("{'values': {'x': 1}}"), listed=write.format("[1, 2]"))
    res = Runner(root, cache_dir=None).run_many(["forged.py", "listed.py"])
    assert (res["forged.py"].status, res["forged.py"].values) == ("error", {})
    assert res["forged.py"].stderr == ("its own words\n\nchecks/forged.py wrote a result numbook cannot read "
                                       "(no 'inputs'): only numbook.check writes it")
    assert res["listed.py"].stderr.endswith("cannot read (not a JSON object): only numbook.check writes it")


READS_OUTSIDE = """
    import json, sys
    from numbook.check import value
    value("n", json.load(open(sys.argv[0].rsplit("/", 3)[0] + "/outside.json"))["n"])
"""


def test_a_file_read_outside_the_project_is_keyed_by_its_content(tmp_path: Path) -> None:
    root = project(tmp_path / "book", a=READS_OUTSIDE)
    outside = tmp_path / "outside.json"
    outside.write_text('{"n": 1}', encoding="utf-8")
    res = Runner(root, cache_dir=".cache").result("a.py")
    assert res.values == {"n": 1} and str(outside) in res.reads   # listed by its absolute path
    assert Runner(root, cache_dir=".cache").result("a.py").cached
    outside.write_text('{"n": 2}', encoding="utf-8")
    res = Runner(root, cache_dir=".cache").result("a.py")
    assert (res.cached, res.values) == (False, {"n": 2})
    outside.unlink()
    assert Runner(root, cache_dir=".cache").result("a.py").status == "error"


@pytest.mark.parametrize("listing", [
    "os.listdir(data)", "[e.name for e in os.scandir(data)]", "[p.name for p in Path(data).iterdir()]",
    "[os.path.basename(p) for p in glob.glob(data + '/*')]", "[p.name for p in Path(data).glob('*')]",
    "next(os.walk(data))[2]", "os.listdir(os.open(data, os.O_RDONLY))"],
    ids=["listdir", "scandir", "iterdir", "glob", "path-glob", "walk", "listdir-fd"])
def test_a_folder_a_check_lists_is_keyed_by_its_names(tmp_path: Path, listing: str) -> None:
    root = project(tmp_path, a=f"""
        import glob, os
        from pathlib import Path
        from numbook.check import value
        data = str(Path(__file__).parent.parent / "data")
        value("n", len({listing}))
    """)
    (root / "data").mkdir()
    (root / "data/one.csv").write_text("1", encoding="utf-8")
    res = Runner(root, cache_dir=".cache").result("a.py")
    assert res.values == {"n": 1} and "data/" in res.reads, res.stderr
    (root / "data/one.csv").write_text("changed", encoding="utf-8")   # a listing is the names, not the contents
    assert Runner(root, cache_dir=".cache").result("a.py").cached
    (root / "data/two.csv").write_text("2", encoding="utf-8")
    res = Runner(root, cache_dir=".cache").result("a.py")
    assert (res.cached, res.values) == (False, {"n": 2})
    (root / "data/one.csv").rename(root / "data/three.csv")            # a rename changes the names too
    assert Runner(root, cache_dir=".cache").result("a.py").cached is False


def test_a_listing_outside_the_project_is_keyed_and_the_import_systems_own_listings_are_not(tmp_path: Path) -> None:
    root = project(tmp_path / "book", a="""
        import os, sys
        from _helper import K
        from numbook.check import value
        value("n", K + len(os.listdir(sys.argv[0].rsplit("/", 3)[0] + "/outside")))
    """)
    (root / "checks/_helper.py").write_text("K = 10\n", encoding="utf-8")
    (tmp_path / "outside").mkdir()
    res = Runner(root, cache_dir=".cache").result("a.py")
    assert res.values == {"n": 10} and f"{tmp_path}/outside/" in res.reads, res.stderr
    assert not any(r.startswith("checks") and r.endswith("/") for r in res.reads)   # the imports' folder
    (root / "checks/other.py").write_text("x = 1\n", encoding="utf-8")           # another check: no rerun
    assert Runner(root, cache_dir=".cache").result("a.py").cached
    (tmp_path / "outside/new.txt").write_text("x", encoding="utf-8")
    res = Runner(root, cache_dir=".cache").result("a.py")
    assert (res.cached, res.values) == (False, {"n": 11})


def test_reads_of_the_system_and_of_installed_libraries_are_not_keyed(tmp_path: Path) -> None:
    root = project(tmp_path, a="""
        import os, numpy
        from numbook.check import value
        open("/proc/self/status").read(); open("/etc/hostname").read() if os.path.exists("/etc/hostname") else 0
        os.listdir("/proc/self"); os.listdir(os.path.dirname(numpy.__file__)); open(numpy.__file__).read()
        value("n", 1)
    """)
    res = Runner(root, cache_dir=".cache").result("a.py")
    assert res.status == "ok", res.stderr
    assert sorted(res.reads) == ["checks/a.py"]


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")   # a zombie has ended; only its parent's reaping is left


DETACHED = """
    # numbook: timeout=2
    {imports}
    import subprocess, sys, time
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=True)
    print(child.pid, flush=True)   # the child holds the check's output open, in a session of its own
    time.sleep({sleep})
"""
DOUBLE_FORK = """
    # numbook: timeout=2
    {imports}
    import os, sys, time
    r, w = os.pipe()
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            os.write(w, str(os.getpid()).encode()); os.close(w)
            time.sleep(600)
        os._exit(0)
    os.close(w)
    print(os.read(r, 100).decode(), flush=True)
    time.sleep({sleep})
"""


@pytest.mark.parametrize("imports", ["", "import numpy"], ids=["fresh", "forked"])
@pytest.mark.parametrize(("source", "sleep", "status"),
                         [(DETACHED, 600, "timeout"), (DETACHED, 0, "error"), (DOUBLE_FORK, 600, "timeout")],
                         ids=["detached-timeout", "detached-ends", "double-fork-timeout"])
def test_a_child_that_left_the_checks_session_neither_delays_the_result_nor_outlives_it(
        tmp_path: Path, imports: str, source: str, sleep: int, status: str) -> None:
    root = project(tmp_path, a=source.format(imports=imports, sleep=sleep))
    started = time.monotonic()
    res = Runner(root, cache_dir=None).result("a.py")
    assert time.monotonic() - started < 20, "the runner waited for the detached child"
    assert res.status == status, res.stderr   # "error": the check ended without its values
    pid = int(res.stdout.split()[0])
    deadline = time.monotonic() + 5
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(pid), "the detached child outlived its check"


def test_a_checks_output_is_cut_at_a_megabyte_with_a_note(tmp_path: Path) -> None:
    root = project(tmp_path, a="""
        import sys
        sys.stdout.write(("x" * 99 + "\\n") * 30_000)
        sys.stderr.write(("y" * 99 + "\\n") * 30_000)
        raise ValueError("the last line")
    """)
    res = Runner(root, cache_dir=None).result("a.py")
    assert res.stdout.endswith("x" * 99 + "\n… output cut at 1 MB of 3 MB\n")
    assert len(res.stdout.encode()) < 1_000_100
    first, *_, last = res.stderr.splitlines()
    assert first.startswith("… error output cut to its last 1 MB of 3 MB")
    assert last == "ValueError: the last line" and len(res.stderr.encode()) < 1_000_100
    small = Runner(project(tmp_path / "small", a="print('µs')\n"), cache_dir=None).result("a.py")
    assert small.stdout == "µs\n"


def test_a_check_that_failed_on_a_missing_module_runs_again_when_the_module_appears(tmp_path: Path) -> None:
    root = project(tmp_path, a="from _helper import K\nfrom numbook.check import value\nvalue('k', K)\n")
    res = Runner(root, cache_dir=".cache").result("a.py")
    assert res.status == "error" and "checks/" in res.reads, res.stderr   # the folders it was looked for in
    assert Runner(root, cache_dir=".cache").result("a.py").cached
    (root / "checks/_helper.py").write_text("K = 1\n", encoding="utf-8")
    assert Runner(root, cache_dir=".cache").result("a.py").values == {"k": 1}


THROUGH_A_HELPER = """\
from numbook.check import estimate, sanity, value

def rec(name, x):
    value(name, x, fixed="a property of the layout")

def main():
    rec("first", 1)
    rec('second', 2)
    name = "built"
    rec(name, 3)
    estimate("ms", [1.0, 1.2, 1.1, 1.3, 1.0], measured="wall time", n=5, unit="ms")
    sanity("positive", True)

main()
"""


def test_a_value_recorded_through_a_helper_is_located_at_the_line_that_names_it(tmp_path: Path) -> None:
    """The line an error or ``numbook run`` names is the call site that spells the value's name, not the helper's
    line every value would share; a name the check builds at run time falls back to the innermost line."""
    root = project(tmp_path, rec=THROUGH_A_HELPER)
    res = Runner(root, cache_dir=None).result("rec.py")
    assert res.status == "ok", res.stderr
    assert (res.lines["first"], res.lines["second"], res.lines["built"]) == (7, 8, 4)
    assert (res.lines["ms"], res.lines["positive"]) == (11, 12)


def test_a_value_recorded_by_a_helper_module_beside_the_check_is_located_at_the_checks_call(tmp_path: Path) -> None:
    """A shared helper in the checks folder (``checks/_shared.py``) records values and a sanity for the check that
    calls it: their lines are the check's line that called into it, never a line of the helper's file."""
    shared = ("from numbook.check import sanity, value\n\n\n"
              "def record(x):\n"
              "    value('from_helper', x)\n"
              "    sanity('helper_ok', x > 0)\n")
    root = project(tmp_path, a="from _shared import record\nfrom numbook.check import value\n\n"
                               "value('own', 1)\n\n\nrecord(2)\n", _shared=shared)
    res = Runner(root, cache_dir=None).result("a.py")
    assert res.status == "ok", res.stderr
    assert (res.lines["own"], res.lines["from_helper"], res.lines["helper_ok"]) == (4, 7, 7)
