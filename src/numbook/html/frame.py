"""The frame the build puts around a page: a problem's H1, its conventions, Draws on and Used by, and the legend.

The page's own Markdown is converted as the author wrote it, so the text the book's pass verified is the
text converted and every line number is the file's own. The frame is made of elements, put into the
page's tree by two tree processors of the Markdown extension (``numbook.html.extension``):

- :func:`put_frame`, right after the block parser: the H1 (``I.4.B07 · Title``) and the conventions
  paragraph before the body, Draws on and Used by after it. The heading and list texts are inline
  Markdown (a title may hold code or math), so the inline processor, the table of contents and MkDocs'
  link resolution read them as they read the author's own; the conventions are shown as written;
- :func:`put_legend`, once the tree is indented for output: the legend, right after the page's first
  H1 and after the conventions paragraph the frame put under it.

:func:`frame_of` says what frame a page of the book gets; the MkDocs plugin hands it to the conversion
with the page (``numbook.html.session``).
"""

from __future__ import annotations

import os
import xml.etree.ElementTree as etree
from dataclasses import dataclass

from markdown.util import AtomicString

from numbook.core.book import Book, Entry
from numbook.core.page import ChapterMeta

__all__ = ["Frame", "Link", "frame_of", "put_frame", "put_legend", "legend"]

LEGEND = ("Numbers with a dotted underline were computed by this page's check for this build: hover, focus or "
          "tap one to see the value, the check, the device and the date. A ✓ marks a statement the check "
          "asserted, with both sides it compared.")
FIRST_PRINCIPLES = "Nothing earlier in the book: this problem starts from first principles."


@dataclass(frozen=True)
class Link:
    """A link to another page: its text (inline Markdown) and the page's source path relative to this one."""

    label: str
    href: str

    @property
    def markdown(self) -> str:
        return f"[{self.label}]({self.href})"


@dataclass(frozen=True)
class Frame:
    """What the build puts around one page."""

    title: str = ""                       # the H1 before the body ("": the page has its own, or none)
    conventions: str = ""                 # a problem's unit conventions, under its H1
    problem: bool = False                 # Draws on and Used by after the body
    draws_on: tuple[Link, ...] = ()
    first_principles: bool = False        # it draws on nothing: Draws on says so
    used_by: tuple[Link, ...] = ()
    legend: bool = False                  # the page has a check: how to read its marks, after the H1


def _rel(src: str, dst: str) -> str:
    return os.path.relpath(dst, os.path.dirname(src) or ".").replace(os.sep, "/")


def frame_of(book: Book, entry: Entry, markdown: str) -> Frame:
    """The frame of a page of ``book`` whose Markdown (front matter removed) is ``markdown``."""
    if entry.failed:
        return Frame()
    legend = bool(entry.check)
    if entry.problem:
        meta = entry.pmeta

        def link(pid: str) -> Link:
            return Link(f"{pid} · {book.problems[pid].title}", _rel(entry.uri, book.problems[pid].uri))

        return Frame(f"{meta.id} · {meta.title}", meta.conventions or "", True,
                     tuple(link(t) for t in meta.draws_on if t in book.problems), not meta.draws_on,
                     tuple(link(u) for u in book.users(meta.id)), legend)
    if isinstance(entry.meta, ChapterMeta) and not markdown.lstrip().startswith("# "):
        return Frame(f"{entry.meta.chapter} · {entry.meta.title}", legend=legend)
    return Frame(legend=legend)


def legend() -> etree.Element:
    """How to read the marks, said once per page that has a check (left out of the search index)."""
    p = etree.Element("p", {"class": "nb-legend", "data-search-exclude": ""})
    p.text = LEGEND
    return p


def _links(links: tuple[Link, ...]) -> etree.Element:
    ul = etree.Element("ul")
    for link in links:
        etree.SubElement(ul, "li").text = link.markdown
    return ul


def _text(tag: str, text: str) -> etree.Element:
    el = etree.Element(tag)
    el.text = text
    return el


def put_frame(root: etree.Element, frame: Frame) -> etree.Element | None:
    """Put the frame's H1 and conventions before the blocks of ``root``, Draws on and Used by after them; the
    conventions paragraph, if any (the legend goes after it)."""
    head = []
    conventions = None
    if frame.title:
        head.append(_text("h1", frame.title))
    if frame.conventions:
        conventions = etree.Element("p", {"class": "nb-conventions"})
        conventions.text = AtomicString(frame.conventions)   # shown as written, as the front matter holds it
        head.append(conventions)
    for at, el in enumerate(head):
        root.insert(at, el)
    if frame.problem:
        root.append(_text("h2", "Draws on"))
        if frame.draws_on:
            root.append(_links(frame.draws_on))
        if frame.first_principles:
            root.append(_text("p", FIRST_PRINCIPLES))
        if frame.used_by:
            root.append(_text("h2", "Used by"))
            root.append(_links(frame.used_by))
    return conventions


def put_legend(root: etree.Element, conventions: etree.Element | None = None) -> None:
    """Put the legend right after the first H1 of ``root`` (and after ``conventions`` where that follows it),
    or first where there is no H1. The tree is already indented for output: the legend follows the element
    before it directly, and takes over that element's line break."""
    h1 = next(root.iter("h1"), None)
    if h1 is None:
        root.insert(0, legend())
        return
    parent = next(p for p in root.iter() if any(child is h1 for child in p))
    at = list(parent).index(h1) + 1
    after = h1
    if conventions is not None and at < len(parent) and parent[at] is conventions and not (h1.tail or "").strip():
        after, at = conventions, at + 1
    el = legend()
    el.tail, after.tail = after.tail, None
    parent.insert(at, el)
