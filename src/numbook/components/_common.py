"""What every component shares: where a block is in the source, warnings, element helpers."""

from __future__ import annotations

import re
import xml.etree.ElementTree as etree
from pathlib import Path

from markdown import Markdown
from markdown.preprocessors import Preprocessor

from ..diagnostics import log
from ..verify import PageContext

__all__ = ["BLOCK_START", "Locator", "warn", "sub", "add_class", "has_class", "current_page"]

BLOCK_START = re.compile(r"^[ \t]*(/{3,})[ ]*([\w-]+)")
_FENCE = re.compile(r"^[ \t]*(`{3,}|~{3,})")
_FRONT_MATTER = re.compile(r"^-{3}[ \t]*\n(.*?\n)(?:\.{3}|-{3})[ \t]*\n", re.S)  # as mkdocs.utils.meta


class Locator(Preprocessor):
    """Record the source line of every component block, in order, before fences are stashed.

    A block does not know its line; it asks for the next recorded line of its name. Lines
    inside fenced code (an author guide showing the syntax) are skipped, as the blocks
    parser skips them.
    """

    def __init__(self, md: Markdown, names: set[str]) -> None:
        super().__init__(md)
        self.names = names
        self.lines: dict[str, list[int]] = {}
        self.ids: set[str] = set()

    def run(self, lines: list[str]) -> list[str]:
        self.lines = {}
        self.ids = set()
        fence: str | None = None
        for number, line in enumerate(lines, start=1):
            m = _FENCE.match(line)
            if m:
                mark = m.group(1)
                if fence is None:
                    fence = mark
                elif mark[0] == fence[0] and len(mark) >= len(fence) and not line.strip()[len(mark):]:
                    fence = None
                continue
            if fence is not None:
                continue
            b = BLOCK_START.match(line)
            if b and b.group(2).lower() in self.names:
                self.lines.setdefault(b.group(2).lower(), []).append(number)
        return lines

    def next_line(self, name: str, index: int) -> int | None:
        found = self.lines.get(name, [])
        return found[index] if index < len(found) else None


def current_page() -> PageContext | None:
    """The page the book's plugin says is being converted (``numbook.markdown_ext``)."""
    from .. import markdown_ext  # imported late: markdown_ext imports the runner

    return markdown_ext.current_page()


def _page(md: Markdown) -> tuple[str, int]:
    """The page being converted (its path for messages) and how many lines its front matter took.

    The book's plugin names the page for every conversion (``numbook.markdown_ext``); failing
    that, MkDocs's own ``relpath`` treeprocessor holds the page's ``File``. Outside MkDocs
    (unit tests) there is no page.
    """
    ctx = current_page()
    if ctx is not None:
        return str(ctx.path), int(ctx.line_offset)
    try:
        file = md.treeprocessors["relpath"].file  # type: ignore[attr-defined]
    except (KeyError, AttributeError):
        return "<markdown>", 0
    path = str(getattr(file, "src_uri", None) or getattr(file, "src_path", "<markdown>"))
    offset = 0
    abs_path = getattr(file, "abs_src_path", None)
    if abs_path:
        try:
            text = Path(abs_path).read_text(encoding="utf-8-sig")
        except OSError:
            text = ""
        m = _FRONT_MATTER.match(text)
        if m:
            offset = text[: m.end()].count("\n")
    return path, offset


def warn(md: Markdown, line: int | None, message: str) -> None:
    """Log a content fault as ``path:line: message`` under ``mkdocs.*`` (so --strict fails)."""
    path, offset = _page(md)
    where = f"{path}:{line + offset}" if line is not None else path
    log.warning(f"{where}: {message}")


def sub(parent: etree.Element, tag: str, text: str | None = None, **attrs: str) -> etree.Element:
    """Append a child element; ``class_`` and ``for_`` stand for ``class`` and ``for``."""
    el = etree.SubElement(parent, tag, {k.rstrip("_").replace("_", "-"): v for k, v in attrs.items()})
    if text is not None:
        el.text = text
    return el


def has_class(el: etree.Element, name: str) -> bool:
    return name in (el.get("class") or "").split()


def add_class(el: etree.Element, name: str) -> None:
    classes = (el.get("class") or "").split()
    if name not in classes:
        el.set("class", " ".join([*classes, name]))

