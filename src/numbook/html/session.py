"""What a build shares with the Markdown conversions of its pages, passed as the extension's config.

MkDocs converts each page with a fresh ``markdown.Markdown`` built from ``mkdocs.yml``'s
extensions and their configs. The plugin puts one :class:`Session` into the ``numbook``
extension's config; a conversion finds its own page's context in it by the page's source
path, which MkDocs gives every conversion (its ``relpath`` tree processor holds the page's
``File``). No process-wide state: the session belongs to the plugin instance of one build.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from markdown import Markdown

from numbook.core.diagnostics import Reporter
from numbook.core.verify import PageContext, Record

__all__ = ["Session", "page_uri"]


def page_uri(md: Markdown) -> str | None:
    """The source path (``problems/I.4.B07.md``) of the page ``md`` converts under MkDocs, else None."""
    try:
        file = md.treeprocessors["relpath"].file  # type: ignore[attr-defined]
    except (KeyError, AttributeError):
        return None
    uri = getattr(file, "src_uri", None)
    return str(uri) if uri else None


_PLACEHOLDER = re.compile(r'<div class="nb-fence" data-nb-fence="(nb-fence-\d+)"></div>')


@dataclass
class Session:
    """Page contexts by source path, the build's reporter, and where rendered check fences are cached."""

    reporter: Reporter = field(default_factory=Reporter)
    pages: dict[str, PageContext] = field(default_factory=dict)
    html_cache: Path | None = None
    render_key: str = ""
    default: PageContext | None = None      # outside MkDocs: the one page being converted
    records: dict[str, list[Record]] = field(default_factory=dict)   # page path -> its verified markers
    claims: dict[str, dict[str, int]] = field(default_factory=dict)  # page path -> claims verified per check
    run_yourself: bool = False              # problem pages offer their check as a script and a notebook
    defer_fences: bool = False              # fences become placeholders, filled in after search indexing
    fences: dict[str, str] = field(default_factory=dict)   # placeholder token -> the fence's HTML

    def defer(self, html: str) -> str:
        """A placeholder for ``html`` when fences are deferred (see ``fill``), else ``html`` itself."""
        if not self.defer_fences:
            return html
        token = f"nb-fence-{len(self.fences)}"
        self.fences[token] = html
        return f'<div class="nb-fence" data-nb-fence="{token}"></div>'

    def fill(self, html: str) -> str:
        """Put the deferred fences back into a page's HTML."""
        if not self.fences or "data-nb-fence=" not in html:
            return html
        return _PLACEHOLDER.sub(lambda m: self.fences.get(m.group(1), m.group(0)), html)

    def context(self, md: Markdown) -> PageContext | None:
        uri = page_uri(md)
        if uri is not None and uri in self.pages:
            return self.pages[uri]
        return self.default

    def path_of(self, md: Markdown) -> str:
        """The page's path for messages, even on a page the book has no context for."""
        ctx = self.context(md)
        return ctx.path if ctx is not None else (page_uri(md) or "<markdown>")

    def offset_of(self, md: Markdown) -> int:
        ctx = self.context(md)
        return ctx.line_offset if ctx is not None else 0

    def __deepcopy__(self, memo: dict[int, Any]) -> Session:  # MkDocs may deep-copy configs: share, never copy
        return self
