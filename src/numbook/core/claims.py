"""Claim literals: parse a number as an author typed it and test a computed value against it.

The written form of a literal sets the test (see the author guide for the table):
integers are exact, decimals hold at the written number of decimals, percentages compare
``100 × value``, scientific notation compares at the mantissa's significant figures, number
words are integers, shapes are exact tuples, vectors compare element by element at each
element's written precision, bounds are inequalities, and an explicit tolerance (``± 0.3`` or
``± 10%``) replaces the rounding rule.

``parse_literal`` raises only :class:`LiteralError`, whatever the text, and ``matches`` never
raises, whatever the value: a typo in the prose is a diagnostic, never a traceback.
"""

from __future__ import annotations

import enum
import math
import re
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

__all__ = ["ClaimLiteral", "Kind", "LiteralError", "parse_literal", "parse_tolerance", "format_value",
           "DTYPE_DIGITS"]


class LiteralError(ValueError):
    """The text of a claim is not a literal this book knows how to test."""


class _Bound(LiteralError):
    """A bound where only a plain number may stand (an element of a vector, the number of a bound)."""


class Kind(enum.StrEnum):
    """How a literal was written, which decides how it is compared."""

    INT = "int"
    DECIMAL = "decimal"
    PERCENT = "percent"
    RATIO = "ratio"
    SCI = "sci"
    WORD = "word"
    SHAPE = "shape"
    VECTOR = "vector"
    BOUND = "bound"


WORDS = {
    "zero": 0, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
    "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13,
    "fourteen": 14, "fifteen": 15, "sixteen": 16, "seventeen": 17, "eighteen": 18,
    "nineteen": 19, "twenty": 20, "thirty": 30, "forty": 40, "fifty": 50, "sixty": 60,
    "seventy": 70, "eighty": 80, "ninety": 90, "hundred": 100, "thousand": 1000,
}

DTYPE_DIGITS = {
    # significant decimal digits a value of this dtype carries: ceil(mantissa bits × log10 2)
    "float64": 16, "torch.float64": 16, "double": 16,
    "float32": 8, "torch.float32": 8, "float": 8,
    "float16": 4, "torch.float16": 4, "half": 4,
    "bfloat16": 3, "torch.bfloat16": 3,
}

_BOUNDS = [
    ("at least", ">="), ("at most", "<="), ("more than", ">"), ("less than", "<"),
    ("fewer than", "<"), ("under", "<"), ("over", ">"),
    ("≥", ">="), (">=", ">="), ("≤", "<="), ("<=", "<="), (">", ">"), ("<", "<"),
    ("\\geq", ">="), ("\\leq", "<="), ("\\ge", ">="), ("\\le", "<="),
]
_SIGN = r"[+\-−]"
_SEP = r"(?:,|\{,\}|\\,| |\u2009|\u202f)"   # thousands: comma, TeX {,} and \, , space, thin and narrow no-break space
_NUM = rf"{_SIGN}?(?:\d{{1,3}}(?:{_SEP}\d{{3}})+|\d+)(?:\.\d+)?"
_SCI = re.compile(
    rf"^(?P<m>{_SIGN}?\d+(?:\.\d+)?)\s*(?:[eE](?P<e1>{_SIGN}?\d+)|(?:×|x|\\times|\\cdot|·)\s*10\s*\^\s*"
    rf"(?:\{{(?P<e2>{_SIGN}?\d+)\}}|(?P<e3>{_SIGN}?\d+)))$"
)
_PLAIN = re.compile(rf"^(?P<n>{_NUM})\s*(?P<suffix>%|\\%|×|x|\\times)?$")
_GROUPED = re.compile(rf"^{_SIGN}?\d+(?:{_SEP}\d+)+(?:\.\d+)?\s*(?:%|\\%|×|x|\\times)?$")
_SHAPE = re.compile(r"^\(\s*(?:\d+\s*(?:,\s*\d+\s*)*,?\s*)?\)$|^\[\s*(?:\d+\s*(?:,\s*\d+\s*)*)?\]$")
_VECTOR = re.compile(r"^[(\[](?P<inner>[^()\[\]]*)[)\]]$")
_MAX_EXP = 400  # far past any float: larger exponents are typos, not numbers


def _clean_number(text: str) -> str:
    for sep in ("{,}", "\\,", ",", " ", "\u2009", "\u202f"):
        text = text.replace(sep, "")
    return text.replace("−", "-")


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


def _as_float(value: Any) -> float | None:
    """A recorded scalar as a finite float, or None (a shape, a string, nan, an int too large)."""
    if isinstance(value, list | tuple | str | dict) or value is None:
        return None
    try:
        x = float(value)
    except (TypeError, ValueError, OverflowError):
        return None
    return x if math.isfinite(x) else None


@dataclass(frozen=True)
class ClaimLiteral:
    """A typed number and the rule that decides whether a value matches it."""

    text: str
    kind: Kind
    number: Decimal | None = None
    places: int = 0          # decimals (decimal/percent/ratio) or significant figures (sci)
    shape: tuple[int, ...] | None = None
    items: tuple[ClaimLiteral, ...] = ()   # the elements of a vector
    op: str | None = None    # for bounds
    tolerance: tuple[Decimal, bool] | None = None  # (amount, relative)
    percent: bool = False    # the literal is written in percent: compare 100 × value

    def scaled(self, value: float) -> float:
        return value * 100 if self.percent else value

    @property
    def significant(self) -> int | None:
        """Significant digits the literal claims (None for exact forms, shapes and bounds)."""
        if self.kind == Kind.SCI:
            return self.places
        if self.kind not in (Kind.DECIMAL, Kind.PERCENT, Kind.RATIO) or self.number is None:
            return None
        digits = format(abs(self.number), "f").replace(".", "").lstrip("0")
        return max(len(digits), 1)

    @property
    def quantum(self) -> Decimal | None:
        """One unit of the last digit written, in the literal's scale (a percentage in percent): 1 for ``41`` and
        ``three``, 0.1 for ``41.2`` and ``17.6%``, 10^5 for ``6.55e7``, 1 for the bound ``under 50``; None for a
        shape or a vector."""
        if self.number is None or self.kind in (Kind.SHAPE, Kind.VECTOR):
            return None
        if self.kind == Kind.SCI:
            return Decimal(1).scaleb(self.number.adjusted() - self.places + 1)
        if self.kind == Kind.BOUND:
            exponent = self.number.as_tuple().exponent
            return Decimal(1).scaleb(min(0, exponent) if isinstance(exponent, int) else 0)
        return Decimal(1).scaleb(-self.places)

    def matches(self, value: Any) -> bool:
        """Whether ``value`` (as a check recorded it) is what this literal says; never raises."""
        try:
            return self._matches(value)
        except (ArithmeticError, ValueError, TypeError, OverflowError):
            return False

    def _matches(self, value: Any) -> bool:
        if self.kind == Kind.SHAPE:
            return isinstance(value, list | tuple) and tuple(value) == self.shape
        if self.kind == Kind.VECTOR:
            return (isinstance(value, list | tuple) and len(value) == len(self.items)
                    and all(lit.matches(v) for lit, v in zip(self.items, value, strict=True)))
        x = _as_float(value)
        if x is None or self.number is None:
            return False
        target = float(self.number)
        if self.tolerance is not None:
            amount, relative = self.tolerance
            tol = float(amount) * (abs(target) / 100 if relative else 1)
            return abs(self.scaled(x) - target) <= tol
        if self.kind == Kind.BOUND:
            x = self.scaled(x)
            return {">=": x >= target, "<=": x <= target, ">": x > target, "<": x < target}[str(self.op)]
        if self.kind in (Kind.INT, Kind.WORD):
            return x == target and (not isinstance(value, int) or Decimal(value) == self.number)
        if self.kind == Kind.SCI:
            if x == 0:
                return target == 0
            exp = math.floor(math.log10(abs(x)))
            mant = x / 10**exp
            # rounding can carry the mantissa to 10.0: normalise after rounding
            r = _round_half_up(mant, self.places - 1) * Decimal(10) ** exp
            return r == self.number
        return _round_half_up(self.scaled(x), self.places) == self.number

    def describe(self) -> str:
        """How the literal is tested, in words, for error messages."""
        if self.tolerance is not None:
            amount, rel = self.tolerance
            return f"within ± {amount}{'%' if rel else ''}"
        if self.kind == Kind.VECTOR:
            return "element by element, each at its written precision"
        return {
            Kind.INT: "exact", Kind.WORD: "exact", Kind.SHAPE: "exact shape",
            Kind.DECIMAL: f"to {self.places} decimal place(s)",
            Kind.RATIO: f"to {self.places} decimal place(s)",
            Kind.PERCENT: f"in percent, to {self.places} decimal place(s)",
            Kind.SCI: f"to {self.places} significant figure(s)",
            Kind.BOUND: f"as the bound {self.op} {_plain(self.number or Decimal(0))}{'%' if self.percent else ''}",
        }[self.kind]


def _plain(number: Decimal) -> str:
    """A Decimal as positional digits (1000, not 1E+3; 0.002, not 2E-3)."""
    return format(number.normalize(), "f")


def parse_tolerance(text: str) -> tuple[Decimal, bool]:
    """Parse ``0.3`` or ``10%`` (the part after ``±``)."""
    t = text.strip()
    relative = t.endswith("%")
    body = _clean_number(t.rstrip("%").strip())
    if not re.fullmatch(r"\+?\d+(?:\.\d+)?", body):
        raise LiteralError(f"tolerance '± {t}' is not a number")
    return Decimal(body), relative


def parse_literal(text: str, tolerance: tuple[Decimal, bool] | None = None) -> ClaimLiteral:
    """Parse the literal of a claim as written in the prose; raises only LiteralError."""
    try:
        return _parse(text, tolerance, nested=False)
    except LiteralError:
        raise
    except (ArithmeticError, ValueError, TypeError, RecursionError) as exc:  # pragma: no cover - a guard
        raise LiteralError(f"'{text.strip()}' is not a literal this book can test ({exc})") from exc


def _parse(text: str, tolerance: tuple[Decimal, bool] | None, nested: bool) -> ClaimLiteral:
    """One literal; ``nested``: an element of a vector or the number of a bound, where only a number may stand."""
    raw = text
    t = text.strip()
    if not t:
        raise LiteralError("empty literal")
    if _SHAPE.match(t):
        inner = t.strip("()[]").strip()
        dims = tuple(int(p) for p in inner.split(",") if p.strip()) if inner else ()
        return ClaimLiteral(raw, Kind.SHAPE, shape=dims)
    vm = _VECTOR.match(t)
    if vm and not nested:
        parts = [p for p in vm.group("inner").split(",")]
        if parts and not parts[-1].strip():
            parts = parts[:-1]
        if not parts or any(not p.strip() for p in parts):
            raise LiteralError(f"'{t}' is not a vector: write its elements separated by ', ', like (6.0, 7.5)")
        try:   # (its pattern admits no bracket inside, so no element is a shape or a vector)
            items = tuple(_parse(p, None, nested=True) for p in parts)
        except _Bound:
            raise LiteralError(f"'{t}': a vector's elements are plain numbers") from None
        return ClaimLiteral(raw, Kind.VECTOR, items=items)
    low = t.lower()
    for word, op in _BOUNDS:
        if low.startswith(word) and (not word[0].isalpha() or len(low) == len(word) or not low[len(word)].isalpha()):
            if nested:
                raise _Bound   # a bound inside a vector or a bound: the caller says which
            try:
                bound = _parse(t[len(word):], None, nested=True) if t[len(word):].strip() else None
            except _Bound:
                bound = None
            if bound is None or bound.number is None:   # a shape or a vector has no number
                raise LiteralError(f"a bound needs a number: '{t}'")
            return ClaimLiteral(raw, Kind.BOUND, number=bound.number, op=op, percent=bound.percent)
    if low in WORDS:
        return ClaimLiteral(raw, Kind.WORD, number=Decimal(WORDS[low]), tolerance=tolerance)
    m = _SCI.match(t)
    if m:
        mant = m.group("m").replace("−", "-")
        exp_text = (m.group("e1") or m.group("e2") or m.group("e3") or "0").replace("−", "-")
        exp = int(exp_text)
        if abs(exp) > _MAX_EXP:
            raise LiteralError(f"'{t}': the exponent {exp} is past any number a check records")
        digits = mant.lstrip("+-").replace(".", "").lstrip("0") or "0"
        number = Decimal(mant) * Decimal(10) ** exp
        return ClaimLiteral(raw, Kind.SCI, number=number.normalize(), places=len(digits), tolerance=tolerance)
    m = _PLAIN.match(t)
    if m:
        num = _clean_number(m.group("n"))
        suffix = m.group("suffix")
        number = Decimal(num)
        places = _decimals(num)
        if suffix in ("%", "\\%"):
            return ClaimLiteral(raw, Kind.PERCENT, number=number, places=places, tolerance=tolerance, percent=True)
        if suffix:
            return ClaimLiteral(raw, Kind.RATIO, number=number, places=places, tolerance=tolerance)
        kind = Kind.DECIMAL if "." in num else Kind.INT
        return ClaimLiteral(raw, kind, number=number, places=places, tolerance=tolerance)
    if _GROUPED.match(t):
        raise LiteralError(f"'{t}' has a misplaced thousands separator: separate groups of exactly three "
                           "digits, counted from the decimal point, like 65,536,000")
    raise LiteralError(f"'{t}' is not a literal this book can test (a number, a percentage, "
                       "scientific notation, a number word, a shape, a vector or a bound)")
