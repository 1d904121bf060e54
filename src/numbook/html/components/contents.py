"""The book's contents, generated from the book at build time: parts, chapters and their problem counts.

    /// contents
    - Part I: the shapes and numbers of one forward pass
    - Part II: training
    ///

The build lists every part of the book (from its problem and chapter IDs), each chapter of a part with a link to
its page, its title, its one-line description and how many problems it has, in ID order. The list in the block
only names parts: ``Part I: …`` gives part I a title (a part without one is listed as ``Part V``). A line that is
not ``Part X: title``, a part named twice, or a part the book does not have, is a fault with the block's line.
Outside the numbook plugin's build (no book to list) the block is a fault too: a home page never shows an empty
contents in silence.
"""

from __future__ import annotations

import os
import re
import xml.etree.ElementTree as etree

from numbook.core.book import Book, id_key
from numbook.html.components._base import ComponentBlock
from numbook.html.components._common import sub
from numbook.html.extension import extension_of

__all__ = ["Contents", "contents_of", "Part", "Chapter"]

_PART = re.compile(r"^\s*Part\s+(?P<part>[IVX]+)\s*:\s*(?P<title>\S.*?)\s*$")


class Chapter:
    """One chapter as the contents lists it."""

    def __init__(self, cid: str, title: str, uri: str | None, description: str, problems: int) -> None:
        self.cid, self.title, self.uri, self.description, self.problems = cid, title, uri, description, problems


class Part:
    """One part of the book: its numeral and its chapters, in order."""

    def __init__(self, numeral: str, chapters: list[Chapter]) -> None:
        self.numeral, self.chapters = numeral, chapters

    @property
    def problems(self) -> int:
        return sum(c.problems for c in self.chapters)


def contents_of(book: Book) -> list[Part]:
    """The parts of ``book``, each with its chapters (the chapter pages', and those its problem IDs name)."""
    counts: dict[str, int] = {}
    for pid in book.problems:
        cid = pid.rsplit(".", 1)[0]
        counts[cid] = counts.get(cid, 0) + 1
    parts: dict[str, Part] = {}
    for cid in sorted(set(book.chapters) | set(counts), key=id_key):
        entry = book.chapters.get(cid)
        chapter = Chapter(cid, entry.title if entry is not None else f"Chapter {cid}",
                          entry.uri if entry is not None else None,
                          entry.description if entry is not None else "", counts.get(cid, 0))
        parts.setdefault(cid.split(".")[0], Part(cid.split(".")[0], [])).chapters.append(chapter)
    return list(parts.values())


def _count(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


class Contents(ComponentBlock):
    """``/// contents``: the parts and chapters of the book, with their problem counts and links."""

    NAME = "contents"
    ARGUMENT = False

    def on_create(self, parent: etree.Element) -> etree.Element:
        return sub(parent, "div", class_="nb-contents")

    def on_end(self, block: etree.Element) -> None:
        titles: dict[str, str] = {}
        written = [child for child in block]
        items = [li for ul in written if ul.tag == "ul" for li in ul]
        if any(child.tag != "ul" for child in written) or any(len(li) for li in items):
            self.warn("write only a list of part titles, one 'Part X: title' an item, or nothing")
        for li in items:
            m = _PART.match(li.text or "")
            if m is None:
                self.warn(f"'{(li.text or '').strip()}' is not 'Part X: title' (X a Roman numeral)")
            elif m.group("part") in titles:
                self.warn(f"part {m.group('part')} is named twice")
            else:
                titles[m.group("part")] = m.group("title")
        for child in written:
            block.remove(child)
        ext = extension_of(self.md)
        book = ext.session.book if ext is not None else None
        page = ext.session.current() if ext is not None else None
        if book is None:
            self.warn("no book to list: the numbook plugin fills this block when it builds the site")
            return
        parts = contents_of(book)
        for numeral in sorted(set(titles) - {p.numeral for p in parts}, key=id_key):
            self.warn(f"part {numeral} is named here, but the book has no chapter or problem in part {numeral}")
        here = os.path.dirname(page.uri) if page is not None and page.uri else ""
        for part in parts:
            section = sub(block, "section", class_="nb-contents__part")
            head = f"Part {part.numeral}" + (f" · {titles[part.numeral]}" if part.numeral in titles else "")
            sub(section, "h3", head)
            sub(section, "p", f"{_count(len(part.chapters), 'chapter')}, {_count(part.problems, 'problem')}",
                class_="nb-contents__count")
            ul = sub(section, "ul", class_="nb-contents__chapters")
            for ch in part.chapters:
                li = sub(ul, "li")
                label = f"{ch.cid} · {ch.title}"
                if ch.uri is not None:
                    link = sub(li, "a", label, href=os.path.relpath(ch.uri, here or ".").replace(os.sep, "/"))
                    link.tail = " "
                else:
                    li.text = label + " "
                sub(li, "span", f"({_count(ch.problems, 'problem')})", class_="nb-contents__n")
                if ch.description:
                    sub(li, "br")
                    sub(li, "span", ch.description, class_="nb-contents__desc")
