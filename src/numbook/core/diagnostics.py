"""Diagnostics: every fault the book finds, with the source location it belongs to, on one road.

Every part of the tooling (claims, components, check fences, notebooks, the runner, lint)
turns a fault into a :class:`Diagnostic` and hands it to the build's :class:`Reporter`. The
reporter logs it as a warning under ``mkdocs.plugins.numbook`` (so ``mkdocs build --strict``
counts it) and keeps it, so the plugin can still fail a build whose warnings ``--quiet`` hid,
list the faults of a page on that page under ``mkdocs serve``, and count them at the end.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

__all__ = ["Diagnostic", "Reporter", "log"]

log = logging.getLogger("mkdocs.plugins.numbook")
"""Under ``mkdocs.*`` so that ``mkdocs build --strict`` counts its warnings."""


@dataclass(frozen=True)
class Diagnostic:
    """One error: where it is (``path:line``) and what is wrong."""

    path: str
    line: int
    message: str
    detail: str = ""

    def __str__(self) -> str:
        head = f"{self.path}:{self.line}: {self.message}"
        return f"{head}\n{self.detail}" if self.detail else head


@dataclass
class Reporter:
    """The one road of faults for one build (or one standalone conversion)."""

    faults: list[Diagnostic] = field(default_factory=list)
    level: int = logging.WARNING
    """Warnings fail ``--strict``; ``mkdocs serve`` logs at INFO and shows the faults on the page instead."""

    def report(self, diagnostics: list[Diagnostic]) -> None:
        """Log each new diagnostic and keep it; the same fault reported twice is logged once."""
        for d in diagnostics:
            if d in self.faults:
                continue
            self.faults.append(d)
            log.log(self.level, str(d))

    def for_path(self, path: str) -> list[Diagnostic]:
        return [d for d in self.faults if d.path == path]

    def clear(self) -> None:
        self.faults.clear()
