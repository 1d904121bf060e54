"""Shards: verify --shard K/N runs one of N shards balanced by the record of run times and writes a bundle,
numbook merge combines them, and the build then runs no check."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from numbook.cli import main
from numbook.core.result import read_header
from numbook.run.runner import plan_shards, read_runtimes, shard, write_runtimes
from numbook.run.shards import RuntimesError, plan, round2, weight

TINY = Path(__file__).parent / "fixtures" / "tiny"
A01, A02 = "checks/i1_a01_embedding.py", "checks/i1_a02_reuse.py"


def test_without_a_record_every_check_weighs_the_same_and_the_shards_are_dealt_round_robin() -> None:
    checks = [f"c{i}.py" for i in range(7)]
    parts = [shard(list(reversed(checks)), k, 3) for k in (1, 2, 3)]
    assert parts == [["c0.py", "c3.py", "c6.py"], ["c1.py", "c4.py"], ["c2.py", "c5.py"]]
    with pytest.raises(ValueError, match="K must be between 1 and N"):
        shard(checks, 4, 3)
    with pytest.raises(ValueError, match="N is 0: there must be at least one shard"):
        plan_shards(checks, 0)


NAMES = st.lists(st.text("abcdefgh", min_size=1, max_size=3), max_size=40)
WEIGHTS = st.dictionaries(st.text("abcdefghij", min_size=1, max_size=3),
                          st.floats(0, 1e4, allow_nan=False, allow_infinity=False), max_size=40)


@settings(max_examples=300, deadline=None)
@given(NAMES, WEIGHTS, st.integers(1, 6))
def test_the_shards_are_a_deterministic_partition_within_one_check_of_the_mean(
        checks: list[str], record: dict[str, float], n: int) -> None:
    p = plan(checks, n, record)
    assert len(p.shards) == n
    assert sorted(c for s in p.shards for c in s) == sorted(set(checks))       # each check in exactly one shard
    assert all(s == sorted(s) for s in p.shards)
    assert plan(list(reversed(checks)) + checks, n, dict(reversed(record.items()))) == p   # order and repeats
    assert p.weights == pytest.approx([sum(p.of[c] for c in s) for s in p.shards])   # (float sums: their order)
    if checks:   # greedy to the lightest shard: the heaviest is over the mean by at most one check
        assert max(p.weights) <= p.total / n + max(p.of.values()) + 1e-6


def test_longest_first_balances_two_long_checks_that_round_robin_puts_together() -> None:
    record = {"a": 10.0, "b": 1.0, "c": 9.0, "d": 1.0, "e": 1.0, "f": 1.0, "g": 1.0, "h": 1.0}   # 25 in all
    p = plan(record, 2, record)
    robin = [["a", "c", "e", "g"], ["b", "d", "f", "h"]]              # by name: 21 and 4, 21 / 12.5 = 1.68
    assert shard(record, 1, 2, None) == robin[0]
    assert p.balance_of(robin) == pytest.approx(1.68)
    # by hand: a 10 -> 1; c 9 -> 2; b -> 2 (10, 10); d -> 1 (tie: the lower); e -> 2; f -> 1; g -> 2; h -> 1
    assert p.shards == [["a", "d", "f", "h"], ["b", "c", "e", "g"]]
    assert p.weights == [13.0, 12.0]
    assert p.balance == pytest.approx(13 / 12.5)                          # 1.04


def test_an_unrecorded_check_weighs_the_median_and_a_stale_entry_is_ignored() -> None:
    p = plan(["a", "b", "c", "d", "e"], 2, {"a": 4.0, "b": 2.0, "c": 1.0, "gone": 100.0})
    assert (p.unrecorded, p.guess) == (["d", "e"], 2.0)
    assert p.of == {"a": 4.0, "b": 2.0, "c": 1.0, "d": 2.0, "e": 2.0}
    # a 4 -> 1; b 2 -> 2; d 2 -> 2 (4, 4); e 2 -> 1 (the tie's lower); c 1 -> 2
    assert p.shards == [["a", "e"], ["b", "c", "d"]] and p.weights == [6.0, 5.0]
    only_gone = plan(["a", "b"], 2, {"gone": 100.0})
    assert (only_gone.unrecorded, only_gone.guess, only_gone.weights) == (["a", "b"], 1.0, [1.0, 1.0])


def test_a_weight_is_the_core_seconds_a_check_holds_of_a_four_core_machine() -> None:
    assert weight(2.0, read_header("x = 1\n")) == 2.0
    assert weight(2.0, read_header("# numbook: processes=2\n")) == 4.0
    assert weight(2.0, read_header("# numbook: processes=8\n")) == 8.0       # at most the machine's 4 cores
    assert weight(2.0, read_header("# numbook: alone\n")) == 8.0
    assert [round2(s) for s in (123.4, 12.34, 0.01234, 0.0)] == [120.0, 12.0, 0.012, 0.01]


def test_the_record_is_written_sorted_at_two_digits_and_read_back(tmp_path: Path) -> None:
    path = tmp_path / "runtimes.json"
    assert read_runtimes(path) == {}                                        # no record: every check unrecorded
    assert write_runtimes(path, {"checks/b.py": 0.123456, "checks/a.py": 1234.5}) == {
        "checks/a.py": 1200.0, "checks/b.py": 0.12}
    data = json.loads(path.read_text(encoding="utf-8"))
    assert list(data) == ["version", "note", "seconds"] and data["version"] == 1
    assert list(data["seconds"]) == ["checks/a.py", "checks/b.py"]
    assert read_runtimes(path) == {"checks/a.py": 1200.0, "checks/b.py": 0.12}


@pytest.mark.parametrize(("text", "message"), [
    ('{"version": 1,\n "seconds": {"a": 1,}}', "checks/runtimes.json:2: not JSON: Expecting property name "
                                              "enclosed in double quotes (column 21)"),
    ("[1, 2]", "checks/runtimes.json: must be a JSON object with \"version\" and \"seconds\", not list"),
    ('{"version": 2, "seconds": {}}', "checks/runtimes.json: version is 2; this numbook reads version 1: write it "
                                      "again with `numbook verify --record-times`"),
    ('{"version": 1, "times": {}}', "checks/runtimes.json: unknown key 'times': the record holds version, note "
                                    "and seconds"),
    ('{"version": 1, "seconds": [1]}', "checks/runtimes.json: \"seconds\" must be an object of check -> seconds, "
                                       "not list"),
    ('{"version": 1, "seconds": {"checks/a.py": "fast"}}', "checks/runtimes.json: seconds['checks/a.py'] is "
                                                           "\"fast\": write a number of seconds, 0 or more"),
    ('{"version": 1, "seconds": {"checks/a.py": -1}}', "checks/runtimes.json: seconds['checks/a.py'] is -1: write "
                                                       "a number of seconds, 0 or more"),
    ('{"version": 1, "seconds": {"checks/a.py": true}}', "checks/runtimes.json: seconds['checks/a.py'] is true: "
                                                         "write a number of seconds, 0 or more"),
])
def test_a_malformed_record_is_an_error_naming_the_file(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "runtimes.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(RuntimesError) as exc:
        read_runtimes(path, "checks/runtimes.json")
    assert str(exc.value) == message


# -- the CLI on the tiny book ----------------------------------------------------------------------
@pytest.fixture
def tiny(tmp_path: Path) -> Path:
    return _copy(tmp_path, "tiny")


def test_record_times_writes_each_ok_checks_time_from_a_run_or_the_cache(
        tiny: Path, capsys: pytest.CaptureFixture[str]) -> None:
    record = tiny / "checks/runtimes.json"
    record.write_text(json.dumps({"version": 1, "seconds": {"checks/gone.py": 5}}), encoding="utf-8")
    assert main(["verify", "--root", str(tiny), "--record-times"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert re.fullmatch(r"record: wrote checks/runtimes\.json: 2 checks, [\d.]+ core-s in all; heaviest "
                        r"i1_a0[12]_\w+ [\d.e-]+, i1_a0[12]_\w+ [\d.e-]+", out[-2]), out[-2]
    first = record.read_text(encoding="utf-8")
    seconds = json.loads(first)["seconds"]
    assert list(seconds) == [A01, A02]                                      # the gone check's entry is dropped
    assert all(v == round2(v) > 0 for v in seconds.values())
    cache = {json.loads(f.read_text(encoding="utf-8"))["check"]: json.loads(f.read_text(encoding="utf-8"))
             for f in (tiny / ".cache/numbook").glob("*.json")}
    assert seconds == {c: round2(cache[c]["elapsed_s"]) for c in (A01, A02)}
    assert main(["verify", "--root", str(tiny), "--record-times"]) == 0     # from the cache: the times it ran in
    assert " cache " in capsys.readouterr().out
    assert record.read_text(encoding="utf-8") == first
    check = tiny / A02
    check.write_text(check.read_text(encoding="utf-8") + "raise SystemExit(3)\n", encoding="utf-8")
    assert main(["verify", "--root", str(tiny), "--record-times"]) == 1
    assert "(1 failed now and kept their earlier time)" in capsys.readouterr().out
    assert record.read_text(encoding="utf-8") == first
    assert main(["verify", "--root", str(tiny), "--record-times", "--shard", "1/2"]) == 2
    assert capsys.readouterr().err == ("numbook verify: --record-times needs every check's plain run: leave out "
                                       "--shard\n")


def test_shard_prints_its_plan_and_shards_prints_them_all(tiny: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_runtimes(tiny / "checks/runtimes.json", {A01: 3.0, "checks/gone.py": 50.0})
    assert main(["verify", "--root", str(tiny), "--shard", "2/2", "--bundle", str(tiny / "b.json")]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out == ["shard 2/2: 1 of 2 checks, 3.0 core-s recorded (heaviest shard 3.0 core-s, total 6.0 core-s; "
                   "1 unrecorded, weighed 3 core-s each)",
                   f"shard 2/2: 1 of 2 checks, 0 failed; wrote {tiny / 'b.json'}"]
    assert [r["check"] for r in json.loads((tiny / "b.json").read_text(encoding="utf-8"))["entries"].values()] == [A02]
    assert main(["shards", "2", "--root", str(tiny), "--list"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "shard 1/2: 1 checks, 3.0 core-s", f"  {A01} 3",
        "shard 2/2: 1 checks, 3.0 core-s", f"  {A02} 3 (unrecorded)",
        "2 shards of 2 checks by checks/runtimes.json: heaviest 3.0 core-s, 1.00x the mean 3.0 (round-robin by "
        "name: 1.00x); 1 unrecorded, weighed 3 core-s each"]
    assert main(["shards", "2", "--root", str(tiny), "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {
        "n": 2, "record": "checks/runtimes.json", "unrecorded": [A02], "guess": 3.0,
        "shards": [{"checks": [A01], "seconds": 3.0}, {"checks": [A02], "seconds": 3.0}]}


def test_a_malformed_record_stops_the_shard_with_exit_2(tiny: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tiny / "checks/runtimes.json").write_text('{"version": 1, "seconds": {"checks/a.py": null}}', encoding="utf-8")
    assert main(["verify", "--root", str(tiny), "--shard", "1/2"]) == 2
    assert capsys.readouterr().err == ("numbook verify: checks/runtimes.json: seconds['checks/a.py'] is null: write "
                                       "a number of seconds, 0 or more\n")
    assert main(["shards", "2", "--root", str(tiny)]) == 2
    assert capsys.readouterr().err.startswith("numbook shards: checks/runtimes.json: seconds['checks/a.py'] is null")
    assert not list(tiny.glob("numbook-shard-*"))


def test_a_check_named_only_by_a_claim_is_in_a_shard(tiny: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tiny / "checks/i1_a09_other.py").write_text("from numbook.check import value\nvalue('n', 3)\n",
                                                 encoding="utf-8")
    page = tiny / "problems/I.1.A02.md"
    page.write_text(page.read_text(encoding="utf-8").replace("## Find", "And [[3|i1_a09_other:n]].\n\n## Find"),
                    encoding="utf-8")
    assert main(["shards", "1", "--root", str(tiny), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["shards"][0]["checks"] == [A01, A02, "checks/i1_a09_other.py"]
    (tiny / "checks/i1_a09_shown.py").write_text("print(1)\n", encoding="utf-8")   # on a page without front matter
    (tiny / "docs/guide.md").write_text('# Guide\n\n```check path="i1_a09_shown.py"\n```\n', encoding="utf-8")
    assert main(["shards", "1", "--root", str(tiny), "--json"]) == 0
    assert "checks/i1_a09_shown.py" in json.loads(capsys.readouterr().out)["shards"][0]["checks"]


def _copy(tmp_path: Path, name: str) -> Path:
    root = tmp_path / name
    shutil.copytree(TINY, root)
    cfg = root / "mkdocs.yml"
    cfg.write_text(cfg.read_text(encoding="utf-8").replace('cache_dir: ""', "cache_dir: .cache/numbook"),
                   encoding="utf-8")
    return root


def _run(root: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", *args], cwd=root, capture_output=True, text=True, timeout=300,
                          check=False, env=dict(os.environ, NO_MKDOCS_2_WARNING="1", **env))


@pytest.mark.slow
def test_two_shards_merged_build_the_book_without_running_a_check(tmp_path: Path) -> None:
    a, b = _copy(tmp_path, "runner-a"), _copy(tmp_path, "runner-b")
    for k in (1, 2):
        proc = _run(a, "numbook.cli", "verify", "--shard", f"{k}/2", "--bundle", str(tmp_path / f"s{k}.json"))
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.strip().endswith(f"wrote {tmp_path / f's{k}.json'}")
    refused = _run(b, "mkdocs", "build", "--strict", NUMBOOK_CACHED_ONLY="1")
    assert refused.returncode == 1
    assert "has no result in the merged results and NUMBOOK_CACHED_ONLY forbids running it" in refused.stderr
    merged = _run(b, "numbook.cli", "merge", str(tmp_path / "s1.json"), str(tmp_path / "s2.json"))
    assert merged.returncode == 0 and merged.stdout.startswith("merged 2 results from 2 bundles")
    built = _run(b, "mkdocs", "build", "--strict", NUMBOOK_CACHED_ONLY="1")
    assert built.returncode == 0, built.stderr
    assert "numbook: 2 checks (0 ran, 2 from cache)" in built.stderr
