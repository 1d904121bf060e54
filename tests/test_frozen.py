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
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from numbook import frozen
from numbook import runner as runner_module
from numbook.cli import freeze_book
from numbook.markdown_ext import _FROZEN_TITLE
from numbook.runner import CheckResult, Runner, cpu_name, detect_device

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
def gpu_book(tmp_path: Path) -> Path:
    """A copy of the tiny book whose first check declares ``requires=cuda``."""
    root = tmp_path / "tiny"
    shutil.copytree(TINY, root)
    path = root / CHECK
    head, rest = path.read_text(encoding="utf-8").split("\n", 1)
    path.write_text(f"{head}\n# numbook: requires=cuda\n{rest}", encoding="utf-8")
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
    monkeypatch.setattr(frozen, "gpu_info", lambda: frozen.GpuInfo(FAKE_GPU, FAKE_DRIVER))
    monkeypatch.setattr(frozen, "_torch_cuda", lambda python: (True, "2.13.0+cu128"))
    monkeypatch.setattr(runner_module, "_versions", lambda: {"Python": "3.11.9", "torch": "2.13.0+cu128",
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


def expected_stamp(data: dict[str, object]) -> str:
    versions = data["versions"]
    assert isinstance(versions, dict)
    vers = " · ".join(f"{k} {v}" for k, v in versions.items())
    return (f'<p class="nb-stamp nb-stamp-frozen" title="{_FROZEN_TITLE}"><span class="nb-stamp-label">'
            f"Frozen GPU result</span> cuda: {FAKE_GPU} · driver {FAKE_DRIVER} · {vers} · "
            f"{data['elapsed_s']:.2f} s ({data['cpu_s']:.2f} s CPU) · {data['ran_at']} · "
            f"source {data['source_hash']} · not run for this build</p>")


# -- device detection ----------------------------------------------------------------------------
def test_without_nvidia_smi_or_numbook_device_the_device_is_a_cpu(monkeypatch: pytest.MonkeyPatch,
                                                                    tmp_path: Path) -> None:
    monkeypatch.delenv("NUMBOOK_DEVICE", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    assert detect_device().startswith("cpu")
    assert frozen.gpu_info() is None
    assert frozen.gpu_status(detect_device()) == frozen.GpuStatus(False, CPU)


def test_nvidia_smi_names_the_gpu_and_its_driver(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("NUMBOOK_DEVICE", raising=False)
    monkeypatch.setenv("PATH", env(tmp_path, fake_smi=True)["PATH"])
    assert detect_device() == f"cuda: {FAKE_GPU}"
    assert frozen.gpu_info() == frozen.GpuInfo(FAKE_GPU, FAKE_DRIVER)


# -- the frozen file -----------------------------------------------------------------------------
@pytest.mark.slow  # a real build
def test_freezing_records_device_driver_versions_date_and_source_hash(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    root = gpu_book(tmp_path)
    data = freeze_fixture(root, monkeypatch)
    assert data["numbook_frozen"] == frozen.FORMAT and data["check"] == CHECK and data["status"] == "ok"
    assert (data["device"], data["driver"], data["requires"]) == (f"cuda: {FAKE_GPU}", FAKE_DRIVER, "cuda")
    assert data["versions"] == {"Python": "3.11.9", "torch": "2.13.0+cu128", "numpy": "2.3.4"}
    assert str(data["ran_at"]).endswith(" UTC") and data["source_hash"] == source_hash(root)
    assert data["values"]["fp32_mb"] == 65.536                               # type: ignore[index]
    assert "cached" not in data and "frozen" not in data
    assert not (root / "checks/frozen/i1_a02_reuse.json").exists()          # a CPU check is never frozen


def test_only_a_successful_gpu_run_can_be_frozen(tmp_path: Path) -> None:
    runner = Runner(gpu_book(tmp_path), cache_dir=None)
    cpu_run = CheckResult(CHECK, "ok", device=CPU, source_hash="0" * 20)
    with pytest.raises(ValueError, match=r"only a successful GPU run can be frozen \(checks/i1_a01_embedding.py: ok"):
        frozen.freeze(runner, cpu_run)
    with pytest.raises(ValueError, match="only a successful GPU run can be frozen"):
        frozen.freeze(runner, dataclasses.replace(cpu_run, status="error", device=f"cuda: {FAKE_GPU}"))
    cpu_torch = dataclasses.replace(cpu_run, device=f"cuda: {FAKE_GPU}", versions={"torch": "2.13.0+cpu"})
    with pytest.raises(ValueError, match=r"ran with torch 2.13.0\+cpu, a CPU build: not a GPU result"):
        frozen.freeze(runner, cpu_torch)
    assert not (runner.checks_dir / "frozen").exists()


def test_the_stamp_of_a_frozen_result_names_driver_and_source_and_a_live_one_is_unchanged() -> None:
    live = CheckResult(CHECK, "ok", device=CPU, versions={"Python": "3.11.9"}, elapsed_s=0.5,
                       ran_at="2026-12-01 10:00 UTC", source_hash="ab" * 10)
    assert live.stamp() == f"{CPU} · Python 3.11.9 · 0.50 s · 2026-12-01 10:00 UTC · ran for this build"
    gpu = dataclasses.replace(live, device=f"cuda: {FAKE_GPU}", driver=FAKE_DRIVER, frozen=True)
    assert gpu.stamp() == (f"cuda: {FAKE_GPU} · driver {FAKE_DRIVER} · Python 3.11.9 · 0.50 s · "
                           f"2026-12-01 10:00 UTC · source {'ab' * 10} · not run for this build")


# -- builds without a GPU ------------------------------------------------------------------------
@pytest.mark.slow  # a real build
def test_a_cpu_build_shows_the_frozen_result_labelled_with_its_provenance(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    root = gpu_book(tmp_path)
    data = freeze_fixture(root, monkeypatch)
    proc = build(root, env(tmp_path))
    assert proc.returncode == 0, proc.stderr
    html = page(root)
    assert expected_stamp(data) in html
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
        ({"status": "error"}, "its status is error"),
    ],
    ids=["cpu-result", "no-format", "other-check", "failed-run"],
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
    assert expected_stamp(data) in page(root) and "ran for this build" not in page(root)


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
    return subprocess.run([sys.executable, "-m", "numbook.frozen", "--root", str(root)], capture_output=True,
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
    assert set(data["provenance"]) >= {"git_commit", "cuda"}
    assert build(root, env(tmp_path)).returncode == 0
    (root / "checks" / "_gpu_params.json").write_text('{"d": 1024}', encoding="utf-8")
    proc = build(root, env(tmp_path))
    assert proc.returncode == 1
    assert warnings(proc) == [
        f"problems/I.1.A01.md:4: {CHECK} read files that changed since its frozen GPU result was made "
        f"(checks/_gpu_params.json; frozen {data['ran_at']} on cuda: {FAKE_GPU}); refresh it with `nox -s freeze` "
        "on a GPU machine"]
