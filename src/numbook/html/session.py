"""What a build shares with the Markdown conversions of its pages, passed as the extension's config.

MkDocs converts each page with a fresh ``markdown.Markdown`` built from ``mkdocs.yml``'s
extensions and their configs. The plugin puts one :class:`Session` into the ``numbook``
extension's config, with the build's reporter and results. Before MkDocs converts a page, the
plugin hands the session that page (:class:`SessionPage`: its context, its report from the
book's verification pass, ``numbook.core.bookpass``, and its frame), and takes it back once the
page is converted. The flow is one way: the plugin writes the session, the conversions read it,
and what they find goes to the reporter. Outside MkDocs, the extension's own config names the one
page it converts (``default``), and the extension verifies it itself. No process-wide state: the
session belongs to the plugin instance of one build.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from numbook.core.book import Book
from numbook.core.diagnostics import Reporter
from numbook.core.verify import PageContext, PageReport, Results
from numbook.html.frame import Frame

__all__ = ["Session", "SessionPage"]


@dataclass(frozen=True)
class SessionPage:
    """The page a conversion converts."""

    context: PageContext                  # its path and line offset (for messages), its check, its kind
    report: PageReport | None = None      # the book's pass verified it; None: the extension verifies the text
    frame: Frame | None = None            # what the build puts around it (numbook.html.frame)
    verify: bool = True                   # False where its front matter failed: that is its one fault
    uri: str = ""                         # its site path (docs/index.md is index.md): where its links start


@dataclass
class Session:
    """The build's reporter and results, the page being converted, and where rendered check fences are cached."""

    reporter: Reporter = field(default_factory=Reporter)
    results: Results | None = None          # the build's results (numbook.core.bookpass.BuildResults)
    html_cache: Path | None = None
    render_key: str = ""
    run_yourself: bool = False              # problem pages offer their check as a script and a notebook
    page: SessionPage | None = None         # set by the plugin while MkDocs converts a page
    book: Book | None = None                # the book being built (its contents: numbook.html.components.contents)
    default: PageContext | None = None      # outside MkDocs: the one page being converted

    def current(self) -> SessionPage | None:
        """The page being converted: the plugin's, else the configured one, else None (no page)."""
        if self.page is not None:
            return self.page
        return SessionPage(self.default) if self.default is not None else None

    def __deepcopy__(self, memo: dict[int, Any]) -> Session:  # MkDocs may deep-copy configs: share, never copy
        return self
