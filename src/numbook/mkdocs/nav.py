"""The Problems navigation: parts, chapters and problems of the book, put into MkDocs' navigation.

Each part of the book is a section; each chapter a section under it, with the chapter's page first
(titled "Overview") and its problems after it, in ID order. The whole goes after the item the
plugin's ``nav_after`` names (else last); the run report, when the plugin writes one, goes last.
"""

from __future__ import annotations

from typing import Any

from mkdocs.structure.files import Files
from mkdocs.structure.nav import Navigation, Section
from mkdocs.structure.pages import Page

from numbook.core.book import Book, id_key

__all__ = ["add_problems", "relink"]


def add_problems(nav: Navigation, book: Book, files: Files, *, title: str, after: str,
                 report: Page | None = None) -> None:
    """Put the book's parts, chapters and problems into ``nav`` (and the run report's page, last)."""
    if report is not None:
        report.title = "Run report"
        nav.items.append(report)
    if not book.problems and not book.chapters:
        relink(nav)
        return
    parts: dict[str, Section] = {}
    chapters: dict[str, Section] = {}
    for cid in sorted(set(book.chapters) | {pid.rsplit(".", 1)[0] for pid in book.problems}, key=id_key):
        part = cid.split(".")[0]
        if part not in parts:
            parts[part] = Section(f"Part {part}", [])
        ch = book.chapters.get(cid)
        ch_file = files.get_file_from_path(ch.uri) if ch else None
        ch_page = ch_file.page if ch_file is not None else None
        sec = Section(f"{cid} · {ch.title}" if ch else f"Chapter {cid}", [])
        if ch_page is not None:
            ch_page.title = "Overview"
            sec.children.append(ch_page)
        chapters[cid] = sec
        parts[part].children.append(sec)
    for pid in sorted(book.problems, key=id_key):
        entry = book.problems[pid]
        f = files.get_file_from_path(entry.uri)
        page = f.page if f else None
        if page is None:
            continue
        page.title = f"{pid} · {entry.title}"
        chapters[pid.rsplit(".", 1)[0]].children.append(page)
    top = Section(title, list(parts.values()))
    titles = [getattr(item, "title", None) for item in nav.items]
    at = titles.index(after) + 1 if after in titles else len(nav.items)
    nav.items.insert(at, top)
    relink(nav)


def relink(nav: Navigation) -> None:
    """Recompute the page order, parents and previous/next links after inserting sections."""
    pages: list[Page] = []

    def walk(items: list[Any], parent: Section | None) -> None:
        for item in items:
            item.parent = parent
            if isinstance(item, Page):
                pages.append(item)
            elif isinstance(item, Section):
                walk(item.children, item)

    walk(nav.items, None)
    for i, page in enumerate(pages):
        page.previous_page = pages[i - 1] if i else None
        page.next_page = pages[i + 1] if i + 1 < len(pages) else None
    nav.pages = pages
