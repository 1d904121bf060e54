"""Diagnostics: every problem the book finds, with the source location it belongs to."""

from __future__ import annotations

import logging
from dataclasses import dataclass

__all__ = ["Diagnostic", "log", "report"]

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


reported: list[Diagnostic] = []
"""Every diagnostic reported since the plugin last cleared it (one build)."""


def report(diagnostics: list[Diagnostic]) -> None:
    """Send each diagnostic to the ``mkdocs.plugins.numbook`` logger as a warning."""
    for d in diagnostics:
        reported.append(d)
        log.warning(str(d))
