"""A throwaway project of checks for runner tests: ``project(tmp_path, a="...")`` writes checks/a.py."""

from __future__ import annotations

import textwrap
from pathlib import Path


def project(tmp_path: Path, **checks: str) -> Path:
    (tmp_path / "checks").mkdir(parents=True, exist_ok=True)
    for name, src in checks.items():
        (tmp_path / "checks" / f"{name}.py").write_text(textwrap.dedent(src), encoding="utf-8")
    return tmp_path
