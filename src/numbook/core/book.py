"""The book as a whole: its pages, their front matter, and the links between problems.

One scan serves both the MkDocs plugin and the author CLI, so both see the same book and
report the same faults.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from numbook.core.diagnostics import Diagnostic
from numbook.core.page import ChapterMeta, FrontMatter, Meta, PageMeta, ProblemMeta, read_meta, split_front_matter
from numbook.core.structure import PAGES_REMEMBERED

__all__ = ["Book", "Entry", "book_path", "id_key"]

_ROMAN = {"I": 1, "II": 2, "III": 3, "IV": 4, "V": 5, "VI": 6, "VII": 7, "VIII": 8, "IX": 9, "X": 10}


def id_key(pid: str) -> tuple[Any, ...]:
    """Sort key for IDs like I.4, I.4.B07, II.1.A10."""
    parts = pid.split(".")
    key: list[Any] = [_ROMAN.get(parts[0], 99)]
    for p in parts[1:]:
        key.append((0, int(p), "") if p.isdigit() else (1, 0, p))
    return tuple(key)


@dataclass
class Entry:
    """One page of the book with front matter this book reads."""

    uri: str                          # site path, e.g. problems/I.4.B07.md or lessons/x.md
    path: str                         # path an author recognises, relative to the project root
    meta: ProblemMeta | ChapterMeta | PageMeta | None
    lines: dict[str, int]             # front matter key -> line
    offset: int
    body: str
    failed: bool = False              # its front matter did not validate (that is its one fault)

    @property
    def check(self) -> str | None:
        return self.meta.get("check") if self.meta is not None else None

    @property
    def problem(self) -> bool:
        return isinstance(self.meta, ProblemMeta)

    @property
    def pmeta(self) -> ProblemMeta:
        """The front matter of a problem page (only for entries of ``Book.problems``)."""
        assert isinstance(self.meta, ProblemMeta), self.path
        return self.meta

    @property
    def description(self) -> str:
        """The front matter's one-line summary, or ""."""
        text = self.meta.get("description") if self.meta is not None else None
        return text if isinstance(text, str) else ""

    @property
    def scan_numbers(self) -> bool:
        """Every number typed on this page must be bound, an identifier, or marked free."""
        return self.meta is not None and self.check is not None

    @property
    def title(self) -> str:
        return str(self.meta.title) if self.meta is not None and self.meta.title else self.path


@functools.lru_cache(maxsize=PAGES_REMEMBERED)
def book_path(file: str, root: str) -> str:
    """A page's path relative to the book's root (symbolic links resolved), as diagnostics name it; as given where
    it lies outside. Remembered: resolving walks every folder of the path, and serve asks on every rebuild."""
    try:
        return Path(file).resolve().relative_to(Path(root).resolve()).as_posix()
    except ValueError:
        return file


@functools.lru_cache(maxsize=PAGES_REMEMBERED)
def _parsed(raw: str, path: str) -> tuple[FrontMatter, Meta | None, tuple[Diagnostic, ...]]:
    """A page's front matter read and checked, remembered by its text (serve reads every page on each rebuild)."""
    fm = split_front_matter(raw, path)
    meta, errors = read_meta(fm, path)
    return fm, meta, tuple(errors)


@dataclass
class Book:
    """All pages with front matter, indexed by problem and chapter ID."""

    root: Path
    entries: dict[str, Entry] = field(default_factory=dict)
    problems: dict[str, Entry] = field(default_factory=dict)
    chapters: dict[str, Entry] = field(default_factory=dict)
    diagnostics: list[Diagnostic] = field(default_factory=list)
    failed_ids: set[str] = field(default_factory=set)   # IDs of problem pages whose front matter failed
    # who draws on whom, built on the first users() after a change: one pass, not one per page (O(n) a page)
    _users: dict[str, list[str]] | None = field(default=None, init=False, repr=False, compare=False)

    def add(self, uri: str, file: Path) -> Entry:
        """Read one page's front matter and index it."""
        path = book_path(str(file), str(self.root))
        fm, meta, errors = _parsed(file.read_text(encoding="utf-8"), path)
        self.diagnostics += errors
        assert meta is None or isinstance(meta, ProblemMeta | ChapterMeta | PageMeta)
        entry = Entry(uri, path, meta, fm.lines, fm.offset, fm.body, failed=bool(errors))
        self.entries[uri] = entry
        self._users = None
        if errors and isinstance(fm.data.get("id"), str):
            self.failed_ids.add(fm.data["id"])  # links to it are not faults of their own
        if isinstance(meta, ProblemMeta):
            if meta.id in self.problems:
                self.diagnostics.append(Diagnostic(path, fm.lines.get("id", 1),
                                                   f"problem ID '{meta.id}' is also used by "
                                                   f"{self.problems[meta.id].path}"))
            else:
                self.problems[meta.id] = entry
        elif isinstance(meta, ChapterMeta):
            self.chapters[meta.chapter] = entry
        return entry

    @classmethod
    def scan(cls, root: Path, docs_dir: Path, problems_dir: Path) -> Book:
        """Every Markdown page under docs/ and problems/ (site paths as MkDocs gives them)."""
        book = cls(root)
        for f in sorted(docs_dir.rglob("*.md")):
            book.add(f.relative_to(docs_dir).as_posix(), f)
        for f in sorted(problems_dir.rglob("*.md")):
            book.add(f"{problems_dir.name}/{f.relative_to(problems_dir).as_posix()}", f)
        return book

    def checks(self) -> list[str]:
        """The checks the pages name (each once)."""
        return sorted({e.check for e in self.entries.values() if e.check})

    def users(self, pid: str) -> list[str]:
        """IDs of the problems that draw on ``pid``."""
        if self._users is None:
            index: dict[str, list[str]] = {}
            for q in sorted(self.problems, key=id_key):
                for target in dict.fromkeys(self.problems[q].pmeta.draws_on):
                    index.setdefault(target, []).append(q)
            self._users = index
        return list(self._users.get(pid, []))

    def link_diagnostics(self, entry: Entry) -> list[Diagnostic]:
        """A draws-on target that is no problem of the book is an error."""
        if not isinstance(entry.meta, ProblemMeta):
            return []
        return [Diagnostic(entry.path, entry.lines.get("draws_on", 1),
                           f"draws on '{t}', which is no problem in this book")
                for t in entry.meta.draws_on if t not in self.problems and t not in self.failed_ids]
