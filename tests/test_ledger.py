"""The ledger of published numbers: every build writes numbers.json, and numbook diff compares two."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

TINY = Path(__file__).parent / "fixtures" / "tiny"


def _build(root: Path, out: str) -> Path:
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(root / out)], cwd=root,
                          capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr
    return root / out / "numbers.json"


def _diff(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "numbook.cli", "diff", *args], capture_output=True, text=True,
                          timeout=60, check=False)


@pytest.mark.slow
def test_every_build_writes_its_ledger_and_diff_names_what_changed(tmp_path: Path) -> None:
    root = tmp_path / "tiny"
    shutil.copytree(TINY, root)
    old = _build(root, "site-old")
    data = json.loads(old.read_text(encoding="utf-8"))
    first = next(c for c in data["claims"] if c["name"] == "fp32_mb")
    assert first["page"] == "problems/I.1.A01.md" and first["written"] == "65.5" and first["value"] == "65.536"
    assert first["check"] == "checks/i1_a01_embedding.py" and first["device"].startswith("cpu")
    assert set(first["versions"]) == {"Python", "torch", "numpy"} and first["ran_at"].endswith("UTC")

    same = _diff(str(old), str(old), "--fail-on-change")
    assert (same.returncode, same.stdout.strip()) == (0, "numbook diff: no published number changed")

    check = root / "checks" / "i1_a01_embedding.py"
    check.write_text(check.read_text(encoding="utf-8").replace('given("d", 512)', 'given("d", 520)'), encoding="utf-8")
    page = root / "problems" / "I.1.A01.md"
    text = page.read_text(encoding="utf-8")
    for a, b in [("[[512|d]]", "[[520|d]]"), ("[[65.5|fp32_mb]]", "[[66.6|fp32_mb]]"),
                 ("[[32.8|bf16_mb]]", "[[33.3|bf16_mb]]"), ("[[16,384,000|numel]]", "[[16,640,000|numel]]"),
                 ("[[(32000, 512)|shape]]", "[[(32000, 520)|shape]]")]:
        text = text.replace(a, b)
    page.write_text(text, encoding="utf-8")
    new = _build(root, "site-new")
    changed = _diff(str(old), str(new), "--fail-on-change")
    assert changed.returncode == 1
    lines = changed.stdout.splitlines()
    assert lines[0] == "problems/I.1.A01.md:"
    assert "  ~ fp32_mb (line 32): computed 65.536 → 66.56; written 65.5 → 66.6" in lines
    assert lines[-1].startswith("numbook diff: ") and lines[-1].endswith("published numbers changed on 1 page")
    assert _diff(str(old), str(new)).returncode == 0      # without --fail-on-change it only reports


def test_diff_refuses_a_file_that_is_no_ledger(tmp_path: Path) -> None:
    bad = tmp_path / "x.json"
    bad.write_text("{}", encoding="utf-8")
    proc = _diff(str(bad), str(bad))
    assert proc.returncode == 2
    assert proc.stderr.strip() == f"numbook diff: {bad} is not a numbook ledger (format 1)"


def _ledger(path: Path, claims: list[dict[str, object]]) -> Path:
    base = {"page": "problems/I.2.A05.md", "check": "checks/t.py", "device": "cpu", "ran_at": "2026-12-03 05:00 UTC",
            "ok": True, "versions": {"torch": "2.13.0+cpu"}}
    path.write_text(json.dumps({"numbook_ledger": 1, "built": "2026-12-03 05:00 UTC",
                                "claims": [{**base, **c} for c in claims]}), encoding="utf-8")
    return path


def test_diff_tells_a_measured_value_that_moved_from_a_computed_one(tmp_path: Path) -> None:
    """A timing moves between any two runs; a computed number that moves is news. The diff says which is which,
    and --ignore-measured leaves out the timings whose written form held (a ledger without the field still reads)."""
    old = _ledger(tmp_path / "old.json", [
        {"line": 61, "name": "bw_ratio", "written": "< 3", "value": "2.28", "measured": "timed on this machine"},
        {"line": 62, "name": "ridge", "written": "295", "value": "295.2"}])
    new = _ledger(tmp_path / "new.json", [
        {"line": 61, "name": "bw_ratio", "written": "< 3", "value": "0.87", "measured": "timed on this machine",
         "versions": {"torch": "2.14.1"}},
        {"line": 62, "name": "ridge", "written": "295", "value": "295.4", "versions": {"torch": "2.14.1"}}])
    both = _diff(str(old), str(new), "--fail-on-change")
    assert both.returncode == 1
    assert both.stdout.splitlines() == [
        "problems/I.2.A05.md:",
        "  ~ bw_ratio (line 61): computed 2.28 → 0.87 (measured: timed on this machine); "
        "with torch 2.13.0+cpu → 2.14.1",
        "  ~ ridge (line 62): computed 295.2 → 295.4; with torch 2.13.0+cpu → 2.14.1",
        "numbook diff: 2 published numbers changed on 1 page (1 of them a measured value, which moves between any "
        "two runs; 1 computed)"]
    only = _diff(str(old), str(new), "--ignore-measured", "--fail-on-change")
    assert only.returncode == 1 and "bw_ratio" not in only.stdout and "ridge" in only.stdout
    timings = _ledger(tmp_path / "t.json", [
        {"line": 61, "name": "bw_ratio", "written": "< 3", "value": "0.5", "measured": "timed on this machine"},
        {"line": 62, "name": "ridge", "written": "295", "value": "295.2"}])
    quiet = _diff(str(old), str(timings), "--ignore-measured", "--fail-on-change")
    assert (quiet.returncode, quiet.stdout.strip()) == (0, "numbook diff: no published number changed")


def test_a_measured_value_with_an_interval_carries_it_into_the_ledger(tmp_path: Path) -> None:
    from _results import Fixed
    from numbook.core.ledger import build_ledger, read_ledger, write_ledger
    from numbook.core.result import CheckResult
    from numbook.core.verify import PageContext, verify_page

    res = CheckResult("checks/serve.py", "ok", values={"p99_ms": 41.23, "steps": 12}, units={"p99_ms": "ms"},
                      measured={"p99_ms": "served on this machine"}, versions={"Python": "3.11.9"},
                      uncertainty={"p99_ms": {"n": 480, "repeats": 5, "repeated": "seeds", "lo": 37.21, "hi": 45.93,
                                              "level": 0.95, "kind": "95% t interval over 5 seeds"}})
    report = verify_page("The p99 is [[41|p99_ms]] ms over [[12|steps]] steps.",
                         PageContext("problems/X.md", "serve.py"), Fixed(lambda name: res))
    path = tmp_path / "numbers.json"
    write_ledger(path, build_ledger([report]))
    p99, steps = json.loads(path.read_text(encoding="utf-8"))["claims"]
    assert {k: p99[k] for k in ("name", "written", "value", "measured", "n", "repeats", "lo", "hi", "kind")} == {
        "name": "p99_ms", "written": "41", "value": "41.23", "measured": "served on this machine", "n": 480,
        "repeats": 5, "lo": "37.21", "hi": "45.93", "kind": "95% t interval over 5 seeds"}
    assert not {"n", "repeats", "lo", "hi", "kind"} & set(steps)   # a computed value carries no interval
    assert read_ledger(path) == build_ledger([report])


def test_diff_tells_a_measured_value_whose_interval_moved_from_noise(tmp_path: Path) -> None:
    """Where both builds recorded an interval, overlapping intervals are the measurement's spread (left out by
    --ignore-measured) and disjoint ones a measured value that moved (kept)."""
    t5 = {"measured": "served on this machine", "n": 480, "repeats": 5, "kind": "95% t interval over 5 seeds"}
    old = _ledger(tmp_path / "old.json", [
        {"line": 30, "name": "p99_ms", "written": "under 50", "value": "41.23", "lo": "37.21", "hi": "45.93", **t5},
        {"line": 31, "name": "p50_ms", "written": "under 30", "value": "12.5", "lo": "11.9", "hi": "13.1", **t5}])
    new = _ledger(tmp_path / "new.json", [
        {"line": 30, "name": "p99_ms", "written": "under 50", "value": "43.0", "lo": "39.5", "hi": "46.6", **t5},
        {"line": 31, "name": "p50_ms", "written": "under 30", "value": "19.2", "lo": "18.4", "hi": "20.0", **t5}])
    both = _diff(str(old), str(new), "--fail-on-change")
    assert both.stdout.splitlines() == [
        "problems/I.2.A05.md:",
        "  ~ p50_ms (line 31): computed 12.5 → 19.2 (measured: served on this machine); interval 11.9–13.1 → "
        "18.4–20.0 (the intervals do not overlap: the measured value moved)",
        "  ~ p99_ms (line 30): computed 41.23 → 43.0 (measured: served on this machine); interval 37.21–45.93 → "
        "39.5–46.6 (the intervals overlap: within the measurement's spread)",
        "numbook diff: 2 published numbers changed on 1 page (1 of them a measured value, which moves between any "
        "two runs; 1 measured value whose intervals no longer overlap; 0 computed)"]
    only = _diff(str(old), str(new), "--ignore-measured", "--fail-on-change")
    assert only.returncode == 1 and "p99_ms" not in only.stdout and "p50_ms" in only.stdout
    assert only.stdout.splitlines()[-1] == ("numbook diff: 1 published number changed on 1 page (1 measured value "
                                            "whose intervals no longer overlap; 0 computed)")


def test_diff_never_leaves_out_a_measured_value_whose_claim_now_fails(tmp_path: Path) -> None:
    """Overlapping intervals are the measurement's spread, unless the claim fails in the new build: then the diff
    keeps it, with --ignore-measured too, and says it now fails; interval ends show at 4 significant digits."""
    t5 = {"measured": "served on this machine", "n": 480, "repeats": 5, "kind": "95% t interval over 5 seeds"}
    old = _ledger(tmp_path / "old.json", [
        {"line": 30, "name": "p99_ms", "written": "under 45", "value": "41.2", "lo": "38.61775678523838",
         "hi": "43.78224321476163", **t5}])
    new = _ledger(tmp_path / "new.json", [
        {"line": 30, "name": "p99_ms", "written": "under 45", "value": "43.0", "lo": "39.52", "hi": "46.48",
         **t5, "ok": False}])
    both = _diff(str(old), str(new))
    assert both.stdout.splitlines() == [
        "problems/I.2.A05.md:",
        "  ~ p99_ms (line 30): computed 41.2 → 43.0 (measured: served on this machine); interval 38.62–43.78 → "
        "39.52–46.48 (the intervals overlap: within the measurement's spread); now fails verification",
        "numbook diff: 1 published number changed on 1 page (1 claim that fails verification)"]
    only = _diff(str(old), str(new), "--ignore-measured", "--fail-on-change")
    assert only.returncode == 1 and only.stdout == both.stdout
    assert json.loads(new.read_text(encoding="utf-8"))["claims"][0]["lo"] == "39.52"   # the ledger is untouched
    still = _ledger(tmp_path / "same.json", [
        {"line": 30, "name": "p99_ms", "written": "under 45", "value": "41.2", "lo": "38.61775678523838",
         "hi": "43.78224321476163", **t5, "ok": False}])
    assert _diff(str(old), str(still)).stdout.splitlines()[1] == "  ~ p99_ms (line 30): now fails verification"
