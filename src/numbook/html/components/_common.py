"""What every component shares: where a block is in the source, warnings, element helpers."""

from __future__ import annotations

import re
import xml.etree.ElementTree as etree

from markdown import Markdown
from markdown.preprocessors import Preprocessor

from numbook.core.structure import walk
from numbook.html.extension import report

__all__ = ["BLOCK_START", "Locator", "warn", "sub", "add_class", "has_class"]

BLOCK_START = re.compile(r"^[ \t]*(/{3,})[ ]*([\w-]+)")


class Locator(Preprocessor):
    """Record the source line of every component block, in order, before fences are stashed.

    A block does not know its line; it asks for the next recorded line of its name. Lines
    that are code (``numbook.core.structure``: fenced or indented, as the blocks parser sees them)
    are skipped: an author guide showing the syntax starts no block.
    """

    def __init__(self, md: Markdown, names: set[str]) -> None:
        super().__init__(md)
        self.names = names
        self.lines: dict[str, list[int]] = {}
        self.ids: set[str] = set()
        self.unknown: list[tuple[int, str]] = []   # (line, name) of a block start of no name of ours

    def run(self, lines: list[str]) -> list[str]:
        self.lines = {}
        self.ids = set()
        self.unknown = []
        for ln in walk("\n".join(lines)):
            if ln.code:
                continue
            b = BLOCK_START.match(ln.text)
            if b and b.group(2).lower() in self.names:
                self.lines.setdefault(b.group(2).lower(), []).append(ln.index + 1)
            elif b:
                self.unknown.append((ln.index + 1, b.group(2)))
        return lines

    def next_line(self, name: str, index: int) -> int | None:
        found = self.lines.get(name, [])
        return found[index] if index < len(found) else None


def warn(md: Markdown, line: int | None, message: str) -> None:
    """Report a content fault as ``path:line: message`` on the build's one road (so --strict fails)."""
    report(md, line, message)


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

