"""The warm parent (numbook.run.warm): a check that imports torch or numpy is forked from a process that
imported them once, and it must behave exactly as it would in a fresh interpreter: same values, output
and reads, its own session and scratch folder, the scrubbed environment, the sandbox's refusals, a
timeout that kills it, its exit code, and fresh random seeds."""

from __future__ import annotations

import os
import re
import signal
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import pytest

import numbook.run.standalone as standalone
import numbook.run.warm as warm_mod
from _project import project
from numbook.core.result import read_header
from numbook.run.executor import warm_environment
from numbook.run.runner import Runner
from numbook.run.warm import OLD_WARM_ENV, WARM_ENV, WarmParent, close_all


@pytest.fixture(autouse=True)
def _own_warm_parent() -> None:
    """Each test starts its own warm parent: the runner shares one per process, which would let only the
    first test of a session see how a warm parent is started."""
    close_all()



LIGHT = ("numpy",)   # a warm parent that starts in a fraction of a second: what these tests fork needs no torch


def run_as_notebook(runner: Runner, check: Path, *cells: str, timeout: float) -> dict[str, Any]:
    """Run ``cells`` as the run-it-yourself notebook of ``check`` runs (standalone.execute with the runner: in the
    check's sandbox, forked from the warm parent where the check would be): ``{"cells": [{"execution_count",
    "outputs"}...], "error": None}``, or ``{"cells": [], "error": what the run raised}``."""
    nb = {"nbformat": 4, "nbformat_minor": 5, "metadata": {},
          "cells": [{"cell_type": "code", "id": f"c{i}", "metadata": {}, "execution_count": None, "outputs": [],
                     "source": src} for i, src in enumerate(cells)]}
    try:
        ran = standalone.execute(nb, check.parent, timeout=int(timeout), runner=runner, check=check)
    except standalone.NotebookError as exc:
        return {"cells": [], "error": str(exc)}
    return {"cells": [{"execution_count": c["execution_count"], "outputs": c["outputs"]} for c in ran["cells"]],
            "error": None}


WHO = """
    import os, random, sys, tempfile
    import numpy as np
    from numbook.check import given, value
    n = given("n", 4)
    value("square", n * n)
    value("parent", os.getppid())
    value("session_leader", os.getsid(0) == os.getpid())
    value("cwd_is_work", os.path.basename(os.getcwd()) == "work")
    value("tmp_is_scratch", tempfile.gettempdir() == os.environ["TMPDIR"])
    value("stray", os.environ.get("NUMBOOK_TEST_STRAY", "absent"))
    value("hashseed", os.environ.get("PYTHONHASHSEED"))
    value("draws", [random.random(), float(np.random.rand())])
    value("main", __name__)
    value("utf8", sys.flags.utf8_mode)
    value("hash", hash("numbook"))            # the parent's PYTHONHASHSEED=0, as a fresh interpreter's
    print("square", n * n)
"""


def test_a_check_that_imports_numpy_is_forked_and_sees_what_a_fresh_interpreter_sees(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = project(tmp_path, who=WHO)
    monkeypatch.setenv("NUMBOOK_TEST_STRAY", "leaked")   # the runner's own environment: never the check's
    forked = Runner(root, cache_dir=None).result("who.py")
    again = Runner(root, cache_dir=None).result("who.py")
    monkeypatch.setenv(WARM_ENV, "0")
    fresh = Runner(root, cache_dir=None).result("who.py")
    assert (forked.status, fresh.status) == ("ok", "ok"), forked.stderr + fresh.stderr
    assert forked.values["parent"] != os.getpid()          # a child of the warm parent ...
    assert fresh.values["parent"] == os.getpid()           # ... where a fresh interpreter is the runner's own child
    for res in (forked, fresh):
        assert res.values["square"] == 16 and res.stdout == "square 16\n" and res.stderr == ""
        assert res.values["session_leader"] and res.values["cwd_is_work"] and res.values["tmp_is_scratch"]
        assert (res.values["stray"], res.values["hashseed"], res.values["main"]) == ("absent", "0", "__main__")
    assert set(forked.reads) == set(fresh.reads) - {"src/numbook/sandbox.py"} and "checks/who.py" in forked.reads
    assert (forked.values["utf8"], forked.values["hash"]) == (fresh.values["utf8"], fresh.values["hash"]) and \
        forked.values["utf8"] == 1
    assert forked.values["draws"] != again.values["draws"]   # seeded afresh, as an interpreter seeds from the OS


def test_a_forked_check_keeps_the_sandbox_the_timeout_and_its_exit_code(tmp_path: Path) -> None:
    root = project(
        tmp_path,
        slow="# numbook: timeout=1\nimport numpy, time\ntime.sleep(30)\n",
        bad="import numpy\nx = 1\nraise ValueError('no')\n",
        code="import numpy, sys\nprint('bye')\nsys.exit(3)\n",
        writes="import numpy, pathlib\npathlib.Path(__file__).with_name('x.txt').write_text('no')\n",
    )
    res = Runner(root, cache_dir=None, preload=LIGHT).run_many(["slow.py", "bad.py", "code.py", "writes.py"])
    assert res["slow.py"].status == "timeout" and res["slow.py"].elapsed_s < 10
    assert res["bad.py"].status == "error" and res["bad.py"].stderr.splitlines() == [
        "Traceback (most recent call last):",
        f'  File "{root / "checks/bad.py"}", line 3, in <module>',
        "    raise ValueError('no')",
        "ValueError: no",
    ]
    assert (res["code.py"].returncode, res["code.py"].stdout) == (3, "bye\n")
    assert res["writes.py"].status == "error" and "PermissionError" in res["writes.py"].stderr
    assert not (root / "checks" / "x.txt").exists()


def test_a_check_that_imports_no_preloaded_library_or_passes_variables_runs_fresh(tmp_path: Path) -> None:
    plain = "import os\nfrom numbook.check import value\nvalue('parent', os.getppid())\n"
    root = project(tmp_path, plain=plain, passes="# numbook: env=FOO\nimport numpy\n" + plain)
    res = Runner(root, cache_dir=None).run_many(["plain.py", "passes.py"])
    assert res["plain.py"].values["parent"] == os.getpid()
    assert res["passes.py"].values["parent"] == os.getpid()


def test_a_notebook_runs_in_a_forked_shell_with_the_outputs_a_kernel_gives(tmp_path: Path) -> None:
    """Run it yourself: the notebook's cells run in one IPython shell forked from the warm parent. Each cell's
    printed text and the value of its last expression come out as a Jupyter kernel gives them."""
    import numbook.run.standalone as standalone

    def code(src: str) -> dict[str, object]:
        return {"cell_type": "code", "id": f"c{len(src)}", "metadata": {}, "execution_count": None, "outputs": [],
                "source": src}

    nb = {"nbformat": 4, "nbformat_minor": 5, "metadata": {},
          "cells": [{"cell_type": "markdown", "id": "m", "metadata": {}, "source": "# t"},
                    code("import numpy as np\nx = np.arange(3)\nprint('sum', int(x.sum()))"),
                    code("import warnings\nwarnings.warn('careful')\n{'n': int(x.size), 'rows': list(range(30))}"),
                    code("y = x * 2")]}

    def shown(out: dict[str, object]) -> list[list[tuple[str, str]]]:
        """Each cell's outputs, the name a shell gives a cell's code in a warning left out (a kernel names a
        temporary file, IPython alone '<ipython-input-N-…>')."""
        cells = [c for c in out["cells"] if c["cell_type"] == "code"]  # type: ignore[attr-defined,index]
        return [[(o.get("name") or o["output_type"],
                  re.sub(r"^\S+(:\d+: )", r"CELL\1", "".join(o.get("text") or o["data"]["text/plain"]), flags=re.M))
                 for o in c["outputs"]] for c in cells]

    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    forked = standalone.execute(nb, tmp_path / "a", timeout=60, runner=Runner(tmp_path, cache_dir=None))
    kernel = standalone.execute(nb, tmp_path / "b", timeout=60)
    assert shown(forked)[0] == [("stdout", "sum 3\n")] and shown(forked)[2] == []
    assert shown(forked)[1][-1] == ("execute_result", "{'n': 3,\n 'rows': [0,\n  1,\n  2,\n  3,\n  4,\n  5,\n  6,\n"
                                    "  7,\n  8,\n  9,\n  10,\n  11,\n  12,\n  13,\n  14,\n  15,\n  16,\n  17,\n  18,\n"
                                    "  19,\n  20,\n  21,\n  22,\n  23,\n  24,\n  25,\n  26,\n  27,\n  28,\n  29]}")
    assert "UserWarning: careful" in shown(forked)[1][0][1] and shown(forked)[1][0][0] == "stderr"
    assert shown(forked) == shown(kernel)
    assert [c.get("execution_count") for c in forked["cells"]] == [c.get("execution_count") for c in kernel["cells"]]

    nb["cells"].append(code("raise ValueError('no')"))  # type: ignore[attr-defined]
    with pytest.raises(standalone.NotebookError, match=r"^ValueError: no$"):
        standalone.execute(nb, tmp_path / "a", timeout=60, runner=Runner(tmp_path, cache_dir=None))


def test_the_cells_of_a_notebook_run_in_a_forked_shell_with_their_own_scratch_folder(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NUMBOOK_DEVICE", "cpu: test")
    runner = Runner(tmp_path, cache_dir=None, preload=LIGHT)
    check = project(tmp_path, nb="import numpy\n") / "checks" / "nb.py"
    cells = ["import os, sys, tempfile\nprint(os.getcwd() == os.path.join(os.environ['NUMBOOK_SCRATCH'], 'work'))",
             "{k: os.environ.get(k, '-') for k in ('NUMBOOK_DEVICE', 'PYTHONHASHSEED', 'NB_STRAY')}",
             "os.environ['TMPDIR'] == tempfile.gettempdir() and os.environ['MPLCONFIGDIR'].startswith("
             "os.path.dirname(os.environ['TMPDIR']))",
             "os.path.basename(os.environ['IPYTHONDIR']), os.path.basename(os.environ['XDG_CACHE_HOME']), "
             "os.path.basename(os.environ['XDG_CONFIG_HOME']), os.environ['TEMP'] == os.environ['TMP'] == "
             f"os.environ['TMPDIR'], os.getppid() != {os.getpid()}"]
    monkeypatch.setenv("NB_STRAY", "leaked")
    done = run_as_notebook(runner, check, *cells, timeout=60)
    assert done["error"] is None
    shown = [[(o.get("name") or o["output_type"], "".join(o.get("text") or o["data"]["text/plain"]))
              for o in c["outputs"]] for c in done["cells"]]
    assert shown == [[("stdout", "True\n")],
                     [("execute_result", "{'NUMBOOK_DEVICE': 'cpu: test', 'PYTHONHASHSEED': '0', 'NB_STRAY': '-'}")],
                     [("execute_result", "True")],
                     [("execute_result", "('ipython', 'cache', 'config', True, True)")]]
    assert [c["execution_count"] for c in done["cells"]] == [1, 2, 3, 4]


def test_a_notebook_that_hangs_or_kills_its_shell_is_an_error_and_no_warm_parent_means_a_fresh_interpreter(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    runner = Runner(tmp_path, cache_dir=None, preload=LIGHT)
    check = project(tmp_path, nb="import numpy\n") / "checks" / "nb.py"
    assert run_as_notebook(runner, check, "import time\ntime.sleep(30)", timeout=1) == {
        "cells": [], "error": "the notebook did not finish in 1 s"}
    died = run_as_notebook(runner, check, "import os\nos.write(2, b'going\\n')\nos._exit(3)", timeout=30)
    assert died == {"cells": [], "error": "going"}
    silent = run_as_notebook(runner, check, "import os\nos._exit(3)", timeout=30)
    assert silent == {"cells": [], "error": "the notebook's process ended without a result"}
    parent = "import os\nos.getppid()"   # the runner's own process, where no warm parent forks the shell

    def ran_by(r: Runner) -> str:
        return "".join(run_as_notebook(r, check, parent, timeout=30)["cells"][0]["outputs"][0]["data"]["text/plain"])

    assert ran_by(runner) != str(os.getpid())
    assert ran_by(Runner(tmp_path, cache_dir=None, preload=())) == str(os.getpid())
    monkeypatch.setenv(WARM_ENV, "0")
    assert ran_by(runner) == str(os.getpid())
    monkeypatch.delenv(WARM_ENV)
    monkeypatch.setenv(OLD_WARM_ENV, "0")   # the name it had before
    assert ran_by(runner) == str(os.getpid())


def test_a_check_that_kills_the_warm_parent_is_an_error_that_says_so_not_a_timeout(tmp_path: Path) -> None:
    root = project(tmp_path, killer="# numbook: timeout=20\nimport os, signal, time, numpy\n"
                                    "parent = open(f'/proc/{os.getppid()}/cmdline', 'rb').read()\n"
                                    "if b'numbook.run.warm' in parent:   # never the runner's own process\n"
                                    "    os.kill(os.getppid(), signal.SIGKILL)\n"
                                    "time.sleep(1)\n")
    res = Runner(root, cache_dir=None, preload=LIGHT).result("killer.py")
    assert res.status == "error" and res.elapsed_s < 15
    assert res.stderr.strip().endswith("numbook: the warm parent the check was forked from ended before the check did")


def test_a_library_that_prints_when_imported_cannot_break_the_warm_parents_answers(tmp_path: Path) -> None:
    """`import this` prints the Zen of Python: into /dev/null in the warm parent, not into its answers."""
    root = project(tmp_path, a="import os, numpy\nfrom numbook.check import value\nvalue('parent', os.getppid())\n")
    res = Runner(root, cache_dir=None, preload=("this", "numpy")).result("a.py")
    assert res.status == "ok" and res.values["parent"] != os.getpid() and res.stdout == ""


def test_what_the_warm_parent_imports_sees_the_scrubbed_environment_and_a_neutral_folder_and_says_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]) -> None:
    """A preloaded library runs its import-time code in the warm parent, once, for every check after: it must
    see what it would see in a fresh check (the scrubbed environment, not the runner's), must not run in the
    runner's folder nor in a shared one like /tmp (``python -m`` puts its folder first on sys.path, where any
    file could stand in for an installed module), and what it
    prints while imported goes nowhere (a fresh check's import writes into that check's own output)."""
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "probe.py").write_text("import os, sys\n"
                                  "SEEN = {'stray': os.environ.get('NUMBOOK_TEST_STRAY', 'absent'),\n"
                                  "        'cwd': os.getcwd()}\n"
                                  "print('probe: imported', file=sys.stderr, flush=True)\n", encoding="utf-8")
    root = project(tmp_path / "book", a="import probe\nfrom numbook.check import value\n"
                                       "value('stray', probe.SEEN['stray'])\nvalue('cwd', probe.SEEN['cwd'])\n")
    shared = tmp_path / "shared"   # the machine's temporary folder, where anyone may leave a file
    shared.mkdir()
    (shared / "probe.py").write_text("SEEN = {'stray': 'planted', 'cwd': 'planted'}\n", encoding="utf-8")
    monkeypatch.setattr(tempfile, "tempdir", str(shared))
    monkeypatch.setenv("PYTHONPATH", str(lib))
    monkeypatch.setenv("NUMBOOK_TEST_STRAY", "leaked")
    monkeypatch.chdir(root)
    runner = Runner(root, cache_dir=None, preload=("probe",))
    done = run_as_notebook(runner, root / "checks" / "a.py",
                     f"import probe\nprobe.SEEN['stray'], probe.SEEN['cwd'] != {str(root)!r}", timeout=60)
    res = runner.result("a.py")
    assert res.status == "ok", res.stderr
    assert res.values["stray"] == "absent" and res.values["cwd"] != str(root)
    assert done["error"] is None, done["error"]
    assert "".join(done["cells"][0]["outputs"][0]["data"]["text/plain"]) == "('absent', True)"
    assert "probe: imported" not in capfd.readouterr().err


def test_a_check_whose_warm_parent_dies_keeps_what_it_wrote_and_ends_as_killed(tmp_path: Path) -> None:
    root = project(tmp_path, killer="# numbook: timeout=20\nimport os, signal, sys, time, numpy\n"
                                    "print('partial', flush=True)\nprint('before', file=sys.stderr, flush=True)\n"
                                    "parent = open(f'/proc/{os.getppid()}/cmdline', 'rb').read()\n"
                                    "if b'numbook.run.warm' in parent:\n"
                                    "    os.kill(os.getppid(), signal.SIGKILL)\n"
                                    "time.sleep(1)\n")
    res = Runner(root, cache_dir=None, preload=LIGHT).result("killer.py")
    assert (res.status, res.returncode, res.stdout) == ("error", -9, "partial\n")
    assert res.stderr.splitlines() == ["before", "",
                                       "numbook: the warm parent the check was forked from ended before the check did"]


def test_bytes_that_are_not_utf8_come_back_replaced_not_as_a_crash(tmp_path: Path) -> None:
    """A check (or a notebook cell) may write any bytes; the runner shows them with U+FFFD, forked or fresh."""
    root = project(tmp_path, raw="import sys, numpy\nsys.stdout.buffer.write(b'bad \\xff\\n')\n"
                                 "sys.stderr.buffer.write(b'worse \\xfe\\n')\nsys.exit(1)\n")
    forked = Runner(root, cache_dir=None, preload=LIGHT).result("raw.py")
    fresh = Runner(root, cache_dir=None, preload=()).result("raw.py")
    for res in (forked, fresh):
        assert (res.status, res.stdout, res.stderr) == ("error", "bad \ufffd\n", "worse \ufffd\n")
    died = run_as_notebook(Runner(root, cache_dir=None, preload=LIGHT), root / "checks" / "raw.py",
                     "import os\nos.write(2, b'gone \\xff\\n')\nos._exit(3)", timeout=30)
    assert died == {"cells": [], "error": "gone \ufffd"}


def test_notebook_cells_leave_only_what_they_write_in_their_folder_and_a_timeout_ends_promptly(
        tmp_path: Path) -> None:
    work = tmp_path / "checks"   # the folder a notebook run outside the sandbox would run in: this one is not used
    runner = Runner(tmp_path, cache_dir=None, preload=LIGHT)
    check = project(tmp_path, nb="import numpy\n") / "checks" / "nb.py"
    done = run_as_notebook(runner, check, "print('hi')", "open('mine.txt', 'w').write('x')",
                     "import os\nsorted(os.listdir())", timeout=60)
    assert done["error"] is None
    assert "".join(done["cells"][2]["outputs"][0]["data"]["text/plain"]) == "['mine.txt']"
    assert sorted(p.name for p in work.iterdir()) == ["nb.py"]
    started = time.monotonic()
    assert run_as_notebook(runner, check, "import time\ntime.sleep(60)", timeout=1) == {
        "cells": [], "error": "the notebook did not finish in 1 s"}
    assert time.monotonic() - started < 15


def test_closing_a_warm_parent_ends_it_even_when_it_stopped_answering_or_already_died() -> None:
    stopped = WarmParent(warm_environment(), ("json",))
    assert stopped.ready
    os.kill(stopped.proc.pid, signal.SIGSTOP)         # it can no longer see its input close
    started = time.monotonic()
    stopped.close(grace=0.5)
    # killed and reaped by close itself: a Popen dropped while its process runs warns (the flaky ResourceWarning)
    assert stopped.proc.returncode == -signal.SIGKILL and 0.4 < time.monotonic() - started < 10
    assert not os.path.exists(stopped.home)

    dead = WarmParent(warm_environment(), ("json",))
    dead.proc.kill()
    dead.proc.wait()
    assert dead.proc.stdin is not None
    dead.proc.stdin.write(b"a request it never read\n")   # still in the pipe's buffer: closing must flush it
    dead.close()                                          # ... into a broken pipe, which is no error here
    dead.close()


def test_a_request_whose_warm_parent_dies_before_it_forks_gets_no_child() -> None:
    """start() waits for the child's pid; if the warm parent dies first, it answers None (run fresh), not an
    error and not a hang."""
    warm = WarmParent(warm_environment(), ("json",))
    os.kill(warm.proc.pid, signal.SIGSTOP)
    got: list[object] = []
    asker = threading.Thread(target=lambda: got.append(
        warm.start(Path("/"), {}, Path(os.devnull), Path(os.devnull), check="x.py")))
    asker.start()
    time.sleep(0.5)
    assert got == []                                      # waiting for a pid that cannot come
    warm.proc.kill()
    asker.join(timeout=10)
    assert got == [None] and not warm.alive
    assert warm.start(Path("/"), {}, Path(os.devnull), Path(os.devnull), check="x.py") is None
    warm.close()


@pytest.mark.parametrize(("source", "warm"), [
    ("import numpy\n", True),
    ("import numpy as np\n", True),
    ("from numpy import ones\n", True),
    ("import os, torch\n", True),
    ("def f():\n    import torch\n", True),
    ("from _memory import bytes_of\n", True),     # a helper of the checks folder may import either
    ("import _memory\n", True),
    ("import os\n# import numpy\n", False),
    ("import os  # numpy comes later\n", False),
    ("import numpyro\n", False),
    ("from numpy_financial import fv\n", False),
    ("x = 'import numpy'\n", False),
    ("# numbook: requires=cuda\nimport torch\n", False),   # no fork after CUDA
    ("# numbook: env=FOO\nimport numpy\n", False),          # a variable the library reads when imported
])
def test_which_checks_are_forked_from_the_warm_parent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: str,
                                                      warm: bool) -> None:
    asked: list[tuple[dict[str, str], tuple[str, ...]]] = []
    monkeypatch.setattr(warm_mod, "parent", lambda env, preload: asked.append((env, preload)) or "warm parent")
    root = project(tmp_path, c=source)
    got = Runner(root, cache_dir=None).executor.warm_parent(read_header(source), root / "checks" / "c.py")
    assert got == ("warm parent" if warm else None)
    assert asked == ([(warm_environment(), ("torch", "numpy"))] if warm else [])


def test_no_warm_parent_without_a_preload_a_file_or_when_switched_off(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(warm_mod, "parent", lambda env, preload: "warm parent")
    assert Runner(project(tmp_path, c="import numpy\n"), cache_dir=None).executor.warm_parent(
        read_header(""), tmp_path / "checks" / "c.py") == "warm parent"
    root = project(tmp_path, c="import numpy\n")
    header = read_header("import numpy\n")
    assert Runner(root, cache_dir=None, preload=()).executor.warm_parent(header, root / "checks" / "c.py") is None
    assert Runner(root, cache_dir=None).executor.warm_parent(header, root / "checks" / "gone.py") is None
    monkeypatch.setenv(WARM_ENV, "0")
    assert Runner(root, cache_dir=None).executor.warm_parent(header, root / "checks" / "c.py") is None
    monkeypatch.delenv(WARM_ENV)
    monkeypatch.setenv(OLD_WARM_ENV, "0")   # the name it had before
    assert Runner(root, cache_dir=None).executor.warm_parent(header, root / "checks" / "c.py") is None
    monkeypatch.setenv(WARM_ENV, "1")       # the new name, where both are set
    assert Runner(root, cache_dir=None).executor.warm_parent(header, root / "checks" / "c.py") == "warm parent"


def test_the_warm_parent_gets_the_scrubbed_environment_a_fresh_check_would(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NUMBOOK_TEST_STRAY", "leaked")
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    monkeypatch.setenv("LC_NUMBOOK_TEST", "x")
    monkeypatch.setenv("PYTHONHASHSEED", "random")
    env = warm_environment()
    assert "NUMBOOK_TEST_STRAY" not in env and env["PATH"] == os.environ["PATH"]
    assert (env["OMP_NUM_THREADS"], env["LC_NUMBOOK_TEST"]) == ("3", "x")
    assert (env["PYTHONHASHSEED"], env["PYTHONUNBUFFERED"], env["PYTHONDONTWRITEBYTECODE"]) == ("0", "1", "1")


def test_waiting_for_a_forked_child_gives_its_exit_code_once_or_none_on_a_timeout(tmp_path: Path) -> None:
    root = project(tmp_path, quick="import sys\nsys.exit(3)\n", slow="import time\ntime.sleep(60)\n")
    warm = WarmParent(warm_environment(), ("json",))
    try:
        (tmp_path / "work").mkdir()
        quick = warm.start(tmp_path / "work", warm_environment(), tmp_path / "q.out", tmp_path / "q.err",
                           check=root / "checks" / "quick.py")
        slow = warm.start(tmp_path / "work", warm_environment(), tmp_path / "s.out", tmp_path / "s.err",
                          check=root / "checks" / "slow.py")
        assert quick is not None and slow is not None and quick[0] != slow[0]
        assert warm.wait(quick[0], 30) == 3
        assert quick[0] not in warm._replies          # answered and forgotten
        started = time.monotonic()
        assert warm.wait(slow[0], 0.5) is None        # still running
        assert 0.4 < time.monotonic() - started < 10
        os.killpg(slow[1], signal.SIGKILL)
        assert warm.wait(slow[0], 30) == -signal.SIGKILL
        assert warm._replies == {}
    finally:
        warm.close()


def test_a_warm_parent_whose_process_cannot_start_leaves_no_folder_behind(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise OSError("no interpreter there")

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr(warm_mod.subprocess, "Popen", refuse)
    with pytest.raises(OSError, match="no interpreter there"):
        WarmParent(warm_environment(), ("json",))
    assert list(tmp_path.iterdir()) == []
