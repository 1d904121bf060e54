"""A statement's words bound to its check: the relation a sentence states against what its check asserts.

Two routes back a relation sentence, and this module tests both:

- **A sanity that declares its relation.** ``sanity("fp32_larger", a > b, relation="larger",
  operands=(a, b))``. The words the marker backs (from the previous marker group, or the
  sentence's start, to the marker) are read by the relation grammar of ``numbook.core.relations``; every
  relation they state, negation included, must be implied by one the group's sanities declare, and
  each declared relation must be said by some sentence of the page that cites the sanity (a sanity
  cited by several sentences declares what each of them says). A flipped word ("smaller" for "larger", "does" for
  "does not") fails with the word as written and what the check asserted.
- **Two bound values compared in the sentence.** "The loss with the vocabulary axis,
  ``[[10.86|a]]``, is larger than ``[[6.72|b]]``": the comparison is evaluated on the computed
  values (converted to one unit where both carry one), and a sentence whose relation words are all
  such comparisons needs no sanity.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from numbook.core.diagnostics import Diagnostic
from numbook.core.relations import (
    CMP,
    NEG,
    POLAR,
    TREND,
    RelationSentence,
    Stated,
    declared_relations,
    sanity_segments,
    stated_relations,
)
from numbook.core.result import CheckResult
from numbook.core.structure import check_file_name
from numbook.core.units import parse_unit

__all__ = ["Bound", "sentence_faults", "compared", "KNOWN"]

KNOWN = ("larger, smaller, at least, at most, equal, differs, faster, slower, grows, falls, twice, half, triple, "
         "largest, smallest, not (each may be negated: 'does not exceed', 'not twice')")
_BEFORE = 6   # words between a compared value and the relation word after it: "[[a]] bytes, is larger"
_AFTER = 3    # words between the relation word and the value after it: "larger than the [[b]]"


@dataclass(frozen=True)
class Bound:
    """A bound claim of the page as the comparison reads it: its computed value and unit; for a measured value, its
    interval; ``bound``: the verifier read the words before it as a bound on the value and tested it there."""

    value: Any
    unit: str
    interval: tuple[float, float] | None = None
    level: str = ""          # the interval's confidence level, "95%"
    bound: str = ""          # the words before it read as a bound on it ("never falls below")
    ok: bool = True


def _short(text: str) -> str:
    return text if len(text) <= 90 else text[:87] + "…"


def _number(x: Any) -> float | None:
    return float(x) if isinstance(x, int | float) and not isinstance(x, bool) else None


def sentence_faults(text: str, path: str, line_offset: int, page_check: str | None,
                    results: Callable[[str], CheckResult]) -> list[Diagnostic]:
    """Faults of the sentences of ``text`` that sanity markers back: words and declarations that disagree."""
    out: list[Diagnostic] = []
    cited: dict[tuple[str, str], tuple[int, list[Stated], list[Stated]]] = {}
    reported: set[tuple[str, str]] = set()   # sanities whose words were already reported flipped
    for sentence, segments in sanity_segments(text):
        short = _short(sentence)
        for seg in segments:
            line = seg.line + line_offset
            declared: list[tuple[str, str, Stated]] = []   # (sanity, check, relation)
            undeclared: list[tuple[str, str]] = []
            resolved = True
            for body in seg.sanities:
                other, _, name = body.rpartition(":")
                check = check_file_name(other) if other else page_check
                res = results(check) if check else None
                entry = res.sanity.get(name) if res is not None and res.ok else None
                if res is None or entry is None:
                    resolved = False   # the marker's own fault (no check, no such sanity) is reported where it stands
                    continue
                rels = entry.get("relation")
                if not rels:
                    undeclared.append((name, res.check))
                    continue
                for written in rels:
                    parsed = declared_relations(str(written))
                    if not parsed:
                        out.append(Diagnostic(path, line, f"sanity '{name}' of {res.check} declares relation "
                                                          f"'{written}', which the relation grammar does not read: "
                                                          f"use one of {KNOWN}"))
                    for d in parsed:
                        declared.append((name, res.check, d))

            if not resolved and not declared and not undeclared:
                continue
            stated = stated_relations(list(seg.words))
            flipped: set[str] = set()
            for s in stated:
                if s.family not in (*POLAR, NEG) or any(s.implied_by(d) for _, _, d in declared):
                    continue
                same = [(n, c, d) for n, c, d in declared if d.family == s.family]
                if same:
                    n, c, d = same[0]
                    flipped.add(s.family)
                    reported.add((n, c))
                    out.append(Diagnostic(path, line, f"relation word '{s.words}' says {s.name}, but sanity '{n}' "
                                                      f"of {c} asserts {d.name}: '{short}'"))
                elif undeclared and not declared:
                    n, c = undeclared[0]
                    out.append(Diagnostic(path, line, f"sanity '{n}' of {c} backs '{s.words}' ({s.name}) but declares "
                                                      f"no relation: add relation=\"{s.name}\" to its sanity(): "
                                                      f"'{short}'"))
                else:
                    asserted = ", ".join(f"'{n}' {d.name}" for n, _, d in declared) or "none declared"
                    out.append(Diagnostic(path, line, f"relation word '{s.words}' says {s.name}, which no sanity of "
                                                      f"the sentence asserts ({asserted}): '{short}'"))
            for n, c, d in declared:   # what the page's words say of each of its own check's sanities
                if page_check is None or not c.endswith(page_check):
                    continue   # a sanity of another check may be cited here for one of its relations only
                first, decls, said = cited.setdefault((n, c), (line, [], []))
                if d not in decls:
                    decls.append(d)
                said.extend(stated)
    # every relation a sanity declares is said by some sentence of the page that cites it (a sanity cited by
    # several sentences declares what each says): a removed "not" or a reworded comparison fails here
    for (n, c), (line, decls, stated_all) in cited.items():
        for d in decls if (n, c) not in reported else ():
            if any(s.implied_by(d) for s in stated_all):
                continue
            says = ", ".join(sorted({f"'{s.words}'" for s in stated_all if s.family in (*POLAR, NEG)})) or "no relation"
            out.append(Diagnostic(path, line, f"sanity '{n}' of {c} asserts {d.name}, but no sentence of this page "
                                              f"that cites it says so (they say {says})"))
    return out


def _factor(a: Bound, b: Bound) -> float | None:
    """What turns a number in ``a``'s unit into ``b``'s; None where the two cannot be compared."""
    if _number(a.value) is None or _number(b.value) is None:
        return None
    if a.unit == b.unit or not a.unit or not b.unit:
        return 1.0
    ua, ub = parse_unit(a.unit), parse_unit(b.unit)
    if ua is None or ub is None or ua.dimension != ub.dimension:
        return None
    return ua.convert(1.0, ub)


def _convert(a: Bound, b: Bound) -> tuple[float, float] | None:
    """The two values as numbers in one unit; None where they cannot be compared."""
    f = _factor(a, b)
    x, y = _number(a.value), _number(b.value)
    if f is None or x is None or y is None:
        return None
    return (x if f == 1.0 else x * f), y


def _span(x: Bound, f: float = 1.0) -> tuple[float, float]:
    """A value's interval (a computed value's is its point), times ``f``."""
    lo, hi = x.interval if x.interval is not None else (float(x.value), float(x.value))
    return lo * f, hi * f


def _apart(op: str, a: tuple[float, float], b: tuple[float, float]) -> bool | None:
    """A comparison of two intervals: it holds for every pair of their points (equal: for some pair)."""
    return {">": a[0] > b[1], ">=": a[0] >= b[1], "<": a[1] < b[0], "<=": a[1] <= b[0],
            "!=": a[1] < b[0] or b[1] < a[0], "==": a[0] <= b[1] and b[0] <= a[1]}.get(op)


def _side(name: str, x: Bound) -> str:
    unit = f" {x.unit}" if x.unit else ""
    if x.interval is None:
        return f"{name} = {x.value!r}{unit}"
    return f"{name} {x.level} CI {x.interval[0]!r} to {x.interval[1]!r}{unit}"


def compared(rel: RelationSentence, lookup: Callable[[str], Bound | None]) -> tuple[bool, list[str]]:
    """Whether every relation word of ``rel`` is a comparison of two bound values the verifier can test, and
    the comparisons that fail (as messages). ``lookup`` maps a marker body ("10.86|loss") to its value."""
    stated = stated_relations(list(rel.tokens))
    polar = [s for s in stated if s.family in (CMP, TREND)]
    if not polar:
        return False, []
    at = dict(rel.claims)
    failed: list[str] = []
    tested: set[int] = set()
    bounded: set[int] = set()   # the words read as a bound on the measured value after them, which the verifier tested
    for i, body in rel.claims:
        own = lookup(body)
        if own is not None and own.bound:
            bounded.update(range(i - len(own.bound.split()), i))
    for s in polar:
        if s.at in bounded:
            tested.add(s.at)   # "below [[50|p99_ms]]": a bound on a measured value, tested on its interval
            continue
        first = s.at
        last = s.at + len(s.words.split()) - 1 - (1 if s.words.split()[0] in ("not", "no", "never") else 0)
        before = next((i for i in range(first - 1, max(-1, first - 1 - _BEFORE), -1) if i in at), None)
        after = next((i for i in range(last + 1, min(len(rel.tokens), last + 2 + _AFTER)) if i in at), None)
        if after is None and before is not None and s.op in ("==", "!="):
            # "[[a]] ms and [[b]] ms are equal": a symmetric relation after the two values it relates
            earlier = next((i for i in range(before - 1, max(-1, before - 1 - _BEFORE), -1) if i in at), None)
            if earlier is not None and "and" in rel.tokens[earlier + 1:before]:
                before, after = earlier, before
        if before is None or after is None:
            continue
        a, b = lookup(at[before]), lookup(at[after])
        if a is None or b is None or not (a.ok and b.ok):
            continue
        if rel.equality and a.interval is None and b.interval is None:
            continue   # two computed values said equal, in a sentence of no other relation: not read
        pair = _convert(a, b)
        f = _factor(a, b)
        if pair is None or f is None:
            continue
        tested.add(s.at)
        left, right = at[before].rsplit("|", 1), at[after].rsplit("|", 1)
        says = (f"the sentence says {left[0].strip()} ({left[1].strip()}) is {s.name} {right[0].strip()} "
                f"({right[1].strip()}) ('{s.words}')")
        if (a.interval is not None or b.interval is not None) and s.family in (CMP, TREND):
            spans = _span(a, f), _span(b)
            if _apart(s.op, *spans) is False:
                if s.op == "==":
                    why, rule = "do not overlap", "measured values said to be equal must have intervals that overlap"
                else:
                    overlap = _apart("==", *spans)
                    why = "overlap" if overlap else "lie the other way"
                    rule = "measured values compared must have intervals that lie apart in the stated direction"
                failed.append(f"{says}, but their intervals {why}: {_side(left[1].strip(), a)}, "
                              f"{_side(right[1].strip(), b)}; {rule}")
        elif s.holds(*pair) is False:
            failed.append(f"{says}, but the computed values are {a.value!r} and {b.value!r}")
    others = set(rel.words) - _words_of(polar, tested)
    return (not others and len(tested) == len(polar)) or bool(failed), failed


def _words_of(stated: Iterable[Stated], tested: set[int]) -> set[str]:
    """The trigger words of the tested comparisons (what an evaluated comparison accounts for)."""
    return {w for s in stated if s.at in tested for w in s.words.split()}
