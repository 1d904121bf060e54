"""Claim literals: parse a number as an author typed it and test a computed value against it.

The written form of a literal sets the test (see the author guide for the table):
integers are exact, decimals hold at the written number of decimals, percentages compare
``100 × value``, scientific notation compares at the mantissa's significant figures, number
words are integers, shapes are exact tuples, bounds are inequalities, and an explicit
tolerance (``± 0.3`` or ``± 10%``) replaces the rounding rule.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation
from typing import Any

__all__ = ["Literal", "LiteralError", "parse_literal", "parse_tolerance", "format_value"]


class LiteralError(ValueError):
    """The text of a claim is not a literal this book knows how to test."""


WORDS = {
    "zero": 0, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
    "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13,
    "fourteen": 14, "fifteen": 15, "sixteen": 16, "seventeen": 17, "eighteen": 18,
    "nineteen": 19, "twenty": 20, "thirty": 30, "forty": 40, "fifty": 50, "sixty": 60,
    "seventy": 70, "eighty": 80, "ninety": 90, "hundred": 100, "thousand": 1000,
}

_BOUNDS = [
    ("at least", ">="), ("at most", "<="), ("more than", ">"), ("less than", "<"),
    ("fewer than", "<"), ("under", "<"), ("over", ">"),
    ("≥", ">="), (">=", ">="), ("≤", "<="), ("<=", "<="), (">", ">"), ("<", "<"),
    ("\\geq", ">="), ("\\leq", "<="), ("\\ge", ">="), ("\\le", "<="),
]
_NUM = r"[+-−]?(?:\d{1,3}(?:(?:,|\{,\}|\\,| )\d{3})+|\d+)(?:\.\d+)?"
_SCI = re.compile(
    r"^(?P<m>[+-−]?\d+(?:\.\d+)?)\s*(?:[eE](?P<e1>[+-−]?\d+)|(?:×|x|\\times|\\cdot|·)\s*10\s*\^\s*"
    r"(?:\{(?P<e2>[+-−]?\d+)\}|(?P<e3>[+-−]?\d+)))$"
)
_PLAIN = re.compile(rf"^(?P<n>{_NUM})\s*(?P<suffix>%|\\%|×|x|\\times)?$")
_SHAPE = re.compile(r"^\(\s*(?:\d+\s*(?:,\s*\d+\s*)*,?\s*)?\)$|^\[\s*(?:\d+\s*(?:,\s*\d+\s*)*)?\]$")


def _clean_number(text: str) -> str:
    return text.replace("{,}", "").replace("\\,", "").replace(",", "").replace(" ", "").replace("−", "-")


def _decimals(text: str) -> int:
    return len(text.split(".", 1)[1]) if "." in text else 0


def _round_half_up(x: float, places: int) -> Decimal:
    q = Decimal(1).scaleb(-places)
    return Decimal(repr(float(x))).quantize(q, rounding=ROUND_HALF_UP)


def format_value(x: Any) -> str:
    """Full-precision text of a value, for tooltips and error messages."""
    if isinstance(x, bool):
        return str(x)
    if isinstance(x, float):
        return repr(x) if math.isfinite(x) else str(x)
    if isinstance(x, list | tuple):
        return "(" + ", ".join(format_value(v) for v in x) + ("," if len(x) == 1 else "") + ")"
    return str(x)


@dataclass(frozen=True)
class Literal:
    """A typed number and the rule that decides whether a value matches it."""

    text: str
    kind: str  # int | decimal | percent | ratio | sci | word | shape | bound
    number: Decimal | None = None
    places: int = 0          # decimals (decimal/percent/ratio) or significant figures (sci)
    shape: tuple[int, ...] | None = None
    op: str | None = None    # for bounds
    tolerance: tuple[Decimal, bool] | None = None  # (amount, relative)
    percent: bool = False    # the literal is written in percent: compare 100 × value

    def scaled(self, value: float) -> float:
        return value * 100 if self.percent else value

    def matches(self, value: Any) -> bool:
        """Whether ``value`` (as a check recorded it) is what this literal says."""
        if self.kind == "shape":
            return isinstance(value, list | tuple) and tuple(value) == self.shape
        if isinstance(value, list | tuple | str) or value is None:
            return False
        x = float(value)
        if not math.isfinite(x):
            return False
        assert self.number is not None
        target = float(self.number)
        if self.tolerance is not None:
            amount, relative = self.tolerance
            tol = float(amount) * (abs(target) / 100 if relative else 1)
            return abs(self.scaled(x) - target) <= tol
        if self.kind == "bound":
            x = self.scaled(x)
            return {">=": x >= target, "<=": x <= target, ">": x > target, "<": x < target}[str(self.op)]
        if self.kind in ("int", "word"):
            return x == target
        if self.kind == "sci":
            if x == 0:
                return target == 0
            exp = math.floor(math.log10(abs(x)))
            mant = x / 10**exp
            # rounding can carry the mantissa to 10.0: normalise after rounding
            r = _round_half_up(mant, self.places - 1) * Decimal(10) ** exp
            return r == self.number.normalize() or float(r) == target
        return _round_half_up(self.scaled(x), self.places) == self.number

    def describe(self) -> str:
        """How the literal is tested, in words, for error messages."""
        if self.tolerance is not None:
            amount, rel = self.tolerance
            return f"within ± {amount}{'%' if rel else ''}"
        return {
            "int": "exact", "word": "exact", "shape": "exact shape",
            "decimal": f"to {self.places} decimal place(s)",
            "ratio": f"to {self.places} decimal place(s)",
            "percent": f"in percent, to {self.places} decimal place(s)",
            "sci": f"to {self.places} significant figure(s)",
            "bound": f"as the bound {self.op} {self.number}{'%' if self.percent else ''}",
        }[self.kind]


def parse_tolerance(text: str) -> tuple[Decimal, bool]:
    """Parse ``0.3`` or ``10%`` (the part after ``±``)."""
    t = text.strip()
    relative = t.endswith("%")
    try:
        amount = Decimal(_clean_number(t.rstrip("%").strip()))
    except InvalidOperation as exc:
        raise LiteralError(f"tolerance '± {text.strip()}' is not a number") from exc
    return amount, relative


def parse_literal(text: str, tolerance: tuple[Decimal, bool] | None = None) -> Literal:
    """Parse the literal of a claim as written in the prose."""
    raw = text
    t = text.strip()
    if not t:
        raise LiteralError("empty literal")
    if _SHAPE.match(t):
        inner = t.strip("()[]").strip()
        dims = tuple(int(p) for p in inner.split(",") if p.strip()) if inner else ()
        return Literal(raw, "shape", shape=dims)
    low = t.lower()
    for word, op in _BOUNDS:
        if low.startswith(word) and (not word[0].isalpha() or len(low) == len(word) or not low[len(word)].isalpha()):
            bound = parse_literal(t[len(word):].strip())
            if bound.kind == "shape" or bound.number is None:
                raise LiteralError(f"a bound needs a number: '{t}'")
            return Literal(raw, "bound", number=bound.number, op=op, percent=bound.percent)
    if low in WORDS:
        return Literal(raw, "word", number=Decimal(WORDS[low]), tolerance=tolerance)
    m = _SCI.match(t)
    if m:
        mant = m.group("m").replace("−", "-")
        exp = (m.group("e1") or m.group("e2") or m.group("e3") or "0").replace("−", "-")
        digits = mant.lstrip("+-").replace(".", "").lstrip("0") or "0"
        number = Decimal(mant) * Decimal(10) ** int(exp)
        return Literal(raw, "sci", number=number.normalize(), places=len(digits), tolerance=tolerance)
    m = _PLAIN.match(t)
    if m:
        num = _clean_number(m.group("n"))
        suffix = m.group("suffix")
        number = Decimal(num)
        places = _decimals(num)
        if suffix in ("%", "\\%"):
            return Literal(raw, "percent", number=number, places=places, tolerance=tolerance, percent=True)
        if suffix:
            return Literal(raw, "ratio", number=number, places=places, tolerance=tolerance)
        kind = "decimal" if "." in num else "int"
        return Literal(raw, kind, number=number, places=places, tolerance=tolerance)
    raise LiteralError(f"'{t}' is not a literal this book can test (a number, a percentage, "
                       "scientific notation, a number word, a shape or a bound)")
