"""Frozen results: what a GPU check printed on a GPU, committed so CPU-only builds can show it.

A frozen result lives next to its check as ``checks/frozen/<check stem>.json``: the whole
result of the GPU run plus its provenance (device, driver, library versions, date and the
hash of the check's source). A build without a usable GPU shows it, labelled as a frozen GPU
result; the build fails when the frozen result is older than its check's source, when there
is none, or when the file is no GPU result at all.

A check that declares ``requires=cuda`` runs live only where a GPU answers ``nvidia-smi`` and
the installed torch can use it; ``NUMBOOK_DEVICE`` alone cannot make a CPU pass for a GPU.
Frozen results are written by ``numbook freeze`` (``nox -s freeze``; ``python -m numbook.frozen``
is the same command), which refuses to run on a machine without such a GPU.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .result import CheckResult, Status, read_header

if TYPE_CHECKING:
    from .runner import Runner

__all__ = ["FORMAT", "FreezeError", "GpuInfo", "GpuStatus", "frozen_path", "load_frozen", "freeze", "gpu_info",
           "gpu_status", "cuda_checks", "freeze_checks"]

FORMAT = 1                      # the "numbook_frozen" field of a frozen file
_FIX = "run `nox -s freeze` on a GPU machine"


class FreezeError(RuntimeError):
    """Frozen results cannot be written here (no GPU, or a torch that cannot use it)."""


@dataclass(frozen=True)
class GpuInfo:
    name: str
    driver: str


@dataclass(frozen=True)
class GpuStatus:
    """Whether a GPU check may run live: ``reason`` says why not, ``driver`` is the GPU's driver."""

    usable: bool
    reason: str = ""
    driver: str = ""


def gpu_info() -> GpuInfo | None:
    """Name and driver version of the first NVIDIA GPU that answers ``nvidia-smi``, else None."""
    smi = shutil.which("nvidia-smi")
    if not smi:
        return None
    try:
        out = subprocess.run([smi, "--query-gpu=name,driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    lines = out.stdout.strip().splitlines() if out.returncode == 0 else []
    name, _, driver = lines[0].rpartition(",") if lines else ("", "", "")
    return GpuInfo(name.strip(), driver.strip()) if name.strip() else None


def _torch_cuda(python: str) -> tuple[bool, str]:
    """(usable, torch version) as the checks' interpreter sees it; usable when torch is absent."""
    code = ("import json\ntry:\n import torch\nexcept ImportError:\n print(json.dumps(None))\nelse:\n"
            " print(json.dumps([torch.__version__, bool(torch.cuda.is_available())]))")
    try:
        out = subprocess.run([python, "-c", code], capture_output=True, text=True, timeout=120, check=False)
        data = json.loads(out.stdout.strip().splitlines()[-1])
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):
        return False, "unknown (torch could not be imported)"
    return (True, "absent") if data is None else (bool(data[1]), str(data[0]))


def gpu_status(device: str, python: str = sys.executable) -> GpuStatus:
    """Whether a ``requires=cuda`` check can run on a GPU here (the runner asks once per build)."""
    if not device.startswith("cuda"):
        return GpuStatus(False, device)
    return _probe(device, python)


def _probe(device: str, python: str) -> GpuStatus:
    info = gpu_info()
    if info is None:
        named = "is named by NUMBOOK_DEVICE" if os.environ.get("NUMBOOK_DEVICE") else "was detected"
        return GpuStatus(False, f"{device} {named}, but no GPU answers nvidia-smi")
    usable, torch_version = _torch_cuda(python)
    if not usable:
        return GpuStatus(False, f"{info.name} answers nvidia-smi, but torch {torch_version} cannot use it")
    return GpuStatus(True, driver=info.driver)


def frozen_path(runner: Runner, path: Path) -> Path:
    """Where the frozen result of the check at ``path`` lives."""
    return runner.checks_dir / "frozen" / f"{path.stem}.json"


def load_frozen(runner: Runner, path: Path, rel: str, base: CheckResult, reason: str = "") -> CheckResult:
    """The frozen GPU result of a check, or an error result saying why there is none to show."""
    f = frozen_path(runner, path)
    where = runner.rel(f)
    if not f.is_file():
        base.status = Status.FROZEN_MISSING
        base.stderr = (f"{rel} needs cuda and this build has no usable GPU ({reason or runner.device}); "
                       f"there is no frozen result at {where}: {_FIX}")
        return base
    known = {fl.name for fl in fields(CheckResult)}
    try:
        data = json.loads(f.read_text(encoding="utf-8"))
        res = CheckResult(**{k: v for k, v in data.items() if k in known})
        problem = _invalid(data, res, rel)
    except (ValueError, TypeError, AttributeError) as exc:
        problem = f"it cannot be read ({exc})"
    if problem:
        base.status = Status.FROZEN_INVALID
        base.stderr = f"{where} is not a frozen GPU result of {rel}: {problem}; {_FIX}"
        return base
    if res.source_hash != base.source_hash:
        base.status = Status.FROZEN_STALE
        base.stderr = (f"{rel} changed since its frozen GPU result was made: {where} is for source "
                       f"{res.source_hash}, the check is now {base.source_hash} (frozen {res.ran_at} on "
                       f"{res.device}); refresh it with `nox -s freeze` on a GPU machine")
        return base
    changed = changed_reads(runner, res.reads)
    if changed:   # what the check read (the harness it imports, its data) is part of the result too
        base.status = Status.FROZEN_STALE
        shown = ", ".join(changed[:3]) + (f" and {len(changed) - 3} more" if len(changed) > 3 else "")
        base.stderr = (f"{rel} read files that changed since its frozen GPU result was made ({shown}; frozen "
                       f"{res.ran_at} on {res.device}); refresh it with `nox -s freeze` on a GPU machine")
        return base
    res.frozen, res.cached = True, False
    return res


def changed_reads(runner: Runner, reads: dict[str, str | None]) -> list[str]:
    """The files among ``reads`` (project file -> hash when it was read) whose content is not that now,
    leaving out the tool's own files (see ``tool_dir``): what makes a recorded result stale."""
    tool = tool_dir(runner)
    return [f for f, digest in sorted(reads.items())
            if not (tool and f.startswith(tool)) and runner.file_hash(f) != digest]


def tool_dir(runner: Runner) -> str:
    """The numbook package's folder relative to the root ("src/numbook/"), if it lies in the project.

    The tool's own files (the check API, the sandbox) are machinery, not what a GPU figure measures:
    an edit to them does not make a frozen result stale; the harness and the data a check reads do.
    """
    here = Path(__file__).resolve().parent
    try:
        return here.relative_to(runner.root).as_posix() + "/"
    except ValueError:
        return ""


def _invalid(data: dict[str, Any], res: CheckResult, rel: str) -> str:
    """Why a parsed frozen file is not a GPU result of ``rel``; empty when it is one."""
    if data.get("numbook_frozen") != FORMAT:
        return f"its numbook_frozen is {data.get('numbook_frozen')!r}, not {FORMAT}"
    if res.check != rel:
        return f"it is the result of {res.check}"
    if not res.device.startswith("cuda"):
        return f"it was made on {res.device or 'an unnamed device'}, and a CPU run is never shown as a GPU figure"
    if res.status != "ok":
        return f"its status is {res.status}"
    if not res.source_hash:
        return "it records no source hash"
    return ""


def freeze(runner: Runner, result: CheckResult) -> Path:
    """Write a GPU result as the frozen result of its check."""
    if not result.ok or not result.device.startswith("cuda"):
        raise ValueError(f"only a successful GPU run can be frozen ({result.check}: {result.status}, "
                         f"{result.device})")
    if result.versions.get("torch", "").endswith("+cpu"):
        raise ValueError(f"{result.check} ran with torch {result.versions['torch']}, a CPU build: not a GPU result")
    path = runner.root / result.check
    f = frozen_path(runner, path)
    f.parent.mkdir(parents=True, exist_ok=True)
    data = asdict(result)
    for transient in ("cached", "frozen"):
        data.pop(transient, None)
    data["numbook_frozen"] = FORMAT
    data["provenance"] = provenance(runner.root)
    f.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return f


def _run(cmd: list[str], cwd: Path | None = None) -> str:
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=30, check=False, cwd=cwd)
    except (OSError, subprocess.SubprocessError):
        return ""
    return out.stdout.strip() if out.returncode == 0 else ""


def provenance(root: Path, python: str = sys.executable) -> dict[str, str]:
    """What a frozen GPU figure depends on beyond the check: the commit, CUDA and cuBLAS, clocks and power."""
    import importlib.metadata as md

    out = {"git_commit": _run(["git", "rev-parse", "HEAD"], cwd=root) or "unknown"}
    if _run(["git", "status", "--porcelain"], cwd=root):
        out["git_commit"] += " (with uncommitted changes)"
    out["cuda"] = _run([python, "-c", "import torch; print(torch.version.cuda)"]) or "unknown"
    for dist in ("nvidia-cublas-cu12", "nvidia-cublas-cu13", "nvidia-cublas"):
        try:
            out["cublas"] = md.version(dist)
            break
        except md.PackageNotFoundError:
            continue
    smi = shutil.which("nvidia-smi")
    if smi:
        q = _run([smi, "--query-gpu=clocks.sm,clocks.mem,clocks.max.sm,power.limit,pstate", "--format=csv,noheader"])
        if q:
            sm, mem, max_sm, power, pstate = ([p.strip() for p in q.splitlines()[0].split(",")] + [""] * 5)[:5]
            out.update({"sm_clock": sm, "mem_clock": mem, "max_sm_clock": max_sm, "power_limit": power,
                        "pstate": pstate})
    return out


def cuda_checks(runner: Runner) -> list[str]:
    """Every check under ``checks/`` whose header says ``requires=cuda``, relative to the root."""
    found = []
    for path in sorted(runner.checks_dir.rglob("*.py")):
        parts = path.relative_to(runner.checks_dir).parts
        if any(p.startswith((".", "__")) or p == "frozen" for p in parts[:-1]):
            continue
        try:
            if read_header(path.read_text(encoding="utf-8")).requires == "cuda":
                found.append(runner.rel(path))
        except (ValueError, UnicodeDecodeError):
            continue  # a bad header fails the build where the check is used
    return found


def freeze_checks(runner: Runner) -> tuple[list[Path], list[CheckResult]]:
    """Run every GPU check of the book on this machine's GPU and freeze it: (files written, failed results).

    Raises FreezeError, writing nothing, where no GPU answers or torch cannot use it. The runner
    should have no cache, and run one check at a time so that a measurement has the GPU to itself.
    """
    info = gpu_info()
    if info is None:
        raise FreezeError(f"no GPU here: nvidia-smi is missing or answers nothing (this build's device: "
                          f"{runner.device}). Frozen results are GPU figures, written only on a machine with an "
                          "NVIDIA GPU: run `nox -s freeze` on the GPU runner")
    runner.device = f"cuda: {info.name}"
    status = gpu_status(runner.device)
    if not status.usable:
        raise FreezeError(f"{status.reason}: install a CUDA build of torch; nothing was frozen")
    written: list[Path] = []
    failed: list[CheckResult] = []
    for res in runner.run_many(cuda_checks(runner)).values():
        if res.ok and res.device.startswith("cuda"):
            written.append(freeze(runner, res))
        else:
            failed.append(res)
    return written, failed


if __name__ == "__main__":  # pragma: no cover  (`python -m numbook.frozen` is `numbook freeze`)
    from numbook.cli import main as _main

    sys.exit(_main(["freeze", *sys.argv[1:]]))
