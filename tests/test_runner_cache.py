"""The runner's cache across machines and over time, in fast tests: a bundle carries a shard's results, merge
puts them into another cache (where each entry still holds only while its files are unchanged), and prune
removes the entries no check of this build asked for. Also the warm parent's own life: its session, its
environment, and a process that used it ending promptly."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import numbook
import numbook.run.warm as warm
from _project import project
from numbook.run.runner import CACHE_VERSION, CheckResult, Runner


@pytest.fixture(autouse=True)
def _own_warm_parent() -> None:
    """Each test starts its own warm parent (the runner shares one per process)."""
    warm.close_all()

CHECK = "from numbook.check import given, value\nn = given('n', 3)\nvalue('sq', n * n)\n"



def test_a_result_is_written_and_read_as_json_by_one_pair_and_a_cache_entry_is_that_and_its_format(
        tmp_path: Path) -> None:
    root = project(tmp_path, a=CHECK)
    res = Runner(root, cache_dir=".cache").result("a.py")
    entry = json.loads((root / ".cache" / f"{res.key}.json").read_text(encoding="utf-8"))
    assert entry == {**res.to_dict(), "cache_version": CACHE_VERSION} and list(entry)[-1] == "cache_version"
    assert CheckResult.from_dict(json.loads(json.dumps(res.to_dict()))) == res
    assert CheckResult.from_dict({**entry, "added_later": 1}) == res   # a key that names no field is left out
    with pytest.raises(TypeError, match="a result is a JSON object, not list"):
        CheckResult.from_dict([entry])
    with pytest.raises(TypeError):
        CheckResult.from_dict({"status": "ok"})                       # no check
    with pytest.raises(ValueError):
        CheckResult.from_dict({"check": "checks/a.py", "status": "fine"})
    (root / ".cache" / f"{res.key}.json").write_text(json.dumps([entry]), encoding="utf-8")
    assert Runner(root, cache_dir=".cache").result("a.py").cached is False   # an entry that is no result is run again


def test_a_bundle_carries_results_to_another_cache_which_serves_them_without_running(tmp_path: Path) -> None:
    root = project(tmp_path / "a", a=CHECK, b=CHECK.replace("3", "4"))
    shard = Runner(root, cache_dir=".cache")
    results = [shard.result("a.py"), shard.result("b.py")]
    bundle = shard.bundle(results)
    assert (bundle["numbook_bundle"], bundle["device"], bundle["versions"]) == (1, shard.device, shard.versions)
    assert sorted(bundle["entries"]) == sorted(r.key for r in results)
    assert Runner(root, cache_dir=None).bundle(results)["entries"] == {}      # no cache, nothing to carry

    other = project(tmp_path / "b", a=CHECK, b=CHECK.replace("3", "4"))       # a clean checkout elsewhere
    merged = Runner(other, cache_dir=".cache/numbook")                         # a cache folder not made yet
    assert merged.merge(json.loads(json.dumps(bundle))) == 2
    assert merged.merge(json.loads(json.dumps(bundle))) == 2                   # merging again is no error
    got = Runner(other, cache_dir=".cache/numbook").result("b.py")
    assert (got.cached, got.values) == (True, {"sq": 16})
    (other / "checks" / "a.py").write_text(CHECK.replace("3", "5"), encoding="utf-8")
    assert Runner(other, cache_dir=".cache/numbook").result("a.py").cached is False   # its source changed


@pytest.mark.parametrize("bundle", [{}, {"numbook_bundle": 2, "entries": {}}, {"entries": {"k": {}}}])
def test_merge_refuses_what_is_no_bundle_and_a_runner_without_a_cache(tmp_path: Path, bundle: dict) -> None:
    with pytest.raises(ValueError, match=r"^not a numbook result bundle \(or this runner has no cache\)$"):
        Runner(tmp_path, cache_dir=".cache").merge(bundle)
    with pytest.raises(ValueError, match="not a numbook result bundle"):
        Runner(tmp_path, cache_dir=None).merge({"numbook_bundle": 1, "entries": {}})


def test_prune_removes_every_entry_no_check_of_this_build_keyed(tmp_path: Path) -> None:
    root = project(tmp_path, a=CHECK, b=CHECK.replace("3", "4"), c=CHECK.replace("3", "5"))
    Runner(root, cache_dir=".cache").run_many(["a.py", "b.py", "c.py"])
    assert len(list((root / ".cache").glob("*.json"))) == 3
    later = Runner(root, cache_dir=".cache")
    later.result("a.py")
    assert later.prune() == 2 and [f.stem for f in (root / ".cache").glob("*.json")] == [later.result("a.py").key]
    assert later.prune() == 0
    assert Runner(root, cache_dir=".nothing-here").prune() == 0 and Runner(root, cache_dir=None).prune() == 0


def test_prune_keeps_a_current_nudged_run_and_what_another_process_writes_meanwhile(tmp_path: Path) -> None:
    """A plain build never computes a nudged run's key, yet ``verify --perturb`` asks for it again: its entry stays
    while its check is unchanged, and goes once the check is edited. An entry written after the build began (a
    ``--perturb`` running beside it) is not the build's to prune."""
    root = project(tmp_path, a=CHECK)
    nudged = Runner(root, cache_dir=".cache").result("a.py", perturb="n")
    entry = root / ".cache" / f"{nudged.key}.json"
    assert json.loads(entry.read_text(encoding="utf-8"))["perturb"] == "n"
    plain = Runner(root, cache_dir=".cache")
    plain.result("a.py")
    assert plain.prune() == 0 and entry.is_file()
    beside = root / ".cache" / "0123456789abcdef0123.json"   # another process's run, written while this build runs
    beside.write_text("{}", encoding="utf-8")
    assert plain.prune() == 0 and beside.is_file()
    (root / "checks/a.py").write_text(CHECK.replace("3", "4"), encoding="utf-8")
    later = Runner(root, cache_dir=".cache")
    later.result("a.py")
    assert later.prune() == 3 and not entry.exists() and not beside.exists()   # the old plain run's, too


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "PYTHONPATH", "VIRTUAL_ENV")}


def test_the_warm_parent_lives_in_its_own_session_and_ends_when_closed() -> None:
    z = warm.parent({**_env(), "PYTHONHASHSEED": "0"}, ("json",))
    assert z is not None and z.ready and z.alive
    assert os.getsid(z.proc.pid) == z.proc.pid != os.getsid(0)   # a terminal's Ctrl-C is not its to take
    z.close()
    assert z.proc.poll() is not None


def test_a_warm_parent_slow_to_end_is_killed_and_reaped_when_closed_so_no_resource_warning_follows() -> None:
    """The flaky ResourceWarning: under load a warm parent that had imported torch took longer than the grace to end;
    close() killed it but did not reap it, and the next test's close_all() dropped a Popen whose process
    still ran."""
    import gc
    import signal
    import warnings

    z = warm.parent({**_env(), "PYTHONHASHSEED": "0"}, ("json",))
    assert z is not None
    os.kill(z.proc.pid, signal.SIGSTOP)    # as slow to end as a loaded machine can make it
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        z.close(grace=0.2)
        warm.close_all()
        rc = z.proc.returncode
        del z
        gc.collect()
    assert [str(w.message) for w in caught] == []
    assert rc == -signal.SIGKILL


def test_one_warm_parent_per_environment_and_preload_and_a_new_one_when_it_died(tmp_path: Path) -> None:
    env = {**_env(), "PYTHONHASHSEED": "0"}
    first = warm.parent(env, ("json",))
    assert first is not None and warm.parent(dict(env), ("json",)) is first
    assert warm.parent(dict(reversed(env.items())), ("json",)) is first   # the same variables in another order
    assert warm.parent({**env, "LC_NUMBOOK_TEST": "1"}, ("json",)) not in (None, first)
    assert warm.parent(env, ("json", "csv")) not in (None, first)
    first.proc.kill()
    first.proc.wait()
    deadline = time.monotonic() + 10
    while first.alive and time.monotonic() < deadline:   # its reader sees the pipe close
        time.sleep(0.05)
    again = warm.parent(env, ("json",))
    assert again is not None and again is not first and again.alive
    assert not os.path.exists(first.home)                # the dead one was closed, its folder removed
    (tmp_path / "quits.py").write_text("import os\nos._exit(0)\n", encoding="utf-8")
    assert warm.parent({**env, "PYTHONPATH": str(tmp_path)}, ("quits",)) is None   # never ready: no warm parent


def test_the_first_warm_parent_of_a_process_has_every_warm_parent_closed_at_its_exit(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import atexit

    warm.close_all()
    registered: list[object] = []
    monkeypatch.setattr(atexit, "register", registered.append)
    assert warm.parent(_env(), ("json",)) is not None
    assert registered == [warm.close_all]
    assert warm.parent({**_env(), "LC_NUMBOOK_TEST": "2"}, ("json",)) is not None
    assert registered == [warm.close_all]   # once: it closes them all


def test_a_process_that_used_the_warm_parent_exits_promptly() -> None:
    """The thread that reads the warm parent's answers must not keep the interpreter from ending."""
    code = textwrap.dedent("""
        import pathlib, tempfile
        from numbook.run.runner import Runner
        root = pathlib.Path(tempfile.mkdtemp())
        (root / "checks").mkdir()
        (root / "checks" / "a.py").write_text("import numpy\\nfrom numbook.check import value\\nvalue('x', 1)\\n")
        print(Runner(root, cache_dir=None, preload=("numpy",)).result("a.py").status)
        from numbook.run.warm import _PARENTS
        print(*[z.home for z in _PARENTS.values()])
    """)
    here = str(Path(numbook.__file__).resolve().parents[1])   # the numbook this test imported, not another copy
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([here, os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30, check=False,
                          env=env)
    status, home = done.stdout.split("\n")[:2]
    assert (done.returncode, status) == (0, "ok"), done.stderr
    assert home and not os.path.exists(home)   # closed at exit: its folder is gone


ENV_NAMES = ["TMPDIR", "TEMP", "TMP", "MPLCONFIGDIR", "XDG_CACHE_HOME", "XDG_CONFIG_HOME", "TORCHINDUCTOR_CACHE_DIR",
             "TRITON_CACHE_DIR", "TORCH_HOME", "NUMBOOK_ROOT", "NUMBOOK_SCRATCH", "NUMBOOK_READS", "NUMBOOK_MEMORY",
             "NUMBOOK_MEMORY_LIMIT", "NUMBOOK_CHECK", "NUMBOOK_FACTS", "NUMBOOK_DEVICE", "PYTHONHASHSEED",
             "PYTHONUNBUFFERED", "PYTHONDONTWRITEBYTECODE", "LC_NUMBOOK_TEST", "OMP_NUM_THREADS", "NB_DECLARED",
             "NB_UNDECLARED", "NUMBOOK_PERTURB"]
ENV_CHECK = """
    # numbook: env=NB_DECLARED, memory=2GiB
    import os{extra}
    from numbook.check import value
    for name in {names!r}:
        value(name, os.environ.get(name, "-"))
"""


@pytest.mark.parametrize("extra", ["", ", numpy"], ids=["fresh", "forked"])
def test_a_check_sees_exactly_the_environment_the_runner_builds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                extra: str) -> None:
    for name, val in [("LC_NUMBOOK_TEST", "x"), ("OMP_NUM_THREADS", "1"), ("NB_DECLARED", "yes"),
                      ("NB_UNDECLARED", "no"), ("NUMBOOK_DEVICE", "cpu: test")]:
        monkeypatch.setenv(name, val)
    root = project(tmp_path, env=ENV_CHECK.format(extra=extra, names=ENV_NAMES))
    res = Runner(root, cache_dir=None).result("env.py")
    assert res.status == "ok", res.stderr
    env = res.values
    scratch = Path(env["NUMBOOK_SCRATCH"])
    assert scratch.name.startswith("numbook-") and not scratch.is_relative_to(root)
    assert {k: env[k] for k in ("TMPDIR", "TEMP", "TMP")} == dict.fromkeys(("TMPDIR", "TEMP", "TMP"),
                                                                           str(scratch / "tmp"))
    assert (env["MPLCONFIGDIR"], env["XDG_CACHE_HOME"], env["XDG_CONFIG_HOME"]) == (
        str(scratch / "matplotlib"), str(scratch / "cache"), str(scratch / "config"))
    assert (env["TORCHINDUCTOR_CACHE_DIR"], env["TRITON_CACHE_DIR"], env["TORCH_HOME"]) == (
        str(scratch / "cache" / "torchinductor"), str(scratch / "cache" / "triton"), str(scratch / "cache" / "torch"))
    assert (env["NUMBOOK_ROOT"], env["NUMBOOK_READS"], env["NUMBOOK_CHECK"], env["NUMBOOK_FACTS"]) == (
        str(root.resolve()), str(scratch / "reads.txt"), "checks/env.py", str(root.resolve() / "checks/facts.yml"))
    assert (env["NUMBOOK_MEMORY"], env["NUMBOOK_MEMORY_LIMIT"], env["NUMBOOK_DEVICE"]) == (str(2 * 2**30), "as",
                                                                                          "cpu: test")
    assert (env["PYTHONHASHSEED"], env["PYTHONUNBUFFERED"], env["PYTHONDONTWRITEBYTECODE"]) == ("0", "1", "1")
    assert (env["LC_NUMBOOK_TEST"], env["OMP_NUM_THREADS"], env["NB_DECLARED"], env["NB_UNDECLARED"]) == (
        "x", "1", "yes", "-")
    assert env["NUMBOOK_PERTURB"] == "-"
    nudged = Runner(root, cache_dir=None).result("env.py", perturb="n")
    assert nudged.values.get("NUMBOOK_PERTURB") == "n"


def test_a_check_without_a_memory_limit_gets_none(tmp_path: Path) -> None:
    root = project(tmp_path, m="# numbook: memory=none\nimport os\nfrom numbook.check import value\n"
                               "value('m', os.environ['NUMBOOK_MEMORY'] or 'none')\n")
    assert Runner(root, cache_dir=None).result("m.py").values == {"m": "none"}


def test_the_device_is_named_by_nvidia_smi_when_a_gpu_answers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from numbook.run.machine import cpu_name, detect_device

    smi = tmp_path / "nvidia-smi"
    smi.write_text("#!/bin/sh\n[ \"$*\" = -L ] || exit 2   # nvidia-smi -L lists the GPUs, one a line\n"
                   "echo 'GPU 0: NVIDIA H200 (UUID: GPU-123)'\necho 'GPU 1: NVIDIA H200 (UUID: GPU-4)'\n",
                   encoding="utf-8")
    smi.chmod(0o755)
    monkeypatch.delenv("NUMBOOK_DEVICE", raising=False)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    assert detect_device() == "cuda: NVIDIA H200"
    smi.write_text("#!/bin/sh\necho 'No devices were found'\nexit 6\n", encoding="utf-8")
    assert detect_device() == cpu_name()
    smi.write_text("#!/bin/sh\necho 'Failed to initialize NVML: Driver/library version mismatch'\nexit 18\n",
                   encoding="utf-8")   # a failure that names no GPU, though its line has a colon
    assert detect_device() == cpu_name()
    smi.write_text("#!/bin/sh\necho 'garbled'\n", encoding="utf-8")
    assert detect_device().startswith("cpu: ")
    smi.write_text("#!/bin/sh\nexit 0\n", encoding="utf-8")
    assert detect_device() == cpu_name()
    monkeypatch.setattr(platform, "machine", lambda: "")   # a machine that does not say what it is
    assert detect_device() == cpu_name() and cpu_name().split()[:2] == ["cpu:", "unknown"]
    monkeypatch.setenv("NUMBOOK_DEVICE", "cuda: pretend")
    assert detect_device() == "cuda: pretend"


def test_nvidia_smi_is_run_in_one_place_which_names_the_device_and_the_gpu(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import numbook.run.machine as machine

    package = Path(numbook.__file__).parent
    assert [p.relative_to(package).as_posix() for p in sorted(package.rglob("*.py"))
            if '"nvidia-smi"' in p.read_text(encoding="utf-8")] == ["run/machine.py"]
    asked: list[tuple[str, ...]] = []

    def smi(*args: str, timeout: float = 20) -> list[str]:
        asked.append(args)
        return ["GPU 0: NVIDIA H200 (UUID: GPU-1)"] if args == ("-L",) else ["NVIDIA H200, 550.54"]

    monkeypatch.setattr(machine, "nvidia_smi", smi)
    monkeypatch.delenv("NUMBOOK_DEVICE", raising=False)
    assert (machine.detect_device(), machine.gpu_info()) == ("cuda: NVIDIA H200", machine.GpuInfo("NVIDIA H200",
                                                                                                    "550.54"))
    assert asked == [("-L",), ("--query-gpu=name,driver_version", "--format=csv,noheader")]


def test_the_runner_reads_checks_and_their_output_as_utf8_whatever_the_locale(tmp_path: Path) -> None:
    """A build machine whose locale is plain C (ASCII): the runner still reads a check's source, header, output,
    the files it read and a notebook's error as UTF-8, as the check wrote them."""
    root = project(tmp_path, a="# numbook: alone\n# µs, ≤ and naïve: a check may say them\nimport os, sys, numpy\n"
                               "from numbook.check import value\nprint('µs ≤ 2')\nprint('naïve', file=sys.stderr)\n"
                               "open(__file__.replace('a.py', 'données.txt')).read()\n"
                               "value('parent', os.getppid())\n")
    (root / "checks" / "données.txt").write_text("é", encoding="utf-8")
    (root / "checks" / "b.py").write_text("import time\nfrom numbook.check import value\ntime.sleep(1)\nvalue('x', 1)\n"
                                          "print('fresh: µs')\n", encoding="utf-8")   # no numpy: a fresh interpreter
    run = textwrap.dedent(f"""
        import json, pathlib
        import numbook.run.standalone as standalone
        from numbook.run.runner import Runner
        runner = Runner(pathlib.Path({str(root)!r}), cache_dir=None, preload=("numpy",))
        cell = {{"cell_type": "code", "id": "c", "metadata": {{}}, "execution_count": None, "outputs": [],
                 "source": "import os\\nos.write(2, 'na\\u00efve \\u2264\\\\n'.encode())\\nos._exit(3)"}}
        try:   # the notebook of a.py, in a.py's sandbox: forked from the warm parent, as a.py is
            standalone.execute({{"nbformat": 4, "nbformat_minor": 5, "metadata": {{}}, "cells": [cell]}},
                               pathlib.Path({str(tmp_path)!r}), timeout=60, runner=runner, check=runner.resolve("a.py"))
            cells = {{"cells": "ran", "error": None}}
        except standalone.NotebookError as exc:
            cells = {{"cells": [], "error": str(exc)}}
        # the warm parent is up now: a forked check would finish well before b, were it not alone
        order = []
        res = runner.run_many(["a.py", "b.py"], progress=lambda done, total, r, running: order.append(r.check))["a.py"]
        assert order == ["checks/b.py", "checks/a.py"], order   # a's header says alone: it runs after b
        fresh = runner.result("b.py")
        seen = [res.status, res.stdout, res.stderr, sorted(res.reads), res.values.get("parent"), cells, fresh.stdout]
    """)
    here_seen: dict[str, object] = {}
    exec(run, here_seen)   # in this process (a UTF-8 locale) first: what the C locale must give too
    script = tmp_path / "run.py"
    script.write_text(run + "print(json.dumps(seen))\n", encoding="ascii")
    here = str(Path(numbook.__file__).resolve().parents[1])   # the numbook this test imported
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([here, os.environ.get("PYTHONPATH", "")]),
           "LC_ALL": "C", "LANG": "C", "PYTHONUTF8": "0", "PYTHONCOERCECLOCALE": "0"}
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, encoding="utf-8",
                          errors="replace", timeout=120, check=False, env=env)
    assert done.returncode == 0, done.stderr
    there, here = json.loads(done.stdout), json.loads(json.dumps(here_seen["seen"]))
    assert there[:4] + there[5:] == here[:4] + here[5:]   # all but the warm parent's pid
    status, stdout, stderr, reads, parent, cells, fresh = json.loads(done.stdout)
    assert fresh == "fresh: µs\n"
    assert (status, stdout, stderr) == ("ok", "µs ≤ 2\n", "naïve\n"), stderr
    assert "checks/données.txt" in reads and parent is not None
    assert cells == {"cells": [], "error": "naïve ≤"}


def test_a_cached_result_holds_while_the_facts_it_read_are_unchanged_whatever_else_the_facts_file_gains(
        tmp_path: Path) -> None:
    """Every check that reads a fact shares ``checks/facts.yml``: adding a fact for a new page, or editing one another
    check reads, must not re-run them all. An edit to an entry the check read does."""
    fact = "x:\n  value: 3\n  source: a datasheet\n  read: 2026-01-01\n"
    other = "y:\n  value: 7\n  source: a paper\n  read: 2026-01-01\n"
    root = project(tmp_path, a="from numbook.check import fact, value\nvalue('sq', fact('x', 'x') ** 2)\n")
    facts = root / "checks/facts.yml"
    facts.write_text(fact + other, encoding="utf-8")
    first = Runner(root, cache_dir=".cache").result("a.py")
    assert first.values == {"sq": 9} and first.reads["checks/facts.yml"].startswith("facts[x]:")
    facts.write_text(fact + other.replace("7", "8") + "z:\n  value: 1\n  source: a config\n  read: 2026-01-02\n",
                     encoding="utf-8")
    assert Runner(root, cache_dir=".cache").result("a.py").cached is True
    facts.write_text(fact.replace("3", "4") + other, encoding="utf-8")
    again = Runner(root, cache_dir=".cache").result("a.py")
    assert (again.cached, again.values) == (False, {"sq": 16})
