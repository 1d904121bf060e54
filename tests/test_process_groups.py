"""Checks that run a process group (``# numbook: processes=N``): real torch.distributed workers over loopback,
each under the check's guard, none outliving the check, their faults named by rank."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from numbook.core.result import CheckHeader, read_header
from numbook.run.cache import first_key
from numbook.run.runner import CheckResult, Runner
from numbook.run.standalone import script

pytestmark = pytest.mark.slow   # every test starts interpreters that import torch (about 1.5 s of CPU each)


def run(tmp_path: Path, source: str) -> tuple[Path, CheckResult]:
    root = tmp_path / "book"
    (root / "checks").mkdir(parents=True)
    (root / "docs").mkdir()
    (root / "docs/keep.md").write_text("keep\n", encoding="utf-8")
    (root / "checks/x.py").write_text(textwrap.dedent(source), encoding="utf-8")
    return root, Runner(root, cache_dir=None).result("x.py")


def gone(pid: int) -> bool:
    """Whether a process has ended (a zombie nobody has reaped yet has ended too)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True
    return state in ("Z", "X")


def test_a_process_group_runs_real_collectives_and_each_worker_keeps_the_checks_guard(tmp_path: Path) -> None:
    root, res = run(tmp_path, """\
        # numbook: processes=2, timeout=90
        import os
        import socket

        import torch
        import torch.distributed as dist

        from numbook.check import run_group, sanity, value


        def attempt(what, fn):
            try:
                fn()
            except Exception as exc:   # what the worker was told, for the test to read
                return f"{type(exc).__name__}: {exc}".splitlines()[0]
            return f"{what}: allowed"


        def worker(rank, world, keep):
            x = torch.full((4,), float(rank + 1))
            dist.all_reduce(x)
            return {
                "sum": x.tolist(),
                "threads": torch.get_num_threads(),
                "interfaces": sorted(line.split(":")[0].strip() for line in open("/proc/self/net/dev")
                                     if ":" in line),
                "python_connect": attempt("connect", lambda: socket.socket().connect(("192.0.2.1", 9))),
                "write": attempt("write", lambda: open(keep, "w")),
                "record": attempt("value", lambda: value("in_worker", 1)),
            }


        if __name__ == "__main__":
            outs = run_group(worker, 2, os.path.join(os.environ["NUMBOOK_ROOT"], "docs", "keep.md"))
            for k in ("sum", "threads", "python_connect", "write", "record"):
                value(k + "_0", outs[0][k] if k != "sum" else outs[0][k][0])
            value("interfaces", " ".join(outs[0]["interfaces"]))
            value("loopback_only", os.environ["NUMBOOK_LOOPBACK_ONLY"])
            value("same", outs[0]["sum"] == outs[1]["sum"])
    """)
    assert res.status == "ok", res.stderr
    v = res.values
    assert v["sum_0"] == 3.0 and v["same"] is True and v["threads_0"] == 1
    assert v["python_connect_0"] == (
        "PermissionError: numbook: check 'checks/x.py' may reach only loopback addresses (socket.connect "
        "('192.0.2.1', 9)): its process group talks over 127.0.0.1, and a check computes from files in the project, "
        "so that its result can be cached and reproduced")
    assert v["write_0"] == (
        "PermissionError: numbook: check 'checks/x.py' may not write docs/keep.md: a check writes only in its "
        "scratch directory (its working directory and TMPDIR), which the runner deletes afterwards")
    assert v["record_0"] == (
        "RuntimeError: value('in_worker') was called in a worker process: a worker returns what it computed, and "
        "the check's main process records it (after run_group() returns)")
    if v["loopback_only"] == "1":   # the kernel gave the check a network namespace: only lo, for C++ too
        assert v["interfaces"] == "lo"
    assert (root / "docs/keep.md").read_text() == "keep\n"


def test_a_connection_from_cpp_reaches_no_address_but_loopback(tmp_path: Path) -> None:
    _, res = run(tmp_path, """\
        # numbook: processes=1, timeout=90
        import datetime
        import os

        import torch.distributed as dist

        from numbook.check import run_group, value


        def worker(rank, world):
            try:   # a TCPStore client connects from C++: no audit hook sees it, the namespace refuses it
                dist.TCPStore("192.0.2.1", 29500, is_master=False, timeout=datetime.timedelta(seconds=5))
            except Exception as exc:
                return type(exc).__name__
            return "connected"


        if __name__ == "__main__":
            value("outcome", run_group(worker, 1)[0])
            value("loopback_only", os.environ["NUMBOOK_LOOPBACK_ONLY"])
    """)
    assert res.status == "ok", res.stderr
    if res.values["loopback_only"] != "1":
        pytest.skip("this kernel gives no network namespace to an unprivileged process: the audit hook alone guards")
    assert res.values["outcome"] != "connected"


def test_a_worker_that_raises_stops_the_group_and_the_fault_names_its_rank(tmp_path: Path) -> None:
    _, res = run(tmp_path, """\
        # numbook: processes=2, timeout=90
        import time

        from numbook.check import run_group


        def worker(rank, world):
            if rank == 1:
                raise ValueError("rank one cannot go on")
            time.sleep(600)   # rank 0 waits in vain: the group is stopped


        if __name__ == "__main__":
            run_group(worker, 2)
    """)
    assert res.status == "error"
    assert "numbook.check.GroupError: rank 1 of 2 raised; the group was stopped. Its traceback:" in res.stderr
    assert res.stderr.strip().splitlines()[-1] == "ValueError: rank one cannot go on"
    assert res.elapsed_s < 60


def test_a_hung_worker_is_killed_at_the_checks_timeout_and_no_worker_outlives_its_check(tmp_path: Path) -> None:
    _, res = run(tmp_path, """\
        # numbook: processes=2, timeout=25
        import os
        import time

        from numbook.check import run_group


        def worker(rank, world):
            print(f"worker pid {os.getpid()}", flush=True)
            time.sleep(600)


        if __name__ == "__main__":
            run_group(worker, 2, timeout_s=600)
    """)
    assert res.status == "timeout"
    pids = [int(line.split()[-1]) for line in res.stdout.splitlines() if line.startswith("worker pid")]
    assert len(pids) == 2, res.stdout
    deadline = time.monotonic() + 10
    while not all(gone(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert [p for p in pids if not gone(p)] == []


def test_run_group_stops_a_group_whose_rank_does_not_return_in_time(tmp_path: Path) -> None:
    _, res = run(tmp_path, """\
        # numbook: processes=2, timeout=90
        import time

        from numbook.check import run_group


        def worker(rank, world):
            if rank == 0:
                time.sleep(600)
            return rank


        if __name__ == "__main__":
            run_group(worker, 2, timeout_s=8)
    """)
    assert res.status == "error"
    assert res.stderr.strip().splitlines()[-1] == (
        "numbook.check.GroupError: rank 0 of 2 had not returned after 8 s (ranks not returned: [0]); the group was "
        "stopped")


@pytest.mark.parametrize(("header", "message"), [
    ("", "numbook: check 'checks/x.py' may not start another process: a check that runs a process group says how "
         "many in its header: # numbook: processes=N"),
    ("# numbook: processes=1\n", "numbook: check 'checks/x.py' may not start another process: its header allows 1 "
                                 "(processes=1)"),
])
def test_a_check_starts_no_more_processes_than_its_header_allows(tmp_path: Path, header: str, message: str) -> None:
    _, res = run(tmp_path, header + textwrap.dedent("""\
        import multiprocessing

        if __name__ == "__main__":
            ctx = multiprocessing.get_context("fork")
            for _ in range(2):
                p = ctx.Process(target=print, args=("started",))
                p.start()
                p.join()
    """))
    assert res.status == "error"
    assert res.stderr.strip().splitlines()[-1] == "PermissionError: " + message


@pytest.mark.parametrize(("line", "message"), [
    ("processes=0", "processes='0': write the number of worker processes the check starts, 1 to 16 (processes=4)"),
    ("processes=17", "processes='17': write the number of worker processes the check starts, 1 to 16 (processes=4)"),
    ("processes=four", "processes='four': write the number of worker processes the check starts, 1 to 16 "
                       "(processes=4)"),
])
def test_the_processes_header_takes_a_count_from_1_to_16(line: str, message: str) -> None:
    assert read_header("# numbook: processes=8, timeout=60\n").processes == 8
    assert read_header("x = 1\n").processes == 0
    with pytest.raises(ValueError) as err:
        read_header(f"# numbook: {line}\n")
    assert str(err.value) == message


def test_the_cache_key_holds_the_world_size() -> None:
    def key(processes: int) -> str:
        return first_key("checks/x.py", b"same source", CheckHeader(processes=processes), versions={}, device="cpu",
                         timeout=60, memory=None)[0]

    assert len({key(0), key(2), key(4)}) == 3


def test_the_run_it_yourself_script_of_a_process_group_runs_with_plain_pytorch(tmp_path: Path) -> None:
    checks = tmp_path / "checks"
    checks.mkdir()
    (checks / "x.py").write_text(textwrap.dedent("""\
        # numbook: processes=3, timeout=90
        import torch
        import torch.distributed as dist

        from numbook.check import run_group, sanity, value


        def worker(rank, world, n):
            x = torch.arange(n, dtype=torch.float32) * (rank + 1)
            dist.all_reduce(x)
            return x.tolist()


        if __name__ == "__main__":
            outs = run_group(worker, 3, 4)
            sanity("same", outs[0] == outs[2])
            print("sums", value("sums", outs[0]))
    """), encoding="utf-8")
    text = script(checks / "x.py", checks, title="X")
    assert not re.search(r"^(from|import) numbook", text, re.M)
    out = tmp_path / "run" / "x.py"
    out.parent.mkdir()
    out.write_text(text, encoding="utf-8")
    blocked = "import runpy, sys; sys.modules['numbook'] = None; runpy.run_path(sys.argv[1], run_name='__main__')"
    ran = subprocess.run([sys.executable, "-c", blocked, str(out)], capture_output=True, text=True, timeout=120,
                         cwd=out.parent, env={k: v for k, v in os.environ.items() if not k.startswith("NUMBOOK")})
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.strip() == "sums [0.0, 6.0, 12.0, 18.0]"


def test_a_function_no_interpreter_can_import_runs_in_forked_workers(tmp_path: Path) -> None:
    code = textwrap.dedent("""\
        import torch
        import torch.distributed as dist
        from numbook.check import run_group

        torch.randn(256, 256) @ torch.randn(256, 256)   # the parent has used its threads: a fork must not hang

        def worker(rank, world):
            x = torch.ones(2) * rank
            dist.all_reduce(x)
            return x.tolist()

        print(run_group(worker, 2, timeout_s=60))
    """)
    # the cells of a notebook: the function lives in a namespace no new interpreter can import
    ran = subprocess.run([sys.executable, "-c", f"exec(compile({code!r}, '<cell>', 'exec'), {{'__name__': 'cell'}})"],
                         capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.strip() == "[[1.0, 1.0], [1.0, 1.0]]"


# The book's own process-group scripts run as a reader downloads them, in an environment with torch and numpy
# alone: tests/test_downloads.py (with every other problem's script, from the built site).
