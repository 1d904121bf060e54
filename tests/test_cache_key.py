"""The cache key of a check moves with everything its result depends on (issue 18).

A check and its environment in, a key change out: the Python, torch and numpy versions, the
device, the check's source, its header's limits, and a perturbation each give another key; the
same inputs give the same key.
"""

from __future__ import annotations

import platform
from pathlib import Path

import pytest

from numbook.run.machine import cpu_name, versions
from numbook.run.runner import Runner

CHECK = "from numbook.check import value\nvalue('x', 1)\n"


@pytest.fixture
def project(tmp_path: Path) -> tuple[Runner, Path]:
    (tmp_path / "checks").mkdir()
    path = tmp_path / "checks" / "c.py"
    path.write_text(CHECK, encoding="utf-8")
    return Runner(tmp_path, "checks", None), path


def test_the_versions_the_key_reads_are_this_interpreters_and_libraries() -> None:
    import importlib.metadata

    got = versions()
    assert got["Python"] == platform.python_version()
    for dist in ("torch", "numpy"):
        try:
            want = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            want = "absent"
        assert got[dist] == want


def test_a_library_that_is_not_installed_is_keyed_as_absent(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.metadata

    real = importlib.metadata.version

    def version(dist: str) -> str:
        if dist == "torch":
            raise importlib.metadata.PackageNotFoundError(dist)
        return real(dist)

    monkeypatch.setattr(importlib.metadata, "version", version)
    got = versions()
    assert got == {"Python": platform.python_version(), "torch": "absent", "numpy": real("numpy")}


def test_the_same_check_in_the_same_environment_has_one_key(project: tuple[Runner, Path]) -> None:
    r, path = project
    assert r.key(path) == r.key(path)
    assert Runner(r.root, "checks", None).key(path) == r.key(path)


@pytest.mark.parametrize(("what", "new"), [("Python", "3.99.0"), ("torch", "9.9.9"), ("numpy", "0.0.1")])
def test_a_library_upgrade_changes_the_key(project: tuple[Runner, Path], what: str, new: str) -> None:
    r, path = project
    before, own = r.key(path)
    r.versions = {**r.versions, what: new}
    after, own_after = r.key(path)
    assert after != before and own_after == own     # the source is the same; the result may not be


def test_another_device_changes_the_key(project: tuple[Runner, Path]) -> None:
    r, path = project
    before, _ = r.key(path)
    r.device = "cuda: NVIDIA H200" if r.device != "cuda: NVIDIA H200" else "cpu: x86_64"
    assert r.key(path)[0] != before


def test_the_source_the_limits_and_a_perturbation_change_the_key(project: tuple[Runner, Path]) -> None:
    r, path = project
    base = r.key(path)[0]
    assert r.key(path, perturb="x")[0] not in (base, r.key(path, perturb="y")[0])
    r.timeout = r.timeout + 1
    assert r.key(path)[0] != base
    path.write_text(CHECK + "# another line\n", encoding="utf-8")
    r.timeout = r.timeout - 1
    changed, own = r.key(path)
    assert changed != base and own != base


def test_the_thread_settings_change_the_key(project: tuple[Runner, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    """OMP_NUM_THREADS and its kind change what a check measures (and can change what it computes)."""
    r, path = project
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    unset = r.key(path)[0]
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    one = r.key(path)[0]
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    assert len({unset, one, r.key(path)[0]}) == 3


AVX2 = "processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 7763 64-Core Processor\n" \
       "flags\t\t: fpu sse4_2 avx avx2 fma\n\nprocessor\t: 1\nmodel name\t: AMD EPYC 7763 64-Core Processor\n"
AVX512 = "processor\t: 0\nmodel name\t: AMD EPYC 9654 96-Core Processor\nflags\t\t: fpu sse4_2 avx avx2 avx512f\n"
ARM = "processor\t: 0\nFeatures\t: fp asimd evtstrm sve\nCPU implementer\t: 0x41\n"


def test_a_cpu_is_named_by_its_model_and_its_widest_vector_instructions(tmp_path: Path) -> None:
    """An AVX2 and an AVX-512 machine sum a batched matmul in other orders: their results differ in the last
    bits (8.1.3's logits did), so a result cached on one must not stand for the other."""
    named = {}
    for kind, text in [("avx2", AVX2), ("avx512", AVX512), ("arm", ARM)]:
        (tmp_path / kind).write_text(text, encoding="utf-8")
        named[kind] = cpu_name(tmp_path / kind)
    machine = platform.machine() or "unknown"
    assert named == {"avx2": f"cpu: {machine} AMD EPYC 7763 64-Core Processor (avx2)",
                     "avx512": f"cpu: {machine} AMD EPYC 9654 96-Core Processor (avx512f)",
                     "arm": " ".join(p for p in ["cpu:", machine, platform.processor(), "(sve)"] if p)}
    # a system that says nothing about its CPU: the architecture, and what platform knows
    assert cpu_name(tmp_path / "absent") == " ".join(p for p in ["cpu:", machine, platform.processor()] if p)


def test_two_cpus_with_other_vector_instructions_give_two_keys(project: tuple[Runner, Path], tmp_path: Path) -> None:
    r, path = project
    keys = set()
    for kind, text in [("avx2", AVX2), ("avx512", AVX512)]:
        (tmp_path / kind).write_text(text, encoding="utf-8")
        r.device = cpu_name(tmp_path / kind)
        keys.add(r.key(path)[0])
    assert len(keys) == 2


@pytest.mark.parametrize("name", ["ATEN_CPU_CAPABILITY", "MKL_ENABLE_INSTRUCTIONS", "MKL_CBWR", "DNNL_MAX_CPU_ISA"])
def test_a_setting_that_limits_the_vector_instructions_changes_the_key(project: tuple[Runner, Path],
                                                                       monkeypatch: pytest.MonkeyPatch,
                                                                       name: str) -> None:
    """ATEN_CPU_CAPABILITY=avx2 on an AVX-512 machine makes torch sum as an AVX2 machine does."""
    r, path = project
    monkeypatch.delenv(name, raising=False)
    unset = r.key(path)[0]
    monkeypatch.setenv(name, "AVX2")
    assert r.key(path)[0] != unset
