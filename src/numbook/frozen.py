"""Frozen results: what a GPU check printed on a GPU, committed so CPU-only builds can show it.

A frozen result lives next to its check as ``checks/frozen/<check stem>.json``: the whole
result of the GPU run plus its provenance (device, driver, library versions, date and the
hash of the check's source). A build without a GPU shows it, labelled as frozen; a build
fails when the frozen result is older than its check's source, or when there is none.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .runner import CheckResult, Runner

__all__ = ["frozen_path", "load_frozen", "freeze"]


def frozen_path(runner: Runner, path: Path) -> Path:
    """Where the frozen result of the check at ``path`` lives."""
    return runner.checks_dir / "frozen" / f"{path.stem}.json"


def load_frozen(runner: Runner, path: Path, rel: str, base: CheckResult) -> CheckResult:
    """The frozen GPU result of a check, or an error result saying why there is none to show."""
    from .runner import CheckResult

    f = frozen_path(runner, path)
    if not f.is_file():
        base.status = "frozen-missing"
        base.stderr = (f"{rel} needs cuda and this build has no GPU ({runner.device}); "
                       f"there is no frozen result at {runner.rel(f)}: run `nox -s freeze` on a GPU machine")
        return base
    data = json.loads(f.read_text(encoding="utf-8"))
    res = CheckResult(**data)
    res.frozen, res.cached = True, False
    if res.source_hash != base.source_hash:
        base.status = "frozen-stale"
        base.stderr = (f"{rel} changed since its frozen result ({runner.rel(f)}, source {res.source_hash}, "
                       f"now {base.source_hash}, frozen {res.ran_at} on {res.device}): "
                       "refresh it with `nox -s freeze` on a GPU machine")
        return base
    return res


def freeze(runner: Runner, result: CheckResult) -> Path:
    """Write a GPU result as the frozen result of its check."""
    if not result.ok or not result.device.startswith("cuda"):
        raise ValueError(f"only a successful GPU run can be frozen ({result.check}: {result.status}, "
                         f"{result.device})")
    path = runner.root / result.check
    f = frozen_path(runner, path)
    f.parent.mkdir(parents=True, exist_ok=True)
    data = asdict(result)
    data["cached"] = False
    f.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return f
