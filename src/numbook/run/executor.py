"""Run one check in its sandbox: its environment, its scratch folder, a warm or a fresh process, its output.

Each check runs under ``python -m numbook.run.sandbox`` (see there): in a scratch folder, with a
scrubbed environment, a memory limit, no network, no writes outside the scratch folder, and a
record of every file it read and folder it listed. It runs in a child of the warm parent
(numbook.run.warm) where it imports one of the libraries the warm parent preloads, else in a fresh
interpreter. Its output goes to files (the first megabyte of its output is kept, the last of its
errors); at its timeout, and after it ends, its process group is killed and so is every process it
left that escaped the group (see :func:`kill_escaped`).

The scratch folder (:func:`scratch_folder`) is a new temporary folder per run, removed after it:
``work/`` is the check's working folder, ``tmp/`` its TMPDIR, and the runner's files lie next to
them (``stdout.txt``, ``stderr.txt``, ``result.json`` that numbook.check writes, ``reads.txt`` that
the sandbox writes). :meth:`Executor.run` runs any script there as the check would run (the
run-it-yourself notebooks run their cells so); :meth:`Executor.run_check` runs the check itself and
reads its result into a CheckResult. Neither knows of the cache or of frozen results.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numbook.run.sandbox as sandbox
import numbook.run.warm as warm
from numbook.check import FACTS_ENV, MEASUREMENTS_ENV, PERTURB_ENV, RESULT_ENV
from numbook.core.result import CheckHeader, CheckResult, Status

__all__ = ["Executor", "Ran", "PASSED", "KEYED", "PRELOAD", "MACHINERY", "OUTPUT_LIMIT", "scratch_folder",
           "scrubbed_environment", "warm_environment", "read_list", "kill_group", "kill_escaped", "output"]

PASSED = frozenset({"PATH", "HOME", "LANG", "LANGUAGE", "TZ", "TERM", "PYTHONPATH", "VIRTUAL_ENV", "LD_LIBRARY_PATH",
                    "SYSTEMROOT", "CUDA_HOME", "CUDA_PATH"})
"""Passed to a check unchanged and not keyed: where things are, not what a result depends on."""
KEYED = frozenset({"OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMEXPR_NUM_THREADS",
                   "VECLIB_MAXIMUM_THREADS", "CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES",
                   "CUBLAS_WORKSPACE_CONFIG",
                   # the vector instructions the kernels may use, which set the order they sum in
                   "ATEN_CPU_CAPABILITY", "MKL_ENABLE_INSTRUCTIONS", "MKL_CBWR", "DNNL_MAX_CPU_ISA",
                   "ONEDNN_MAX_CPU_ISA", "OPENBLAS_CORETYPE", "NPY_DISABLE_CPU_FEATURES"})
"""Passed and keyed (numbook.run.cache): settings that can change what a check computes or measures."""

PRELOAD = ("torch", "numpy")
"""What the warm parent imports once for every check: installed libraries that read no setting at import."""

MACHINERY = hashlib.sha256(Path(sandbox.__file__).read_bytes()
                           + Path(warm.__file__).read_bytes()).hexdigest()[:20]
"""How checks are run (the sandbox and the warm parent): in every cache key, so a change to either runs every
check again."""

OUTPUT_LIMIT = 1_000_000
"""Bytes of a check's standard output (and of its error output) kept: a page shows them, and 10 MB of output
made a 13 MB page."""

_OOM = re.compile(r"MemoryError|DefaultCPUAllocator: can't allocate memory|Unable to allocate|std::bad_alloc|"
                  r"Cannot allocate memory")

_RECORDS = ("inputs", "values", "figures", "sanity", "lines", "cpu_s", "units", "dtypes", "facts", "fixed", "nudges",
            "measured", "uncertainty", "measurements")
"""What a check's result file holds (numbook.check's _write_result), each a field of CheckResult."""


@contextlib.contextmanager
def scratch_folder(prefix: str = "numbook-") -> Iterator[Path]:
    """A new scratch folder with ``work/`` (the working folder) and ``tmp/`` (the TMPDIR) in it; removed after."""
    with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
        scratch = Path(tmp).resolve()
        for sub in ("work", "tmp"):
            (scratch / sub).mkdir()
        yield scratch


def scrubbed_environment() -> dict[str, str]:
    """The runner's environment as a check may see it: PASSED, KEYED and the ``LC_*`` variables only."""
    return {k: v for k, v in os.environ.items() if k in PASSED or k in KEYED or k.startswith("LC_")}


def warm_environment() -> dict[str, str]:
    """The environment the warm parent starts in: what a fresh check's interpreter would start in, before the
    settings of one check (its scratch folder, its limit) are added."""
    return {**scrubbed_environment(), "PYTHONHASHSEED": "0", "PYTHONUNBUFFERED": "1", "PYTHONDONTWRITEBYTECODE": "1"}


@dataclass(frozen=True)
class Ran:
    """What one run left: its output, its error output, its exit code (None: stopped at its timeout), and the
    files it read as :func:`read_list` gives them."""

    stdout: str
    stderr: str
    returncode: int | None
    reads: dict[str, str | None]


class Executor:
    """Runs checks (or scripts in their place) in the sandbox for one project."""

    def __init__(self, root: Path, checks_dir: Path, preload: tuple[str, ...] = PRELOAD) -> None:
        self.root = root
        self.checks_dir = checks_dir
        self.preload = preload   # what the warm parent imports once; () runs each check in a fresh interpreter

    def environment(self, header: CheckHeader, scratch: Path, rel: str, *, limit: int | None, device: str,
                    perturb: str | None = None) -> dict[str, str]:
        """The check's environment: the runner's, scrubbed; what its header declares; the runner's settings."""
        env = scrubbed_environment()
        env.update({name: os.environ[name] for name in header.env if name in os.environ})
        tmp = scratch / "tmp"
        env.update({
            RESULT_ENV: str(scratch / "result.json"),
            "PYTHONHASHSEED": "0",
            "PYTHONUNBUFFERED": "1",
            "PYTHONDONTWRITEBYTECODE": "1",
            "NUMBOOK_DEVICE": device,
            "TMPDIR": str(tmp), "TEMP": str(tmp), "TMP": str(tmp),
            "MPLCONFIGDIR": str(scratch / "matplotlib"),
            "XDG_CACHE_HOME": str(scratch / "cache"),
            "XDG_CONFIG_HOME": str(scratch / "config"),
            "TORCHINDUCTOR_CACHE_DIR": str(scratch / "cache" / "torchinductor"),
            "TRITON_CACHE_DIR": str(scratch / "cache" / "triton"),
            "TORCH_HOME": str(scratch / "cache" / "torch"),
            sandbox.ROOT_ENV: str(self.root),
            sandbox.SCRATCH_ENV: str(scratch),
            sandbox.READS_ENV: str(scratch / "reads.txt"),
            sandbox.MEMORY_ENV: "" if limit is None else str(limit),
            sandbox.LIMIT_KIND_ENV: "data" if header.requires == "cuda" else "as",
            sandbox.CHECK_ENV: rel,
            sandbox.PROCESSES_ENV: str(header.processes),
            FACTS_ENV: str(self.checks_dir / "facts.yml"),
        })
        if perturb:
            env[PERTURB_ENV] = perturb
        return env

    def warm_parent(self, header: CheckHeader, check: Path) -> warm.WarmParent | None:
        """The warm parent to fork this check from, or None for a fresh interpreter: a check that imports
        none of the preloaded libraries (nor a helper of the checks folder, which may), a GPU check (no
        fork after CUDA), a check whose header passes variables through (read by the libraries when
        imported), or NUMBOOK_WARM=0."""
        if not self.preload or header.requires == "cuda" or header.env or warm.switched_off():
            return None
        libs = "|".join(re.escape(m) for m in self.preload)
        try:
            uses = re.search(rf"^[ \t]*(?:from[ \t]+(?:{libs}|_\w+)\b|import[ \t][^#\n]*?\b(?:{libs}|_\w+)\b)",
                             check.read_text(encoding="utf-8"), re.M)
        except OSError:
            uses = None
        if uses is None:
            return None
        return warm.parent(warm_environment(), self.preload)

    def run(self, script: Path, check: Path, header: CheckHeader, scratch: Path, env: dict[str, str],
            timeout: float) -> Ran:
        """Run ``script`` in ``scratch`` with ``env``, as the check at ``check`` (whose header is ``header``) runs:
        forked from the warm parent where the check would be, else in a fresh interpreter."""
        parent = self.warm_parent(header, check)
        ran = _forked(parent, script, scratch, env, timeout) if parent is not None else None
        if ran is None:
            ran = _fresh(script, scratch, env, timeout)
        stdout, stderr, returncode = ran
        return Ran(stdout, stderr, returncode, read_list(scratch / "reads.txt"))

    def run_check(self, path: Path, header: CheckHeader, base: CheckResult, *, device: str,
                  perturb: str | None = None, measurements: str | None = None) -> None:
        """Run the check at ``path`` and record the run in ``base``, which names the check and holds its limits:
        when it ran, for how long, its output, exit code and reads, its status, and what it recorded.

        ``measurements`` is the content of the file ``numbook.check.measurement()`` then reads its numbers from
        (numbook.run.frozen's replay), instead of measuring them."""
        with scratch_folder() as scratch:
            started = time.perf_counter()
            base.ran_at = _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
            env = self.environment(header, scratch, base.check, limit=base.memory_limit, device=device,
                                   perturb=perturb)
            if measurements is not None:
                (scratch / "measurements.json").write_text(measurements, encoding="utf-8")
                env[MEASUREMENTS_ENV] = str(scratch / "measurements.json")
            ran = self.run(path, path, header, scratch, env, base.timeout_s)
            if ran.returncode is None:
                base.status = Status.TIMEOUT
            base.elapsed_s = time.perf_counter() - started
            base.stdout, base.stderr, base.returncode, base.reads = ran.stdout, ran.stderr, ran.returncode, ran.reads
            if base.status != Status.TIMEOUT:
                _finish(base, scratch / "result.json")


def _forked(parent: warm.WarmParent, script: Path, scratch: Path, env: dict[str, str],
            timeout: float) -> tuple[str, str, int | None] | None:
    """(stdout, stderr, exit code or None on a timeout) of a child of the warm parent; None if it is gone."""
    out, err = scratch / "stdout.txt", scratch / "stderr.txt"
    started = parent.start(scratch / "work", env, out, err, check=script)
    if started is None:
        return None
    ident, pid = started
    rc = parent.wait(ident, timeout)
    timed_out = rc is None and parent.alive
    kill_group(pid)   # on a timeout, the check; in any case, whatever it left running in its session
    kill_escaped(scratch)   # and what left its session (a daemon, a double fork)
    if timed_out:
        parent.wait(ident, 30)
    stdout, stderr = output(out), output(err, tail=True)
    if rc is None and not timed_out:
        stderr += "\nnumbook: the warm parent the check was forked from ended before the check did"
        return stdout, stderr, -signal.SIGKILL
    return stdout, stderr, rc


def _fresh(script: Path, scratch: Path, env: dict[str, str], timeout: float) -> tuple[str, str, int | None]:
    """(stdout, stderr, exit code or None on a timeout) of the script in a fresh interpreter.

    Its output goes to files, not pipes: a child it leaves running (one that left its session too) would
    hold a pipe open, and a wait for the pipe's end would last as long as that child."""
    out, err = scratch / "stdout.txt", scratch / "stderr.txt"
    with out.open("wb") as fout, err.open("wb") as ferr:
        proc = subprocess.Popen(
            [sys.executable, "-X", "utf8", "-m", "numbook.run.sandbox", str(script)], cwd=scratch / "work",
            env=env, stdin=subprocess.DEVNULL, stdout=fout, stderr=ferr, start_new_session=True,
        )
    timed_out = False
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
    kill_group(proc.pid)   # on a timeout, the check; in any case, whatever it left running in its session
    if timed_out:
        proc.kill()   # also where the check moved itself out of its group
    proc.wait()
    kill_escaped(scratch)   # and what left its session
    return output(out), output(err, tail=True), None if timed_out else proc.returncode


def _finish(base: CheckResult, out_json: Path) -> None:
    """Set the status and records of a run that ended by itself."""
    if base.returncode != 0:
        last = base.stderr.strip().splitlines()[-1] if base.stderr.strip() else ""
        if base.memory_limit is not None and _OOM.search(last):
            base.status = Status.OUT_OF_MEMORY
        return
    try:
        data = json.loads(out_json.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        base.stderr += f"\n{base.check} did not write its values: does it import numbook.check?"
        return
    try:   # numbook.check writes every one of these (its _write_result); a check that wrote the file itself
        records = {name: data[name] for name in _RECORDS}
    except (KeyError, TypeError) as exc:
        why = f"no {exc}" if isinstance(exc, KeyError) else "not a JSON object"
        base.stderr += f"\n{base.check} wrote a result numbook cannot read ({why}): only numbook.check writes it"
        return
    base.status = Status.OK
    for name, record in records.items():
        setattr(base, name, record)


def kill_group(pid: int) -> None:
    """Kill the process group ``pid`` leads; one that is gone, or not this user's to signal, is no error."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def kill_escaped(scratch: Path) -> int:
    """Kill every process a check left behind outside its process group (a child started in a new session, a
    double fork): those whose environment names the check's scratch folder (every process a check starts
    inherits it unless it clears it), whose working folder lies in it, or that hold a file of it open (its
    output files). Linux only (elsewhere only the group is killed); how many were killed."""
    proc = Path("/proc")
    if not proc.is_dir():
        return 0
    mark = f"{sandbox.SCRATCH_ENV}={scratch}\0".encode()
    inside = str(scratch) + os.sep
    me = os.getpid()
    killed = 0
    for _ in range(3):   # again, for a child forked while the folder was searched
        found = []
        for entry in proc.iterdir():
            if not entry.name.isdigit() or int(entry.name) == me:
                continue
            try:
                if mark in (entry / "environ").read_bytes():
                    found.append(int(entry.name))
                    continue
                links = [entry / "cwd", *(entry / "fd").iterdir()]
            except OSError:   # gone, or another user's
                continue
            for link in links:
                with contextlib.suppress(OSError):
                    if (os.readlink(link) + os.sep).startswith(inside):
                        found.append(int(entry.name))
                        break
        for pid in found:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
                killed += 1
        if not found:
            break
    return killed


def output(path: Path, tail: bool = False) -> str:
    """A check's output file as text: its first OUTPUT_LIMIT bytes (the last for the error output, ``tail``, whose
    last line says why a check failed) and a note where the rest was cut."""
    try:
        with path.open("rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            if size > OUTPUT_LIMIT and tail:
                fh.seek(size - OUTPUT_LIMIT)
            data = fh.read(OUTPUT_LIMIT)
    except OSError:
        return ""
    text = data.decode("utf-8", errors="replace")
    if size <= OUTPUT_LIMIT:
        return text
    if tail:   # from the first whole line on
        return f"… error output cut to its last {_mb(OUTPUT_LIMIT)} of {_mb(size)}\n" + text.split("\n", 1)[-1]
    return text.rsplit("\n", 1)[0] + f"\n… output cut at {_mb(OUTPUT_LIMIT)} of {_mb(size)}\n"


def _mb(n: int) -> str:
    return f"{n / 1e6:.3g} MB"


def read_list(path: Path) -> dict[str, str | None]:
    """The files a run read, as the sandbox listed them: {path relative to the root (absolute outside it; ending
    in ``/`` for a folder it listed): hash or None}."""
    out: dict[str, str | None] = {}
    try:
        text = path.read_text(encoding="utf-8", errors="surrogateescape")
    except OSError:
        return out
    for line in text.splitlines():
        digest, sep, rel = line.partition("\t")
        if sep:
            name = Path(rel).as_posix()
            if rel.endswith("/") and not name.endswith("/"):   # a folder's listing
                name += "/"
            out[name] = None if digest == "-" else digest
    return dict(sorted(out.items()))
