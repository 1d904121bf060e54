"""The quick checks of a page read from its Markdown: the one reading the build and ``numbook verify`` share.

A quiz's key rules need no HTML: which options are marked ``[x]``, which claims each option's line
holds (as written, ``[[120|q_numel]]``) and, from the page's verification records, the values
those claims are bound to. ``quiz_faults(text, records)`` returns every such fault as
``(line in text, message)``; the components extension reports them during the build (before the
blocks are parsed) and ``numbook verify`` reports them next to the claims, so both fail on the
same inputs with the same ``path:line: /// quiz: …``.

The rules:

- the block has its question after ``|``;
- exactly one option is marked ``[x]``, and there are at least two options;
- a key that is a computed value (an option holding one claim) is named in the block's header,
  ``answer: q_numel``, and the option marked ``[x]`` must be the one that binds it: a ``[x]``
  moved to another option fails, naming that option and the answer's value;
- a key typed as a number must be a claim;
- no wrong option may also be true: a literal, or a claim, that matches the answer's value.

What needs the parsed block (a list that is not a task list, an option without an explanation, an
unknown header option) is reported by the block itself (``quiz.py``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import yaml

from numbook.core.claims import LiteralError, format_value, parse_literal
from numbook.core.structure import walk
from numbook.core.verify import CLAIM, FREE, Record, RecordKind, display

__all__ = ["QuizSource", "OptionSource", "read_quizzes", "quiz_faults"]

_START = re.compile(r"^(?P<indent>[ \t]*)(?P<slashes>/{3,})[ \t]*quiz\b[ \t]*(?P<rest>.*)$", re.IGNORECASE)
_ITEM = re.compile(r"^(?P<indent>[ \t]*)(?:[-*+]|\d+[.)])[ \t]+(?:\[(?P<mark>[ xX])\][ \t]+(?P<label>.*))?")


@dataclass
class Claim:
    """A ``[[literal|name]]`` in an option's line, and its verification record when there is one."""

    ref: str                 # the name as written, before any '±': 'q_numel', 'other:x'
    literal: str
    start: int
    record: Record | None


@dataclass
class OptionSource:
    """One ``- [ ]`` / ``- [x]`` line of a quiz."""

    row: int                 # 0-based line in the text
    correct: bool
    label: str               # as written
    shown: str               # as the reader sees it (claims as their literals)
    claims: list[Claim] = field(default_factory=list)

    @property
    def bound(self) -> list[Claim]:
        return [c for c in self.claims if c.ref != FREE]


@dataclass
class QuizSource:
    """One ``/// quiz`` block, read from the Markdown."""

    row: int
    question: str
    answer: str | None
    options: list[OptionSource]
    loose: bool = False      # an unmarked list item among the options: the block reports its structure


def _header(lines: list[str], indent: int) -> dict[str, Any] | None:
    """The block's YAML options (the lines indented four past the start, right after it); None when they do
    not parse, and pymdownx leaves the block as text (``_Audit`` reports it)."""
    text = "\n".join(line[indent + 4:] for line in lines)
    try:
        data = yaml.safe_load(text) if text.strip() else {}
    except yaml.YAMLError:
        return None
    return data if isinstance(data, dict) else None


def _option(row: int, label: str, at: int, records: dict[tuple[int, int], Record]) -> OptionSource:
    claims: list[Claim] = []
    shown = label
    for m in reversed(list(CLAIM.finditer(label))):
        if m.group("ref") is None:
            continue
        ref = m.group("ref").partition("±")[0].strip()
        claims.insert(0, Claim(ref, m.group("lit"), at + m.start(), records.get((row, at + m.start()))))
        shown = shown[:m.start()] + display(m.group("lit"), False) + shown[m.end():]
    return OptionSource(row, False, label.strip(), " ".join(shown.split()), claims)


def read_quizzes(text: str, records: list[Record] | None = None) -> list[QuizSource]:
    """Every ``/// quiz`` block of ``text`` (code excluded), its options and the claims in them."""
    by_place = {(r.row, r.start): r for r in records or []}
    lines = walk(text)
    out: list[QuizSource] = []
    i = 0
    while i < len(lines):
        ln = lines[i]
        m = None if ln.code else _START.match(ln.text)
        if m is None:
            i += 1
            continue
        indent = len(m.group("indent").expandtabs(4))
        close = re.compile(r"^[ \t]*" + m.group("slashes") + r"[ \t]*$")
        rest = m.group("rest").strip()
        question = rest[1:].strip() if rest.startswith("|") else ""
        j = i + 1
        head: list[str] = []
        while j < len(lines) and lines[j].text.strip() and lines[j].text.expandtabs(4).startswith(
                " " * (indent + 4)) and not close.match(lines[j].text):
            head.append(lines[j].text.expandtabs(4))
            j += 1
        options = _header(head, indent)
        if options is None:
            i = j
            continue
        answer = options.get("answer")
        quiz = QuizSource(ln.index, question, str(answer).strip() if answer is not None else None, [])
        while j < len(lines) and not (not lines[j].code and close.match(lines[j].text)):
            item = None if lines[j].code else _ITEM.match(lines[j].text)
            if item is not None and len(item.group("indent").expandtabs(4)) == indent:
                if item.group("mark") is None:
                    quiz.loose = quiz.loose or bool(quiz.options)
                else:
                    label = item.group("label")
                    opt = _option(lines[j].index, label, item.start("label"), by_place)
                    opt.correct = item.group("mark") != " "
                    quiz.options.append(opt)
            j += 1
        out.append(quiz)
        i = j + 1
    return out


def quiz_faults(text: str, records: list[Record] | None = None) -> list[tuple[int, str]]:
    """The faults of every quick check in ``text``: ``(1-based line in text, message)``, in order."""
    faults: list[tuple[int, str]] = []
    for quiz in read_quizzes(text, records):
        faults += [(line + 1, f"/// quiz: {msg}") for line, msg in _faults(quiz)]
    return faults


def _faults(quiz: QuizSource) -> list[tuple[int, str]]:
    out: list[tuple[int, str]] = []
    at = quiz.row
    if not quiz.question:
        out.append((at, "a quick check needs its question after '|': /// quiz | What shape is X @ W?"))
    if not quiz.options or quiz.loose:
        return out    # no task list (or not only one): the block says what it expected
    right = [o for o in quiz.options if o.correct]
    if len(right) != 1:
        out.append((at, f"{len(right)} options are marked correct; mark exactly one with '[x]'"))
    if len(quiz.options) < 2:
        out.append((at, "a quick check needs at least two options"))
    if len(right) != 1:
        return out
    key = right[0]
    if quiz.answer is not None:
        return out + _answer_faults(quiz, key)
    if not key.bound:
        try:
            parse_literal(key.shown)
        except LiteralError:
            return out    # a key in words: nothing to verify
        return out + [(at, f"the key '{key.shown}' is a number; bind it to a check value as [[{key.shown}|name]]")]
    if len(key.bound) == 1:
        ref = key.bound[0].ref
        return out + [(key.row, f"the key '{key.shown}' is the value {ref}: name it in the block's header as "
                                f"'answer: {ref}', so the key is tied to the check and a moved [x] fails")]
    first = key.bound[0].record     # a key made of several values (A @ B): its literal distractors
    if first is not None and first.kind == RecordKind.CLAIM:
        out += _also_true(quiz, key, first, first.name)
    return out


def _answer_faults(quiz: QuizSource, key: OptionSource) -> list[tuple[int, str]]:
    name = quiz.answer or ""
    holders = [(n, o, c) for n, o in enumerate(quiz.options, start=1) for c in o.bound if c.ref == name]
    if not holders:
        return [(quiz.row, f"the answer '{name}' is bound by no option: write the right option as "
                           f"[[…|{name}]]")]
    n, holder, claim = holders[0]
    rec = claim.record
    value = f"{name} = {format_value(rec.value)}" if rec is not None and rec.kind == RecordKind.CLAIM else name
    if holder is not key:
        return [(key.row, f"the option marked [x], '{key.shown}', is not the answer: the answer {value} is "
                          f"option {n}, '{holder.shown}'; mark that one [x]")]
    if rec is None or rec.kind != RecordKind.CLAIM:
        return []     # a claim that failed is reported by the claim itself
    return _also_true(quiz, key, rec, name, _literal_or_none(claim.literal))


def _literal_or_none(text: str) -> Any:
    try:
        return parse_literal(text)
    except LiteralError:
        return None


def _also_true(quiz: QuizSource, key: OptionSource, rec: Record, name: str,
               written: Any = None) -> list[tuple[int, str]]:
    """Wrong options that are also true: a literal matching the answer's value, or (with ``written``, the
    answer's literal) a claim whose value reads the same at the answer's precision."""
    out: list[tuple[int, str]] = []
    for o in quiz.options:
        if o is key:
            continue
        if not o.bound:
            literal = _literal_or_none(o.shown)
            if literal is not None and literal.matches(rec.value):
                out.append((quiz.row, f"the wrong option '{o.shown}' also matches the key's value "
                                      f"{name} = {format_value(rec.value)}"))
            continue
        if written is None or len(o.bound) != 1:
            continue
        other = o.bound[0].record
        if other is not None and other.kind == RecordKind.CLAIM and written.matches(other.value):
            out.append((quiz.row, f"the wrong option '{o.shown}' also matches the key's value "
                                  f"{name} = {format_value(rec.value)}"))
    return out
