"""Results a test fixes in advance, for the verifier and the Markdown extension (``numbook.core.verify.Results``)."""

from __future__ import annotations

from collections.abc import Callable

from numbook.core.result import CheckResult


class Fixed:
    """``lookup(name)`` answers for each check a page names: ``Fixed(lambda name: RESULT)``."""

    def __init__(self, lookup: Callable[[str], CheckResult]) -> None:
        self.lookup = lookup

    def result(self, check: str, /) -> CheckResult:
        return self.lookup(check)
