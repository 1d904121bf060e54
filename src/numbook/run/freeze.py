"""``numbook freeze``: run every GPU check of a book on this machine's GPU and write its frozen measurements.

What a frozen file holds, and how a build without a GPU replays it, is numbook.run.frozen's; this
module drives a runner to make them, and refuses where no GPU can.
"""

from __future__ import annotations

from pathlib import Path

import numbook.run.machine as machine
from numbook.core.result import CheckResult
from numbook.run.frozen import cuda_checks, freeze, git_commit
from numbook.run.runner import Runner

__all__ = ["FreezeError", "freeze_checks"]


class FreezeError(RuntimeError):
    """Frozen results cannot be written here (no GPU, or a torch that cannot use it)."""


def freeze_checks(runner: Runner) -> tuple[list[Path], list[CheckResult | str]]:
    """Run every GPU check of the book on this machine's GPU and freeze its measurements: (files written, failed
    results, or why a successful run could not be frozen).

    Raises FreezeError, writing nothing, where no GPU answers, torch cannot use it, or the book is not a git
    checkout. The runner
    should have no cache, and run one check at a time so that a measurement has the GPU to itself.
    """
    info = machine.gpu_info()
    if info is None:
        raise FreezeError(f"no GPU here: nvidia-smi is missing or answers nothing (this build's device: "
                          f"{runner.device}). Frozen results are GPU figures, written only on a machine with an "
                          "NVIDIA GPU: run `nox -s freeze` on the GPU runner")
    runner.device = f"cuda: {info.name}"
    status = machine.gpu_status(runner.device)
    if not status.usable:
        raise FreezeError(f"{status.reason}: install a CUDA build of torch; nothing was frozen")
    commit = git_commit(runner.root)
    if not commit:
        raise FreezeError(f"{runner.root} is not a git checkout: a frozen file records the commit it was made at; "
                          "nothing was frozen")
    written: list[Path] = []
    failed: list[CheckResult | str] = []
    for res in runner.run_many(cuda_checks(runner.root, runner.checks_dir)).values():
        if res.ok and res.device.startswith("cuda"):
            try:
                written.append(freeze(res, root=runner.root, checks_dir=runner.checks_dir,
                                      file_hash=runner.file_hash, commit=commit))
            except ValueError as exc:
                failed.append(str(exc))
        else:
            failed.append(res)
    return written, failed
