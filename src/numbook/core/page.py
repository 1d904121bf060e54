"""Pages: front matter, validated by a schema, with the line each field stands on."""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass, field
from typing import Any

import yaml
from mkdocs.config import base
from mkdocs.config import config_options as c

from numbook.core.diagnostics import Diagnostic
from numbook.core.structure import FRONT_MATTER

__all__ = ["PageMeta", "ProblemMeta", "split_front_matter", "read_meta", "read_fields", "PROBLEM_ID", "SECTIONS"]

PROBLEM_ID = re.compile(r"^(?P<part>[IVX]+)\.(?P<chapter>\d+)\.(?P<series>[A-Z])(?P<number>\d{2})$")
CHAPTER_ID = re.compile(r"^[IVX]+\.\d+$")
SECTIONS = ("Statement", "Given", "Find", "Strategy", "Solution", "Answer", "Check — numeric",
            "Check — sanity", "Where this breaks", "Variation")
_ROUNDING = re.compile(r"decimal place|significant fig|rounded", re.IGNORECASE)
MATERIAL_KEYS = {"title", "description", "hide", "icon", "status", "template", "search", "tags",
                 "subtitle", "comments"}


class ProblemMeta(base.Config):
    """The front matter of a problem page."""

    id = c.Type(str)
    """The problem's ID, like ``I.4.B07`` (part, chapter, series and number)."""
    title = c.Type(str)
    """The problem's title, without its ID."""
    check = c.Type(str)
    """The check script, relative to ``checks/``."""
    draws_on = c.ListOfItems(c.Type(str), default=[])
    """IDs of the problems this one builds on; each must exist."""
    tags = c.ListOfItems(c.Type(str), default=[])
    """Topic tags."""
    conventions = c.Optional(c.Type(str))
    """Unit conventions a reader could read another way (MB = 10^6 bytes), shown under the title.

    No rounding rules: each claim is verified at the precision it is written with."""
    description = c.Optional(c.Type(str))
    """A one-line summary: the page's meta description (each number in it repeats a claim of the page)."""


class ChapterMeta(base.Config):
    """The front matter of a chapter page."""

    chapter = c.Type(str)
    """The chapter's ID, like ``I.4``."""
    title = c.Type(str)
    """The chapter's title."""
    check = c.Optional(c.Type(str))
    """An optional check for claims on the chapter page."""
    description = c.Optional(c.Type(str))
    """A one-line summary."""


class PageMeta(base.Config):
    """The front matter of any other page with claims (lessons, deep dives)."""

    check = c.Optional(c.Type(str))
    """The check whose values the page's claims bind to."""
    title = c.Optional(c.Type(str))
    """The page title."""
    lesson = c.Optional(c.Type(int))
    """The lesson number, for lesson pages."""
    prepares = c.ListOfItems(c.Type(str), default=[])
    """Problem IDs a lesson prepares for."""
    description = c.Optional(c.Type(str))
    """A one-line summary."""


@dataclass
class FrontMatter:
    data: dict[str, Any]
    body: str
    offset: int                              # lines before the body in the file
    lines: dict[str, int] = field(default_factory=dict)  # key -> 1-based line in the file
    error: Diagnostic | None = None


_PARSED: dict[str, Any] = {}
"""Front-matter blocks already parsed in this process, by their text: ``mkdocs serve`` reads every page's
front matter again on each rebuild, and only the edited page's has changed."""
_PARSED_MAX = 4096


def _parse_yaml(block: str) -> Any:
    """``yaml.safe_load(block) or {}``, remembered by the block's text; a copy of the memo's entry, so that a
    caller who changes it changes nothing another page reads. Errors are not remembered: they raise again."""
    if block not in _PARSED:
        if len(_PARSED) >= _PARSED_MAX:
            _PARSED.clear()
        _PARSED[block] = yaml.safe_load(block) or {}
    return copy.deepcopy(_PARSED[block])


def split_front_matter(raw: str, path: str) -> FrontMatter:
    """Split YAML front matter from the body; a malformed block is a diagnostic, not a silent {}."""
    m = FRONT_MATTER.match(raw)
    if not m:
        return FrontMatter({}, raw, 0)
    block = m.group(1) or ""
    rest = raw[m.end():]
    stripped = rest.lstrip("\n")
    offset = raw[: len(raw) - len(stripped)].count("\n")
    lines = {}
    for i, line in enumerate(block.splitlines(), start=2):
        km = re.match(r"^([A-Za-z_][\w-]*)\s*:", line)
        if km:
            lines[km.group(1)] = i
    try:
        data = _parse_yaml(block)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = (mark.line + 2) if mark is not None else 1
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        return FrontMatter({}, stripped, offset, lines, Diagnostic(path, line, f"malformed front matter: {problem}"))
    if not isinstance(data, dict):
        return FrontMatter({}, stripped, offset, lines,
                           Diagnostic(path, 1, "malformed front matter: expected 'key: value' lines"))
    return FrontMatter(data, stripped, offset, lines)


def read_meta(fm: FrontMatter, path: str) -> tuple[base.Config | None, list[Diagnostic]]:
    """Validate front matter against the schema for its kind of page."""
    if fm.error:
        return None, [fm.error]
    data = dict(fm.data)
    if "id" in data:
        schema: base.Config = ProblemMeta()
    elif "chapter" in data:
        schema = ChapterMeta()
    elif "check" in data or "lesson" in data:
        schema = PageMeta()
    else:
        return None, []
    if "precision" in data:
        return None, [Diagnostic(path, fm.lines.get("precision", 1),
                                 "front matter 'precision' is gone: each claim is verified at the precision it is "
                                 "written with; state unit conventions (MB = 10^6 bytes) in 'conventions:'")]
    extra = {k: data.pop(k) for k in list(data) if k in MATERIAL_KEYS and k not in schema}
    schema.load_dict(data)
    failed, warnings = schema.validate()
    diags = []
    for key, err in failed:
        diags.append(Diagnostic(path, fm.lines.get(key, 1), f"front matter '{key}': {err}"))
    for key, warn in warnings:
        diags.append(Diagnostic(path, fm.lines.get(key, 1), f"front matter '{key}': {warn}"))
    if isinstance(schema, ProblemMeta) and not failed and not PROBLEM_ID.match(schema.id):
        diags.append(Diagnostic(path, fm.lines.get("id", 1),
                                f"front matter 'id': '{schema.id}' is not a problem ID like I.4.B07"))
    if isinstance(schema, ProblemMeta) and not failed and schema.conventions and _ROUNDING.search(schema.conventions):
        diags.append(Diagnostic(path, fm.lines.get("conventions", 1),
                                "front matter 'conventions' states a rounding rule, which nothing enforces: each "
                                "claim is verified at the precision it is written with; keep unit conventions only"))
    if isinstance(schema, ChapterMeta) and not failed and not CHAPTER_ID.match(schema.chapter):
        diags.append(Diagnostic(path, fm.lines.get("chapter", 1),
                                f"front matter 'chapter': '{schema.chapter}' is not a chapter ID like I.4"))
    del extra
    return (None if diags else schema), diags


READ_FIELDS = ("title", "conventions")
"""Front matter the reader reads on the page (the description is published too, and checked apart)."""


def read_fields(meta: Any, lines: dict[str, int]) -> dict[str, tuple[int, str]]:
    """The front matter's ``title`` and ``conventions``, each with the file line it stands on: the verifier scans
    their numbers where the reader reads them (a build shows them above the page), and reports them there."""
    out: dict[str, tuple[int, str]] = {}
    for key in READ_FIELDS:
        text = meta.get(key) if meta is not None else None
        if isinstance(text, str) and text:
            out[key] = (lines.get(key, 1), text)
    return out
