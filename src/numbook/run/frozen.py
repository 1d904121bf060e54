"""Frozen results: the raw measurements a GPU check made on a GPU, committed so CPU-only builds can derive from them.

A frozen file lives next to its check as ``checks/frozen/<check stem>.json``. It holds only what the
check measured through ``numbook.check.measurement()`` (times, the device's name, errors read off the
GPU) and their provenance: device, driver, library versions, date, the hash of the check's source,
every file the GPU run read with its hash, the hash of the numbook package that made it, the git
commit it was made at, and a digest over all of that. A build without a usable GPU replays the check
on its CPU, in the sandbox like any other check, with ``measurement()`` returning the frozen numbers:
every value, sanity and figure is derived again on each build, so a forged measurement that breaks a
sanity (a bandwidth above the device's peak) fails every build. The build fails when the frozen file is
older than its check's source or its reads, when there is none, or when it is no such file (derived
values in it, no reads, no tool hash, no commit, or a digest that does not match: edited by hand).

The digest detects a hand edit, not a determined forger: it is computed from the file's content, and
whoever can commit can also re-run the freeze. The protection is that sanities are recomputed each build.

A check that declares ``requires=cuda`` runs live only where a GPU answers ``nvidia-smi`` and
the installed torch can use it (numbook.run.machine's ``gpu_status``); ``NUMBOOK_DEVICE`` alone
cannot make a CPU pass for a GPU. Frozen files are written by ``numbook freeze`` alone (``nox -s
freeze``; numbook.run.freeze), which refuses to run on a machine without such a GPU.

This module knows no runner: its functions take the project's root, its checks folder and
``file_hash(rel)``, the hash of a file a run read as the result cache computes it.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from numbook.core.result import CheckResult, Status, read_header
from numbook.run.cache import _facts_keys, facts_digest, relative
from numbook.run.machine import nvidia_smi

__all__ = ["FORMAT", "FileHash", "Replay", "frozen_path", "load_frozen", "replayed", "replay_file", "changed_reads",
           "facts_digest", "narrow_facts", "tool_dir", "freeze", "cuda_checks", "digest", "tool_hash", "git_commit",
           "provenance"]

FORMAT = 2                      # the "numbook_frozen" field of a frozen file (1: a whole result; 2: measurements)
_FIX = "run `nox -s freeze` on a GPU machine"

FileHash = Callable[[str], str | None]
"""``file_hash(rel)``: the hash of a file a run read (numbook.run.cache's ``ResultCache.file_hash``)."""


def frozen_path(checks_dir: Path, path: Path) -> Path:
    """Where the frozen result of the check at ``path`` lives."""
    return checks_dir / "frozen" / f"{path.stem}.json"


@dataclass(frozen=True)
class Replay:
    """A frozen file that holds: the measurements a CPU build replays its check with, and their provenance."""

    file: str                        # the frozen file, relative to the root
    measurements: dict[str, Any]
    device: str
    driver: str
    versions: dict[str, str]
    ran_at: str
    reads: dict[str, str | None]


def load_frozen(path: Path, rel: str, base: CheckResult, reason: str, *, root: Path, checks_dir: Path,
                file_hash: FileHash) -> Replay | CheckResult:
    """The frozen GPU measurements of the check at ``path`` (``rel`` in the project), or ``base`` made an error result
    saying why there are none to replay; ``reason`` says why this build has no usable GPU."""
    f = frozen_path(checks_dir, path)
    where = relative(root, f)
    if not f.is_file():
        base.status = Status.FROZEN_MISSING
        base.stderr = (f"{rel} needs cuda and this build has no usable GPU ({reason}); "
                       f"there is no frozen result at {where}: {_FIX}")
        return base
    try:
        data = json.loads(f.read_text(encoding="utf-8"))
        problem = _invalid(data, rel) if isinstance(data, dict) else "it is not a JSON object"
    except (ValueError, TypeError, AttributeError, UnicodeDecodeError) as exc:
        problem = f"it cannot be read ({exc})"
    if problem:
        base.status = Status.FROZEN_INVALID
        base.stderr = f"{where} is not a frozen GPU result of {rel}: {problem}; {_FIX}"
        return base
    if data["source_hash"] != base.source_hash:
        base.status = Status.FROZEN_STALE
        base.stderr = (f"{rel} changed since its frozen GPU result was made: {where} is for source "
                       f"{data['source_hash']}, the check is now {base.source_hash} (frozen {data['ran_at']} on "
                       f"{data['device']}); refresh it with `nox -s freeze` on a GPU machine")
        return base
    changed = changed_reads(data["reads"], root, file_hash)
    if changed:   # what the check read (the harness it imports, its data) is part of the measurement too
        base.status = Status.FROZEN_STALE
        shown = ", ".join(changed[:3]) + (f" and {len(changed) - 3} more" if len(changed) > 3 else "")
        base.stderr = (f"{rel} read files that changed since its frozen GPU result was made ({shown}; frozen "
                       f"{data['ran_at']} on {data['device']}); refresh it with `nox -s freeze` on a GPU machine")
        return base
    return Replay(where, data["measurements"], data["device"], str(data.get("driver", "")), data["versions"],
                  data["ran_at"], data["reads"])


def replay_file(replay: Replay) -> str:
    """What the replayed check reads through ``numbook.check.MEASUREMENTS_ENV``."""
    return json.dumps({"file": replay.file, "measurements": replay.measurements})


def replayed(replay: Replay, res: CheckResult, *, root: Path, file_hash: FileHash) -> CheckResult:
    """Label a CPU run that derived its values from frozen measurements with the GPU run's provenance."""
    res.device, res.driver, res.versions, res.ran_at = replay.device, replay.driver, replay.versions, replay.ran_at
    res.frozen, res.cached = True, False
    tool = tool_dir(root)
    res.reads = dict(sorted({**{k: v for k, v in replay.reads.items() if not (tool and k.startswith(tool))},
                             **res.reads, replay.file: file_hash(replay.file)}.items()))
    return res


def changed_reads(reads: dict[str, str | None], root: Path, file_hash: FileHash) -> list[str]:
    """The files among ``reads`` (project file -> hash when it was read) whose content is not that now,
    leaving out the tool's own files (see ``tool_dir``): what makes a recorded result stale. A facts file
    recorded by the entries a check took from it (``facts_digest``) is compared on those entries only."""
    tool = tool_dir(root)

    def now(f: str, digest: str | None) -> str | None:
        keys = _facts_keys(digest)
        return facts_digest(root / f, keys) if keys is not None else file_hash(f)

    return [f for f, digest in sorted(reads.items())
            if not (tool and f.startswith(tool)) and now(f, digest) != digest]


def narrow_facts(reads: dict[str, str | None], res: CheckResult, root: Path, file_hash: FileHash,
                 facts_file: str) -> dict[str, str | None]:
    """``reads`` with the facts file's whole-file hash replaced by ``facts_digest`` of the entries ``res`` took
    through ``fact()``, when the file is still as the run read it (else it is left as it is: stale)."""
    digest = reads.get(facts_file)
    if digest is None or _facts_keys(digest) is not None or file_hash(facts_file) != digest:
        return dict(reads)
    keys = [str(f["key"]) for f in res.facts.values()]
    return {**reads, facts_file: facts_digest(root / facts_file, keys)}


def tool_dir(root: Path) -> str:
    """The numbook package's folder relative to the root ("src/numbook/"), if it lies in the project.

    The tool's own files (the check API, the sandbox) are machinery, not what a GPU figure measures:
    an edit to them does not make a frozen result stale; the harness and the data a check reads do.
    """
    here = Path(__file__).resolve().parents[1]   # the numbook package
    try:
        return here.relative_to(root).as_posix() + "/"
    except ValueError:
        return ""


_KEYS = ("numbook_frozen", "check", "source_hash", "device", "driver", "ran_at", "versions", "elapsed_s",
         "provenance", "measurements", "reads", "tool_hash", "commit", "digest")
"""Every field a frozen file may hold: the raw measurements of a GPU run and their provenance, nothing derived."""


def digest(data: dict[str, Any]) -> str:
    """sha256 over the canonical JSON of every field of a frozen file but ``digest`` itself."""
    body = {k: v for k, v in data.items() if k != "digest"}
    return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def _invalid(data: dict[str, Any], rel: str) -> str:
    """Why a parsed frozen file is not the GPU measurements of ``rel``; empty when it is."""
    if data.get("numbook_frozen") != FORMAT:
        return f"its numbook_frozen is {data.get('numbook_frozen')!r}, not {FORMAT}"
    extra = sorted(k for k in data if k not in _KEYS)
    if extra:
        return (f"it holds {', '.join(extra)}: a frozen file holds the raw measurements of the GPU run only, and "
                "every value, sanity and figure is derived from them on each build")
    if data.get("check") != rel:
        return f"it is the result of {data.get('check')}"
    device = data.get("device")
    if not isinstance(device, str) or not device.startswith("cuda"):
        return f"it was made on {device or 'an unnamed device'}, and a CPU run is never shown as a GPU figure"
    for name in ("source_hash", "ran_at"):
        if not isinstance(data.get(name), str) or not data[name]:
            return f"it records no {name.replace('_', ' ')}"
    if not isinstance(data.get("versions"), dict):
        return "it records no versions"
    held = data.get("measurements")
    if not isinstance(held, dict) or not held or not all(isinstance(m, dict) and "value" in m for m in held.values()):
        return "it records no measurements"
    reads = data.get("reads")
    if (not isinstance(reads, dict) or not reads
            or not all(isinstance(h, str) and h or h is None for h in reads.values())):
        return "it records no reads (the files the GPU run read, with their hashes)"
    if rel not in reads:
        return "its reads do not list the check itself"
    if not isinstance(data.get("tool_hash"), str) or not data["tool_hash"]:
        return "it records no tool hash (the hash of the numbook package that made it)"
    if not isinstance(data.get("commit"), str) or not data["commit"]:
        return "it records no commit (the git commit it was made at)"
    if "digest" not in data:
        return "it has no digest"
    if data["digest"] != digest(data):
        return "its digest does not match its content: it was edited after `numbook freeze` wrote it"
    return ""


def tool_hash() -> str:
    """sha256 over the numbook package's own files (names and contents): which tool made a frozen file."""
    here = Path(__file__).resolve().parents[1]   # the numbook package
    h = hashlib.sha256()
    for f in sorted(p for p in here.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
        h.update(f.relative_to(here).as_posix().encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()


def git_commit(root: Path) -> str:
    """The commit checked out at ``root``; empty outside a git checkout."""
    return _run(["git", "rev-parse", "--verify", "HEAD"], cwd=root)


def freeze(result: CheckResult, *, root: Path, checks_dir: Path, file_hash: FileHash, commit: str | None = None
           ) -> Path:
    """Write the measurements of a GPU run, with their provenance and digest, as the frozen file of its check."""
    if not result.ok or not result.device.startswith("cuda"):
        raise ValueError(f"only a successful GPU run can be frozen ({result.check}: {result.status}, "
                         f"{result.device})")
    if result.versions.get("torch", "").endswith("+cpu"):
        raise ValueError(f"{result.check} ran with torch {result.versions['torch']}, a CPU build: not a GPU result")
    if not result.measurements:
        raise ValueError(f"{result.check} recorded no measurement: a GPU check records what it measures on the GPU "
                         "with numbook.check.measurement(), and a build without a GPU derives every value from those")
    commit = commit if commit is not None else git_commit(root)
    if not commit:
        raise ValueError(f"{root} is not a git checkout: a frozen file records the commit it was made at")
    f = frozen_path(checks_dir, root / result.check)
    data: dict[str, Any] = {
        "numbook_frozen": FORMAT, "check": result.check, "source_hash": result.source_hash,
        "device": result.device, "driver": result.driver, "ran_at": result.ran_at, "versions": result.versions,
        "elapsed_s": result.elapsed_s, "provenance": provenance(root),
        "measurements": result.measurements,
        "reads": dict(sorted({**result.reads, result.check: file_hash(result.check)}.items())),
        "tool_hash": tool_hash(), "commit": commit,
    }
    data["digest"] = digest(data)
    f.parent.mkdir(parents=True, exist_ok=True)
    f.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return f


def _run(cmd: list[str], cwd: Path | None = None) -> str:
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=30, check=False, cwd=cwd)
    except (OSError, subprocess.SubprocessError):
        return ""
    return out.stdout.strip() if out.returncode == 0 else ""


def provenance(root: Path, python: str = sys.executable) -> dict[str, str]:
    """What a frozen GPU figure depends on beyond the check and its commit: whether the work tree had uncommitted
    changes, CUDA and cuBLAS, clocks and power."""
    import importlib.metadata as md

    out = {"worktree": "uncommitted changes" if _run(["git", "status", "--porcelain"], cwd=root) else "clean"}
    out["cuda"] = _run([python, "-c", "import torch; print(torch.version.cuda)"]) or "unknown"
    for dist in ("nvidia-cublas-cu12", "nvidia-cublas-cu13", "nvidia-cublas"):
        try:
            out["cublas"] = md.version(dist)
            break
        except md.PackageNotFoundError:
            continue
    q = nvidia_smi("--query-gpu=clocks.sm,clocks.mem,clocks.max.sm,power.limit,pstate", "--format=csv,noheader",
                   timeout=30)
    if q:
        sm, mem, max_sm, power, pstate = ([p.strip() for p in q[0].split(",")] + [""] * 5)[:5]
        out.update({"sm_clock": sm, "mem_clock": mem, "max_sm_clock": max_sm, "power_limit": power, "pstate": pstate})
    return out


def cuda_checks(root: Path, checks_dir: Path) -> list[str]:
    """Every check under ``checks_dir`` whose header says ``requires=cuda``, relative to the root."""
    found = []
    for path in sorted(checks_dir.rglob("*.py")):
        parts = path.relative_to(checks_dir).parts
        if any(p.startswith((".", "__")) or p == "frozen" for p in parts[:-1]):
            continue
        try:
            if read_header(path.read_text(encoding="utf-8")).requires == "cuda":
                found.append(relative(root, path))
        except (ValueError, UnicodeDecodeError):
            continue  # a bad header fails the build where the check is used
    return found
