"""GPU checks on machines without a GPU: frozen results, their label, and the guards around them.

No test here needs a GPU. Where a test needs a frozen result it makes one with ``freeze_book`` while
``gpu_info``, the torch probe and the library versions are patched to report an "NVIDIA H200" with a
CUDA torch: the check itself runs on this CPU. That file is a TEST FIXTURE ONLY, never a GPU figure,
and the patch lives in this test process alone; every
build below runs in a subprocess with no such patch, no NUMBOOK_DEVICE (unless a test sets one) and
no real nvidia-smi on its PATH.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import numbook.run.freeze as freeze
import numbook.run.frozen as frozen
import numbook.run.machine as machine
from _project import project
from numbook.cli import freeze_book
from numbook.core.result import FROZEN_HOW
from numbook.core.verify import failure_message
from numbook.html.extension import _FROZEN_TITLE
from numbook.run.machine import cpu_name, detect_device
from numbook.run.runner import CheckResult, Runner

ROOT = Path(__file__).resolve().parent.parent
TINY = Path(__file__).parent / "fixtures" / "tiny"
A01 = "problems/I.1.A01.md"
CHECK = "checks/i1_a01_embedding.py"
FROZEN = "checks/frozen/i1_a01_embedding.json"
CPU = cpu_name()
FIX = "run `nox -s freeze` on a GPU machine"
FAKE_GPU, FAKE_DRIVER = "NVIDIA H200", "550.54.15"     # the fixture's pretend GPU
FAKE_SMI = f"""#!/bin/sh
case "$1" in
  -L) echo "GPU 0: {FAKE_GPU} (UUID: GPU-00000000-0000-0000-0000-000000000000)" ;;
  *) echo "{FAKE_GPU}, {FAKE_DRIVER}" ;;
esac
"""


# -- helpers -------------------------------------------------------------------------------------
def git_commit(root: Path) -> None:
    """Make ``root`` a git checkout with one commit: a frozen file records the commit it was made at."""
    for cmd in (["init", "-q"], ["add", "-A"], ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "book"]):
        subprocess.run(["git", *cmd], cwd=root, check=True, capture_output=True, timeout=60)


def gpu_book(tmp_path: Path) -> Path:
    """A copy of the tiny book whose first check declares ``requires=cuda`` and measures the width of an fp32
    element through ``measurement()`` (the one number a replay takes from the frozen file); a git checkout."""
    root = tmp_path / "tiny"
    shutil.copytree(TINY, root)
    path = root / CHECK
    head, rest = path.read_text(encoding="utf-8").split("\n", 1)
    rest = rest.replace("from numbook.check import given, sanity, value",
                        "from numbook.check import given, measurement, sanity, value")
    rest = rest.replace('FP32 = array("f").itemsize', 'FP32 = measurement("fp32_bytes", lambda: array("f").itemsize)')
    assert "measurement(" in rest
    path.write_text(f"{head}\n# numbook: requires=cuda\n{rest}", encoding="utf-8")
    git_commit(root)
    return root


def env(tmp_path: Path, *, fake_smi: bool = False, device: str | None = None) -> dict[str, str]:
    """An environment with no real nvidia-smi on PATH, optionally a fake one and a NUMBOOK_DEVICE."""
    out = {k: v for k, v in os.environ.items() if k != "NUMBOOK_DEVICE"}
    out["NO_MKDOCS_2_WARNING"] = "1"
    paths = [str(Path(sys.executable).parent)]
    if fake_smi:
        fake = tmp_path / "fakebin"
        fake.mkdir(exist_ok=True)
        (fake / "nvidia-smi").write_text(FAKE_SMI, encoding="utf-8")
        (fake / "nvidia-smi").chmod(0o755)
        paths.insert(0, str(fake))
    out["PATH"] = os.pathsep.join(paths)
    if shutil.which("node"):   # the build draws its math with Node, which lives beside nvidia-smi on many machines
        out["NUMBOOK_NODE"] = str(shutil.which("node"))
    if device:
        out["NUMBOOK_DEVICE"] = device
    return out


def build(root: Path, environ: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(root / "site")],
                          cwd=root, capture_output=True, text=True, env=environ, timeout=300, check=False)


def warnings(proc: subprocess.CompletedProcess[str]) -> list[str]:
    return [ln.split("-  ", 1)[1] for ln in proc.stderr.splitlines() if ln.startswith("WARNING")]


def page(root: Path) -> str:
    return (root / "site/problems/I.1.A01/index.html").read_text(encoding="utf-8")


def source_hash(root: Path) -> str:
    return Runner(root, cache_dir=None).key(root / CHECK)[1]


def pretend_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    """TEST FIXTURE ONLY: make this process believe an H200 with a CUDA torch is here."""
    monkeypatch.setattr(machine, "gpu_info", lambda: machine.GpuInfo(FAKE_GPU, FAKE_DRIVER))
    monkeypatch.setattr(machine, "_torch_cuda", lambda python: (True, "2.13.0+cu128"))
    monkeypatch.setattr(machine, "versions", lambda: {"Python": "3.11.9", "torch": "2.13.0+cu128",
                                                      "numpy": "2.3.4"})


def freeze_fixture(root: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, object]:
    """Write checks/frozen/i1_a01_embedding.json from a CPU run labelled as an H200 (FIXTURE)."""
    with monkeypatch.context() as m:
        pretend_gpu(m)
        written, faults = freeze_book(root)
    assert (written, faults) == ([root / FROZEN], [])
    data = json.loads((root / FROZEN).read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data


def expected_stamp(data: dict[str, object]) -> re.Pattern[str]:
    """The stamp of a replayed check: the GPU run's device, driver, versions and date; this build's run time."""
    versions = data["versions"]
    assert isinstance(versions, dict)
    vers = " · ".join(f"{k} {v}" for k, v in versions.items())
    head = (f'<p class="nb-stamp nb-stamp-frozen" title="{_FROZEN_TITLE}"><span class="nb-stamp-label">'
            f"Frozen GPU measurements</span> cuda: {FAKE_GPU} · driver {FAKE_DRIVER} · {vers} · ")
    return re.compile(re.escape(head)
                      + r"\d+\.\d\d s \(\d+\.\d\d s CPU\) · "
                      + re.escape(f"{data['ran_at']} · source {data['source_hash']} · {FROZEN_HOW}</p>"))


# -- device detection ----------------------------------------------------------------------------
def test_without_nvidia_smi_or_numbook_device_the_device_is_a_cpu(monkeypatch: pytest.MonkeyPatch,
                                                                    tmp_path: Path) -> None:
    monkeypatch.delenv("NUMBOOK_DEVICE", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    assert detect_device().startswith("cpu")
    assert machine.gpu_info() is None
    assert machine.gpu_status(detect_device()) == machine.GpuStatus(False, CPU)


def test_nvidia_smi_names_the_gpu_and_its_driver(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("NUMBOOK_DEVICE", raising=False)
    monkeypatch.setenv("PATH", env(tmp_path, fake_smi=True)["PATH"])
    assert detect_device() == f"cuda: {FAKE_GPU}"
    assert machine.gpu_info() == machine.GpuInfo(FAKE_GPU, FAKE_DRIVER)


# -- the frozen file -----------------------------------------------------------------------------
@pytest.mark.slow  # a real build
def test_freezing_records_device_driver_versions_date_and_source_hash(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    root = gpu_book(tmp_path)
    data = freeze_fixture(root, monkeypatch)
    assert data["numbook_frozen"] == frozen.FORMAT == 2 and data["check"] == CHECK
    assert (data["device"], data["driver"]) == (f"cuda: {FAKE_GPU}", FAKE_DRIVER)
    assert data["versions"] == {"Python": "3.11.9", "torch": "2.13.0+cu128", "numpy": "2.3.4"}
    assert str(data["ran_at"]).endswith(" UTC") and data["source_hash"] == source_hash(root)
    assert data["measurements"] == {"fp32_bytes": {"value": 4}}    # the raw measurement, nothing derived
    assert set(data) == set(frozen._KEYS) and not {"values", "sanity", "figures", "stdout"} & set(data)
    assert data["commit"] == subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True,
                                            check=True).stdout.strip()
    assert data["tool_hash"] == frozen.tool_hash() and data["digest"] == frozen.digest(data)
    assert CHECK in data["reads"]                                             # type: ignore[operator]
    assert not (root / "checks/frozen/i1_a02_reuse.json").exists()          # a CPU check is never frozen


def test_only_a_successful_gpu_run_can_be_frozen(tmp_path: Path) -> None:
    runner = Runner(gpu_book(tmp_path), cache_dir=None)
    book = {"root": runner.root, "checks_dir": runner.checks_dir, "file_hash": runner.file_hash}
    cpu_run = CheckResult(CHECK, "ok", device=CPU, source_hash="0" * 20)
    with pytest.raises(ValueError, match=r"only a successful GPU run can be frozen \(checks/i1_a01_embedding.py: ok"):
        frozen.freeze(cpu_run, **book)
    with pytest.raises(ValueError, match="only a successful GPU run can be frozen"):
        frozen.freeze(dataclasses.replace(cpu_run, status="error", device=f"cuda: {FAKE_GPU}"), **book)
    cpu_torch = dataclasses.replace(cpu_run, device=f"cuda: {FAKE_GPU}", versions={"torch": "2.13.0+cpu"})
    with pytest.raises(ValueError, match=r"ran with torch 2.13.0\+cpu, a CPU build: not a GPU result"):
        frozen.freeze(cpu_torch, **book)
    assert not (runner.checks_dir / "frozen").exists()


def test_the_stamp_of_a_frozen_result_names_driver_and_source_and_a_live_one_is_unchanged() -> None:
    live = CheckResult(CHECK, "ok", device=CPU, versions={"Python": "3.11.9"}, elapsed_s=0.5,
                       ran_at="2026-12-01 10:00 UTC", source_hash="ab" * 10)
    assert live.stamp() == f"{CPU} · Python 3.11.9 · 0.50 s · 2026-12-01 10:00 UTC · ran for this build"
    gpu = dataclasses.replace(live, device=f"cuda: {FAKE_GPU}", driver=FAKE_DRIVER, frozen=True)
    assert gpu.stamp() == (f"cuda: {FAKE_GPU} · driver {FAKE_DRIVER} · Python 3.11.9 · 0.50 s · 2026-12-01 10:00 UTC"
                           f" · source {'ab' * 10} · frozen GPU measurements, derived on this build")


# -- builds without a GPU ------------------------------------------------------------------------
@pytest.mark.slow  # a real build
def test_a_cpu_build_shows_the_frozen_result_labelled_with_its_provenance(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    root = gpu_book(tmp_path)
    data = freeze_fixture(root, monkeypatch)
    proc = build(root, env(tmp_path))
    assert proc.returncode == 0, proc.stderr
    html = page(root)
    assert expected_stamp(data).search(html), html
    assert 'data-claim="fp32_mb"' in html and 'tabindex="0">65.5</span> MB' in html   # claims verified
    assert "Executed" not in html and "ran for this build" not in html and CPU not in html


@pytest.mark.slow  # a real build
def test_a_gpu_check_without_a_frozen_result_fails_the_build(tmp_path: Path) -> None:
    root = gpu_book(tmp_path)
    proc = build(root, env(tmp_path))
    assert proc.returncode == 1
    assert warnings(proc) == [
        f"problems/I.1.A01.md:4: {CHECK} needs cuda and this build has no usable GPU ({CPU}); "
        f"there is no frozen result at {FROZEN}: {FIX}"
    ]


@pytest.mark.slow  # a real build
def test_a_frozen_result_older_than_its_check_fails_the_build(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = gpu_book(tmp_path)
    data = freeze_fixture(root, monkeypatch)
    with (root / CHECK).open("a", encoding="utf-8") as fh:
        fh.write("# an edit after the GPU run\n")
    old, new = data["source_hash"], source_hash(root)
    assert old != new
    proc = build(root, env(tmp_path))
    assert proc.returncode == 1
    assert warnings(proc) == [
        f"problems/I.1.A01.md:4: {CHECK} changed since its frozen GPU result was made: {FROZEN} is for source "
        f"{old}, the check is now {new} (frozen {data['ran_at']} on cuda: {FAKE_GPU}); "
        "refresh it with `nox -s freeze` on a GPU machine"
    ]


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ({"device": CPU, "driver": ""}, f"it was made on {CPU}, and a CPU run is never shown as a GPU figure"),
        ({"numbook_frozen": None}, f"its numbook_frozen is None, not {frozen.FORMAT}"),
        ({"check": "checks/other.py"}, "it is the result of checks/other.py"),
        ({"status": "error"}, "it holds status: a frozen file holds the raw measurements of the GPU run only, and "
                              "every value, sanity and figure is derived from them on each build"),
    ],
    ids=["cpu-result", "no-format", "other-check", "a-result-field"],
)
@pytest.mark.slow  # a real build
def test_a_frozen_file_that_is_no_gpu_result_of_its_check_fails_the_build(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, change: dict[str, object], problem: str) -> None:
    root = gpu_book(tmp_path)
    data = freeze_fixture(root, monkeypatch)
    (root / FROZEN).write_text(json.dumps({**data, **change}), encoding="utf-8")
    proc = build(root, env(tmp_path))
    assert proc.returncode == 1
    assert warnings(proc) == [
        f"problems/I.1.A01.md:4: {FROZEN} is not a frozen GPU result of {CHECK}: {problem}; {FIX}"
    ]


@pytest.mark.slow  # a real build
def test_numbook_device_cannot_pass_a_cpu_off_as_a_gpu(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = gpu_book(tmp_path)
    fake = env(tmp_path, device=f"cuda: {FAKE_GPU}")
    proc = build(root, fake)
    assert warnings(proc) == [
        f"problems/I.1.A01.md:4: {CHECK} needs cuda and this build has no usable GPU (cuda: {FAKE_GPU} is named by "
        f"NUMBOOK_DEVICE, but no GPU answers nvidia-smi); there is no frozen result at {FROZEN}: {FIX}"
    ]
    data = freeze_fixture(root, monkeypatch)
    proc = build(root, fake)
    assert proc.returncode == 0, proc.stderr
    assert expected_stamp(data).search(page(root)) and "ran for this build" not in page(root)


@pytest.mark.slow  # a real build
def test_a_gpu_that_torch_cannot_use_is_no_gpu(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("this torch can use a GPU: the CPU-only case cannot be shown here")
    root = gpu_book(tmp_path)
    proc = build(root, env(tmp_path, fake_smi=True))
    assert warnings(proc) == [
        f"problems/I.1.A01.md:4: {CHECK} needs cuda and this build has no usable GPU ({FAKE_GPU} answers nvidia-smi, "
        f"but torch {torch.__version__} cannot use it); there is no frozen result at {FROZEN}: {FIX}"
    ]


# -- nox -s freeze -------------------------------------------------------------------------------
def freeze_cli(root: Path, environ: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "numbook.cli", "freeze", "--root", str(root)], capture_output=True,
                          text=True, env=environ, timeout=300, check=False)


def test_freeze_refuses_without_a_gpu_and_writes_nothing(tmp_path: Path) -> None:
    root = gpu_book(tmp_path)
    for environ, device in ((env(tmp_path), CPU), (env(tmp_path, device=f"cuda: {FAKE_GPU}"), f"cuda: {FAKE_GPU}")):
        proc = freeze_cli(root, environ)
        assert proc.returncode == 2
        assert proc.stderr == (
            f"numbook freeze: refused: no GPU here: nvidia-smi is missing or answers nothing (this build's device: "
            f"{device}). Frozen results are GPU figures, written only on a machine with an NVIDIA GPU: "
            "run `nox -s freeze` on the GPU runner\n")
    assert not (root / "checks/frozen").exists()


def test_freeze_refuses_a_gpu_that_torch_cannot_use(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("this torch can use a GPU: the CPU-only case cannot be shown here")
    root = gpu_book(tmp_path)
    proc = freeze_cli(root, env(tmp_path, fake_smi=True))
    assert proc.returncode == 2
    assert proc.stderr == (f"numbook freeze: refused: {FAKE_GPU} answers nvidia-smi, but torch {torch.__version__} "
                           "cannot use it: install a CUDA build of torch; nothing was frozen\n")
    assert not (root / "checks/frozen").exists()


def test_nox_freeze_is_a_session_that_does_not_run_by_default() -> None:
    proc = subprocess.run([sys.executable, "-m", "nox", "-l", "-f", str(ROOT / "noxfile.py")], capture_output=True,
                          text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    assert any(line.startswith("- freeze -> ") for line in proc.stdout.splitlines()), proc.stdout


@pytest.mark.slow  # a real build
def test_a_frozen_result_goes_stale_when_a_file_its_check_read_changes(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """Staleness covers what the check reads (the harness it imports, its data), not only its source."""
    root = gpu_book(tmp_path)
    (root / "checks" / "_gpu_params.json").write_text('{"d": 512}', encoding="utf-8")
    with (root / CHECK).open("a", encoding="utf-8") as fh:
        fh.write("import json, pathlib\njson.loads((pathlib.Path(__file__).parent / '_gpu_params.json').read_text())\n")
    data = freeze_fixture(root, monkeypatch)
    assert "checks/_gpu_params.json" in data["reads"]
    assert set(data["provenance"]) >= {"worktree", "cuda"}
    assert build(root, env(tmp_path)).returncode == 0
    (root / "checks" / "_gpu_params.json").write_text('{"d": 1024}', encoding="utf-8")
    proc = build(root, env(tmp_path))
    assert proc.returncode == 1
    assert warnings(proc) == [
        f"problems/I.1.A01.md:4: {CHECK} read files that changed since its frozen GPU result was made "
        f"(checks/_gpu_params.json; frozen {data['ran_at']} on cuda: {FAKE_GPU}); refresh it with `nox -s freeze` "
        "on a GPU machine"]


# -- frozen measurements: replayed and derived on every build ---------------------------------------
BANDWIDTH = '''\
# numbook: requires=cuda
"""A step's bandwidth against a datasheet peak. TEST FIXTURE: the "GPU" that times it is this CPU."""
import os
import sys

from numbook.check import given, measurement, sanity, value

PEAK_TBS = given("peak_tbs", 4.8, unit="TB/s")
NBYTES = given("nbytes", 1_000_000_000, unit="B")


def time_step():
    if not os.environ["NUMBOOK_DEVICE"].startswith("cuda"):
        sys.exit("time_step ran on a CPU: a replay must not call it")
    return 0.0004


step_s = measurement("step_s", time_step, unit="s")
tbs = value("achieved_tbs", NBYTES / step_s / 1e12, unit="TB/s", measured="one step's bandwidth")
sanity("below_peak", tbs < PEAK_TBS, "no step moves its bytes faster than the datasheet allows",
       operands=(tbs, PEAK_TBS))
print(f"{tbs:.2f} TB/s")
'''
BW, BW_FROZEN = "checks/bw.py", "checks/frozen/bw.json"


_FROZEN_PROJECTS: dict[str, Path] = {}   # source -> a frozen project made once per test process, copied per test


def bandwidth_project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: str = BANDWIDTH) -> Path:
    """A git checkout holding checks/bw.py and its frozen file, written by the real freeze code path from a run
    on this CPU labelled as an H200 (FIXTURE); afterwards this process is a CPU machine again. The freeze runs
    once per test process (its own folder, which no test changes); each test gets a copy, .git and all."""
    made = _FROZEN_PROJECTS.get(source)
    if made is None or not made.is_dir():
        made = tmp_path.parent / f"frozen-project-{len(_FROZEN_PROJECTS)}-{os.getpid()}"
        root = project(made, bw=source)
        made = root
        git_commit(root)
        with monkeypatch.context() as m:
            pretend_gpu(m)
            written, failed = freeze.freeze_checks(Runner(root, cache_dir=None))
        assert failed == []
        assert written == [root / BW_FROZEN]
        _FROZEN_PROJECTS[source] = root
    root = tmp_path / "book"
    shutil.copytree(made, root, symlinks=True)
    monkeypatch.setenv("NUMBOOK_DEVICE", CPU)   # no GPU answers here: the check is replayed
    return root


def replay(root: Path) -> CheckResult:
    return Runner(root, cache_dir=None).result("bw.py")


def frozen_data(root: Path) -> dict[str, object]:
    data = json.loads((root / BW_FROZEN).read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data


def rewrite(root: Path, data: dict[str, object], *, sign: bool) -> None:
    """Write a changed frozen file, with its digest recomputed (``sign``: a determined forger) or not (a hand edit)."""
    if sign:
        data = {**data, "digest": frozen.digest(data)}
    (root / BW_FROZEN).write_text(json.dumps(data), encoding="utf-8")


def test_a_frozen_file_holds_measurements_and_a_cpu_build_derives_every_value_from_them(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = bandwidth_project(tmp_path, monkeypatch)
    data = frozen_data(root)
    assert data["measurements"] == {"step_s": {"value": 0.0004, "unit": "s"}}
    assert sorted(data["reads"]) == [BW]                                      # type: ignore[arg-type]
    res = replay(root)      # time_step would exit on this CPU: the replay does not call it
    assert (res.status, res.frozen, res.cached) == ("ok", True, False), res.stderr
    assert (res.device, res.driver, res.ran_at, res.versions) == (f"cuda: {FAKE_GPU}", FAKE_DRIVER, data["ran_at"],
                                                                  data["versions"])
    assert res.values == {"achieved_tbs": 2.5} and res.sanity["below_peak"]["ok"] is True
    assert res.stdout == "2.50 TB/s\n" and res.measurements == data["measurements"]
    assert res.stamp().endswith(f"source {data['source_hash']} · frozen GPU measurements, derived on this build")
    assert res.reads[BW_FROZEN] == Runner(root, cache_dir=None).file_hash(BW_FROZEN)


def test_a_forged_measurement_that_breaks_a_sanity_fails_on_every_build(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """9.87 TB/s against a 4.8 TB/s peak, digest and all: the sanity is computed again here, and fails."""
    root = bandwidth_project(tmp_path, monkeypatch)
    data = frozen_data(root)
    rewrite(root, {**data, "measurements": {"step_s": {"value": 1e9 / 9.87e12, "unit": "s"}}}, sign=True)
    res = replay(root)
    assert (res.status, res.frozen, res.device) == ("error", True, f"cuda: {FAKE_GPU}")
    assert failure_message(res, "bw.py")[0] == (
        "check 'checks/bw.py' raised: numbook.check.SanityError: sanity 'below_peak' failed: no step moves its "
        "bytes faster than the datasheet allows")


def refused(root: Path, problem: str) -> str:
    return f"{BW_FROZEN} is not a frozen GPU result of {BW}: {problem}; {FIX}"


def test_a_hand_edited_frozen_file_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = bandwidth_project(tmp_path, monkeypatch)
    data = frozen_data(root)
    rewrite(root, {**data, "measurements": {"step_s": {"value": 0.0005, "unit": "s"}}}, sign=False)
    res = replay(root)
    assert (res.status, res.values, res.frozen) == ("frozen-invalid", {}, False)
    assert res.stderr == refused(root, "its digest does not match its content: it was edited after `numbook freeze` "
                                       "wrote it")


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ({"reads": {}}, "it records no reads (the files the GPU run read, with their hashes)"),
        ({"reads": {"checks/other.py": "ab" * 10}}, "its reads do not list the check itself"),
        ({"tool_hash": None}, "it records no tool hash (the hash of the numbook package that made it)"),
        ({"commit": None}, "it records no commit (the git commit it was made at)"),
        ({"measurements": {}}, "it records no measurements"),
        ({"values": {"achieved_tbs": 9.87}, "sanity": {"below_peak": {"ok": True, "message": ""}}},
         "it holds sanity, values: a frozen file holds the raw measurements of the GPU run only, and every value, "
         "sanity and figure is derived from them on each build"),
        ({"digest": None}, "it has no digest"),
    ],
    ids=["empty-reads", "reads-without-the-check", "no-tool-hash", "no-commit", "no-measurements", "derived-values",
         "no-digest"],
)
def test_a_frozen_file_without_its_provenance_or_with_derived_values_is_refused(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, change: dict[str, object], problem: str) -> None:
    """Each rule on its own: the digest is recomputed, so only the rule named can refuse the file."""
    root = bandwidth_project(tmp_path, monkeypatch)
    data = {k: v for k, v in {**frozen_data(root), **change}.items() if v is not None}
    rewrite(root, data, sign="digest" not in change)
    res = replay(root)
    assert (res.status, res.values) == ("frozen-invalid", {})
    assert res.stderr == refused(root, problem)


def test_the_hand_written_frozen_file_of_the_issue_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The right source hash, a cuda device, an empty reads list and a forged sanity, in the old whole-result form."""
    root = bandwidth_project(tmp_path, monkeypatch)
    forged = {"numbook_frozen": 1, "check": BW, "status": "ok", "device": f"cuda: {FAKE_GPU}", "reads": {},
              "source_hash": frozen_data(root)["source_hash"], "values": {"achieved_tbs": 9.87},
              "sanity": {"below_peak": {"ok": True, "message": ""}}}
    (root / BW_FROZEN).write_text(json.dumps(forged), encoding="utf-8")
    assert replay(root).stderr == refused(root, "its numbook_frozen is 1, not 2")
    rewrite(root, {**forged, "numbook_frozen": 2}, sign=True)
    assert replay(root).stderr == refused(root, "it holds sanity, status, values: a frozen file holds the raw "
                                                "measurements of the GPU run only, and every value, sanity and figure "
                                                "is derived from them on each build")


def test_freeze_writes_nothing_for_a_gpu_check_that_measures_nothing_or_outside_git(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = project(tmp_path / "book", g="# numbook: requires=cuda\nfrom numbook.check import value\nvalue('x', 1)\n")
    with monkeypatch.context() as m:
        pretend_gpu(m)
        with pytest.raises(freeze.FreezeError, match=r"is not a git checkout: a frozen file records the commit it "
                                                     r"was made at; nothing was frozen"):
            freeze.freeze_checks(Runner(root, cache_dir=None))
        git_commit(root)
        written, failed = freeze.freeze_checks(Runner(root, cache_dir=None))
    assert (written, failed) == ([], [
        "checks/g.py recorded no measurement: a GPU check records what it measures on the GPU with "
        "numbook.check.measurement(), and a build without a GPU derives every value from those"])
    assert not (root / "checks/frozen").exists()


def test_a_measurement_outside_a_replay_calls_its_function_and_in_a_replay_returns_the_frozen_value(
        tmp_path: Path) -> None:
    """numbook.check.measurement() in a plain run and in a replay, each in its own interpreter."""
    script = ("import json, sys\nfrom numbook import check\n"
              "x = check.measurement('t', lambda: (1.5, 'x'), unit='s')\nprint(json.dumps([x, check.replaying()]))\n"
              "check.measurement('u', lambda: 2)\n")
    plain = {k: v for k, v in os.environ.items() if k != "NUMBOOK_MEASUREMENTS"}
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=plain, timeout=60,
                          check=False)
    assert (proc.returncode, proc.stdout) == (0, '[[1.5, "x"], false]\n'), proc.stderr
    held = tmp_path / "m.json"
    held.write_text(json.dumps({"file": BW_FROZEN, "measurements": {"t": {"value": 7}}}), encoding="utf-8")
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False,
                          env={**plain, "NUMBOOK_MEASUREMENTS": str(held)})
    assert (proc.returncode, proc.stdout) == (1, "[7, true]\n")
    assert proc.stderr.strip().splitlines()[-1] == (
        f"numbook.check.MeasurementError: measurement 'u' is not in the frozen measurements of {BW_FROZEN} "
        "(it holds t): refresh them with `nox -s freeze` on a GPU machine")


def test_numbook_verify_derives_a_gpu_page_from_frozen_measurements_and_fails_a_forged_one(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """End to end on the tiny book: a genuine frozen file verifies; a forged fp32 width breaks the check's sanity."""
    root = gpu_book(tmp_path)
    data = freeze_fixture(root, monkeypatch)

    def verify() -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "numbook.cli", "verify", "--root", str(root), "--no-cache"],
                              capture_output=True, text=True, env=env(tmp_path), timeout=300, check=False)

    def row(proc: subprocess.CompletedProcess[str]) -> list[str]:
        return next(ln for ln in proc.stdout.splitlines() if ln.startswith(CHECK)).split()

    def faults(proc: subprocess.CompletedProcess[str]) -> list[str]:   # the faults of the GPU check's run
        return [ln for ln in proc.stderr.splitlines() if ln.startswith(f"{A01}:4:")]

    proc = verify()
    assert proc.returncode == 0, proc.stderr
    assert (faults(proc), row(proc)[1]) == ([], "ok")
    assert f"frozen cuda: {FAKE_GPU}" in " ".join(row(proc))   # source and device columns
    forged = {**data, "measurements": {"fp32_bytes": {"value": 8}}}
    (root / FROZEN).write_text(json.dumps({**forged, "digest": frozen.digest(forged)}), encoding="utf-8")
    proc = verify()
    assert proc.returncode == 1 and row(proc)[1] == "error"
    assert faults(proc) == [
        f"{A01}:4: check '{CHECK}' raised: numbook.check.SanityError: sanity 'half' failed: bf16 is half of fp32"]
