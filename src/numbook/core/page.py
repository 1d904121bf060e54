"""Pages: front matter, validated by a schema (the fields of a dataclass), with the line each field stands on."""

from __future__ import annotations

import copy
import dataclasses
import re
from dataclasses import dataclass, field
from typing import Any

import yaml

from numbook.core.diagnostics import Diagnostic
from numbook.core.structure import FRONT_MATTER

__all__ = ["Meta", "PageMeta", "ProblemMeta", "ChapterMeta", "split_front_matter", "read_meta", "read_fields",
           "PROBLEM_ID", "SECTIONS"]

PROBLEM_ID = re.compile(r"^(?P<part>[IVX]+)\.(?P<chapter>\d+)\.(?P<series>[A-Z])(?P<number>\d{2})$")
CHAPTER_ID = re.compile(r"^[IVX]+\.\d+$")
SECTIONS = ("Statement", "Given", "Find", "Strategy", "Solution", "Answer", "Check — numeric",
            "Check — sanity", "Where this breaks", "Variation")
_ROUNDING = re.compile(r"decimal place|significant fig|rounded", re.IGNORECASE)
MATERIAL_KEYS = {"title", "description", "hide", "icon", "status", "template", "search", "tags",
                 "subtitle", "comments"}


class Meta:
    """Front matter checked against the fields of a dataclass: the schema is the class's annotations.

    ``str`` must be a string, ``int`` an integer, ``list[str]`` a list of strings (``[]`` when absent), and
    ``X | None`` may be absent. A key the schema does not name is kept in ``extra`` and warned about. Fields read
    as attributes (``meta.id``) and by name (``meta.get("title")``)."""

    extra: dict[str, Any]

    @classmethod
    def names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in dataclasses.fields(cls) if f.name != "extra")  # type: ignore[arg-type]

    def get(self, key: str, default: Any = None) -> Any:
        return getattr(self, key) if key in self.names() else self.extra.get(key, default)

    @classmethod
    def load(cls, data: dict[str, Any]) -> tuple[Meta | None, list[tuple[str, str]], list[tuple[str, str]]]:
        """(the metadata or None, failures, warnings), each a (key, message) pair. Validation stops at the first
        failing field, in the schema's order; every unknown key is a warning, in the order written."""
        values: dict[str, Any] = {}
        failed: list[tuple[str, str]] = []
        for f in dataclasses.fields(cls):  # type: ignore[arg-type]
            if f.name == "extra":
                continue
            many = str(f.type).startswith("list[")
            if f.name not in data and many:   # a list may be left out: it is empty (written `tags:`, it is not)
                values[f.name] = []
                continue
            why = _invalid(str(f.type), data.get(f.name))
            if why:
                failed.append((f.name, why))
                break
            values[f.name] = data.get(f.name)
        names = cls.names()
        warnings = [(k, f"Unrecognised configuration name: {k}") for k in data if k not in names]
        if failed:
            return None, failed, warnings
        values["extra"] = {k: v for k, v in data.items() if k not in names}
        return cls(**values), failed, warnings


_REQUIRED = "Required configuration not provided."


def _invalid(annotation: str, value: Any) -> str:
    """Why ``value`` does not fit a field annotated ``annotation`` (``str``, ``int``, ``list[str]``, ``X | None``);
    empty where it fits. The messages are MkDocs' own, which front matter was validated with before."""
    optional = annotation.endswith(" | None")
    kind = annotation.removesuffix(" | None")
    if value is None:
        return "" if optional else _REQUIRED
    if kind.startswith("list["):
        if not isinstance(value, list):
            return f"Expected a list of items, but a {type(value)} was given."
        item = _TYPES[kind[5:-1]]
        bad = next((v for v in value if not isinstance(v, item)), _FITS)
        return "" if bad is _FITS else f"Expected type: {item} but received: {type(bad)}"
    return "" if isinstance(value, _TYPES[kind]) else f"Expected type: {_TYPES[kind]} but received: {type(value)}"


_TYPES: dict[str, type] = {"str": str, "int": int}
_FITS = object()


@dataclasses.dataclass(kw_only=True)
class ProblemMeta(Meta):
    """The front matter of a problem page."""

    id: str
    """The problem's ID, like ``I.4.B07`` (part, chapter, series and number)."""
    title: str
    """The problem's title, without its ID."""
    check: str
    """The check script, relative to ``checks/``."""
    draws_on: list[str]
    """IDs of the problems this one builds on; each must exist."""
    tags: list[str]
    """Topic tags."""
    conventions: str | None
    """Unit conventions a reader could read another way (MB = 10^6 bytes), shown under the title.

    No rounding rules: each claim is verified at the precision it is written with."""
    description: str | None
    """A one-line summary: the page's meta description (each number in it repeats a claim of the page)."""
    extra: dict[str, Any] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(kw_only=True)
class ChapterMeta(Meta):
    """The front matter of a chapter page."""

    chapter: str
    """The chapter's ID, like ``I.4``."""
    title: str
    """The chapter's title."""
    check: str | None
    """An optional check for claims on the chapter page."""
    description: str | None
    """A one-line summary."""
    extra: dict[str, Any] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(kw_only=True)
class PageMeta(Meta):
    """The front matter of any other page with claims (lessons, deep dives)."""

    check: str | None
    """The check whose values the page's claims bind to."""
    title: str | None
    """The page title."""
    lesson: int | None
    """The lesson number, for lesson pages."""
    prepares: list[str]
    """Problem IDs a lesson prepares for."""
    description: str | None
    """A one-line summary."""
    extra: dict[str, Any] = dataclasses.field(default_factory=dict)


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


def read_meta(fm: FrontMatter, path: str) -> tuple[Meta | None, list[Diagnostic]]:
    """Validate front matter against the schema for its kind of page."""
    if fm.error:
        return None, [fm.error]
    data = dict(fm.data)
    if "id" in data:
        schema: type[Meta] = ProblemMeta
    elif "chapter" in data:
        schema = ChapterMeta
    elif "check" in data or "lesson" in data:
        schema = PageMeta
    else:
        return None, []
    if "precision" in data:
        return None, [Diagnostic(path, fm.lines.get("precision", 1),
                                 "front matter 'precision' is gone: each claim is verified at the precision it is "
                                 "written with; state unit conventions (MB = 10^6 bytes) in 'conventions:'")]
    for k in [k for k in data if k in MATERIAL_KEYS and k not in schema.names()]:   # the theme's, not ours
        del data[k]
    meta, failed, warnings = schema.load(data)
    diags = [Diagnostic(path, fm.lines.get(key, 1), f"front matter '{key}': {msg}") for key, msg in failed + warnings]
    if isinstance(meta, ProblemMeta) and not PROBLEM_ID.match(meta.id):
        diags.append(Diagnostic(path, fm.lines.get("id", 1),
                                f"front matter 'id': '{meta.id}' is not a problem ID like I.4.B07"))
    if isinstance(meta, ProblemMeta) and meta.conventions and _ROUNDING.search(meta.conventions):
        diags.append(Diagnostic(path, fm.lines.get("conventions", 1),
                                "front matter 'conventions' states a rounding rule, which nothing enforces: each "
                                "claim is verified at the precision it is written with; keep unit conventions only"))
    if isinstance(meta, ChapterMeta) and not CHAPTER_ID.match(meta.chapter):
        diags.append(Diagnostic(path, fm.lines.get("chapter", 1),
                                f"front matter 'chapter': '{meta.chapter}' is not a chapter ID like I.4"))
    return (None if diags else meta), diags


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
