"""The machine checks run on: its device, whether a GPU check can use it, and the library versions.

A result depends on more than its check's files: the device (an NVIDIA GPU by the name ``nvidia-smi``
gives it, else the CPU by its model and widest vector instruction set) and the Python, torch and
NumPy versions. Both go into every cache key (numbook.run.cache). ``nvidia-smi`` is asked here and
nowhere else (:func:`nvidia_smi`): for the device's name, for the GPU's name and driver when a
``requires=cuda`` check is about to run, and for the clocks and power a frozen file records.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import platform
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

__all__ = ["nvidia_smi", "cpu_name", "detect_device", "versions", "GpuInfo", "GpuStatus", "gpu_info", "gpu_status"]


def nvidia_smi(*args: str, timeout: float = 20) -> list[str]:
    """The lines ``nvidia-smi ARGS`` prints; none where it is not installed, fails, or does not answer in time."""
    smi = shutil.which("nvidia-smi")
    if not smi:
        return []
    try:
        out = subprocess.run([smi, *args], capture_output=True, text=True, timeout=timeout, check=False)
    except (OSError, subprocess.SubprocessError):
        return []
    return out.stdout.strip().splitlines() if out.returncode == 0 else []


_SIMD = ("avx512f", "avx2", "avx", "sse4_2", "sve", "asimd")
"""Vector instruction sets, widest first: the widest a CPU has sets the kernels torch and numpy pick, and so
the order in which they sum (a logit of a batched matmul differs in its last bits between an AVX2 and an
AVX-512 machine)."""


def cpu_name(cpuinfo: Path = Path("/proc/cpuinfo")) -> str:
    """``cpu: <machine> <model> (<widest vector set>)``, as far as the system says: ``cpu: x86_64 AMD EPYC
    (avx512f)``. Two CPUs that may round differently get two names, so a result cached on one is never
    reused on the other."""
    model, flags = "", set[str]()
    try:
        text = cpuinfo.read_text(encoding="utf-8", errors="replace")
    except OSError:
        text = ""
    for line in text.splitlines():
        field, _, val = line.partition(":")
        field = field.strip().lower()
        if field == "model name" and not model:
            model = " ".join(val.split())
        elif field in ("flags", "features") and not flags:
            flags = set(val.split())
    simd = next((f for f in _SIMD if f in flags), "")
    parts = ["cpu:", platform.machine() or "unknown", model or platform.processor(), f"({simd})" if simd else ""]
    return " ".join(p for p in parts if p)


def detect_device() -> str:
    """``NUMBOOK_DEVICE`` where it is set; else ``cuda: <name>`` where an NVIDIA GPU answers ``nvidia-smi -L``,
    else the CPU (:func:`cpu_name`). It imports no torch."""
    if os.environ.get("NUMBOOK_DEVICE"):
        return os.environ["NUMBOOK_DEVICE"]
    listed = nvidia_smi("-L", timeout=10)   # "GPU 0: NVIDIA H200 (UUID: GPU-...)", one line a GPU
    try:
        if listed:
            return "cuda: " + listed[0].split(":", 1)[1].split("(")[0].strip()
    except IndexError:   # a line that names no GPU
        pass
    return cpu_name()


def versions() -> dict[str, str]:
    """The Python, torch and numpy versions (``absent`` for a library that is not installed)."""
    out = {"Python": platform.python_version()}
    for dist in ("torch", "numpy"):
        try:
            out[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            out[dist] = "absent"
    return out


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
    lines = nvidia_smi("--query-gpu=name,driver_version", "--format=csv,noheader")
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
    """Whether a ``requires=cuda`` check can run on a GPU here (the runner asks once per build): the device is
    a GPU, one answers ``nvidia-smi`` (``NUMBOOK_DEVICE`` alone cannot make a CPU pass for a GPU), and the
    checks' torch can use it."""
    if not device.startswith("cuda"):
        return GpuStatus(False, device)
    info = gpu_info()
    if info is None:
        named = "is named by NUMBOOK_DEVICE" if os.environ.get("NUMBOOK_DEVICE") else "was detected"
        return GpuStatus(False, f"{device} {named}, but no GPU answers nvidia-smi")
    usable, torch_version = _torch_cuda(python)
    if not usable:
        return GpuStatus(False, f"{info.name} answers nvidia-smi, but torch {torch_version} cannot use it")
    return GpuStatus(True, driver=info.driver)
