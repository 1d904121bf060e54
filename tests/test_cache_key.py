"""The cache key of a check moves with everything its result depends on (issue 18).

A check and its environment in, a key change out: the Python, torch and numpy versions, the
device, the check's source, its header's limits, and a perturbation each give another key; the
same inputs give the same key.
"""

from __future__ import annotations

import platform
from pathlib import Path

import pytest

from numbook import runner as runner_mod
from numbook.runner import Runner

CHECK = "from numbook.check import value\nvalue('x', 1)\n"


@pytest.fixture
def project(tmp_path: Path) -> tuple[Runner, Path]:
    (tmp_path / "checks").mkdir()
    path = tmp_path / "checks" / "c.py"
    path.write_text(CHECK, encoding="utf-8")
    return Runner(tmp_path, "checks", None), path


def test_the_versions_the_key_reads_are_this_interpreters_and_libraries() -> None:
    import importlib.metadata

    got = runner_mod._versions()
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
    got = runner_mod._versions()
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
