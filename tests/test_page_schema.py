"""Front matter is validated without MkDocs (numbook.core.page), with the messages MkDocs' schema gave before.

Each schema is written again here with MkDocs' config options, and both must fail, warn and accept alike."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from mkdocs.config import base
from mkdocs.config import config_options as c

from numbook.core.page import ChapterMeta, Meta, PageMeta, ProblemMeta


class _Problem(base.Config):
    id = c.Type(str)
    title = c.Type(str)
    check = c.Type(str)
    draws_on = c.ListOfItems(c.Type(str), default=[])
    tags = c.ListOfItems(c.Type(str), default=[])
    conventions = c.Optional(c.Type(str))
    description = c.Optional(c.Type(str))


class _Chapter(base.Config):
    chapter = c.Type(str)
    title = c.Type(str)
    check = c.Optional(c.Type(str))
    description = c.Optional(c.Type(str))


class _Page(base.Config):
    check = c.Optional(c.Type(str))
    title = c.Optional(c.Type(str))
    lesson = c.Optional(c.Type(int))
    prepares = c.ListOfItems(c.Type(str), default=[])
    description = c.Optional(c.Type(str))


SCHEMAS: list[tuple[type[Meta], type[base.Config]]] = [(ProblemMeta, _Problem), (ChapterMeta, _Chapter),
                                                        (PageMeta, _Page)]
VALUES = st.sampled_from([None, "I.4.B07", "", 3, True, 2.5, [], ["a"], ["a", 1], [None], {}, ("a",)])
KEYS = st.sampled_from(["id", "title", "check", "draws_on", "tags", "conventions", "description", "chapter",
                        "lesson", "prepares", "titel"])


def mkdocs_says(schema: type[base.Config], data: dict[str, Any]) -> tuple[list[tuple[str, str]], set[tuple[str, str]]]:
    cfg = schema()
    cfg.load_dict(dict(data))
    failed, warnings = cfg.validate()
    return [(k, str(e)) for k, e in failed], set(warnings)   # MkDocs warns unknown keys in a set's order


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(KEYS, VALUES, max_size=6))
def test_every_schema_fails_and_warns_as_mkdocs_did(data: dict[str, Any]) -> None:
    for ours, theirs in SCHEMAS:
        meta, failed, warnings = ours.load(data)
        assert (failed, set(warnings)) == mkdocs_says(theirs, data)
        assert (meta is None) == bool(failed)


def test_a_valid_problem_reads_as_attributes_and_by_name() -> None:
    meta, failed, warnings = ProblemMeta.load({"id": "I.4.B07", "title": "T", "check": "x.py", "titel": "typo"})
    assert isinstance(meta, ProblemMeta) and not failed
    assert (meta.id, meta.get("title"), meta.draws_on, meta.conventions, meta.extra) == (
        "I.4.B07", "T", [], None, {"titel": "typo"})
    assert warnings == [("titel", "Unrecognised configuration name: titel")]
    assert ProblemMeta.load({"id": "I.4.B07", "title": "T"})[1] == [("check", "Required configuration not provided.")]
    assert ProblemMeta.load({"id": "I.4.B07", "title": "T", "check": "x.py", "tags": None})[1] == [
        ("tags", "Required configuration not provided.")]
