"""Units of claims: what a check says a value is measured in, and what the prose writes after it.

A check may give a value its unit (``value("fp32_mb", x, unit="MB")``); without one, a value
whose name ends in a unit suffix (``_mb``, ``_mib``, ``_gb``, ``_gib``, ``_kb``, ``_kib``,
``_bytes``, ``_ms``, ``_us``, ``_ns``, ``_s``, ``_gbs``, ``_tbs``) has that unit (a value named ``s`` alone has none:
the letter is a sequence length as often as a time). A unit written right
after a claim (``[[262.1|fp32_mb]] MB``, ``[[3.2|t_ms]] milliseconds``, or in math
``[[262.1|fp32_mb]]\\ \\text{MB}``) must be the value's unit: MB against MiB, s against ms, or
GB against GiB, is an error that gives both readings, and a value with no unit at all followed by
a unit is an error that asks the check to record one.

The table (``UNITS``) covers, in symbols and in words:

- **bytes**: B, kB (KB), MB, GB, TB, PB and KiB, MiB, GiB, TiB, PiB; bytes, kilobytes … petabytes,
  kibibytes … pebibytes;
- **time**: ns, µs (us, μs), ms, s, min, h; nanoseconds, microseconds, milliseconds, seconds, minutes, hours;
- **rates**: B/s … TB/s and KiB/s … TiB/s; FLOP/s, GFLOP/s, TFLOP/s, PFLOP/s; tokens/s; req/s;
- **FLOP counts**: FLOP (FLOPs), kFLOP … PFLOP; and arithmetic intensity, FLOP/B (FLOP/byte);
- **ratios**: ``%`` (percent) and a plain fraction (``unit="fraction"`` or ``unit="1"``). A claim's literal
  written with ``%`` (``[[15%|share]]``) compares 100 × the value, so a value is a fraction by default; a
  value the check computed in percent says so with ``unit="%"``, and only such a value may be followed by
  a percent sign or the word percent.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["Unit", "parse_unit", "name_unit", "unit_after", "unit_written", "UNITS", "PERCENT", "UNIT_WORDS"]


@dataclass(frozen=True)
class Unit:
    symbol: str
    dimension: str      # bytes | time | bytes/s | FLOP/s | tokens/s | requests/s | FLOP | FLOP/B | ratio
    scale: float        # in the dimension's base unit (bytes, seconds, FLOPs, a fraction)

    def convert(self, x: float, to: Unit) -> float:
        return x * self.scale / to.scale


_BYTES = [("B", 1), ("kB", 1e3), ("MB", 1e6), ("GB", 1e9), ("TB", 1e12), ("PB", 1e15),
          ("KiB", 2**10), ("MiB", 2**20), ("GiB", 2**30), ("TiB", 2**40), ("PiB", 2**50)]
_FLOP = [("FLOP", 1), ("kFLOP", 1e3), ("MFLOP", 1e6), ("GFLOP", 1e9), ("TFLOP", 1e12), ("PFLOP", 1e15)]
UNITS = {u.symbol: u for u in [
    *(Unit(s, "bytes", x) for s, x in _BYTES),
    *(Unit(s + "/s", "bytes/s", x) for s, x in _BYTES),
    *(Unit(s, "FLOP", x) for s, x in _FLOP),
    *(Unit(s + "/s", "FLOP/s", x) for s, x in _FLOP),
    Unit("FLOP/B", "FLOP/B", 1),
    Unit("s", "time", 1), Unit("ms", "time", 1e-3), Unit("µs", "time", 1e-6), Unit("ns", "time", 1e-9),
    Unit("min", "time", 60), Unit("h", "time", 3600),
    Unit("tokens/s", "tokens/s", 1), Unit("req/s", "requests/s", 1),
    Unit("%", "ratio", 0.01), Unit("fraction", "ratio", 1),
]}
PERCENT = UNITS["%"]

_WORD_PREFIX = {"": "", "kilo": "k", "mega": "M", "giga": "G", "tera": "T", "peta": "P",
                "kibi": "Ki", "mebi": "Mi", "gibi": "Gi", "tebi": "Ti", "pebi": "Pi"}
_ALIASES = {
    "KB": "kB", "us": "µs", "μs": "µs", "sec": "s", "secs": "s", "mins": "min", "hr": "h", "hrs": "h",
    "1": "fraction", "percent": "%", "per cent": "%", "\\%": "%",
    "FLOPs": "FLOP", "flop": "FLOP", "flops": "FLOP", "FLOPS/s": "FLOP/s", "FLOPs/s": "FLOP/s",
    "FLOP/byte": "FLOP/B", "FLOPs/byte": "FLOP/B", "FLOPs/B": "FLOP/B",
    "tok/s": "tokens/s", "token/s": "tokens/s", "requests/s": "req/s", "request/s": "req/s",
    "KB/s": "kB/s", "bytes/s": "B/s",
    **{f"{p}FLOPs": f"{p}FLOP" for p in "kMGTP"}, **{f"{p}FLOPs/s": f"{p}FLOP/s" for p in "kMGTP"},
    **{f"{p}FLOPS": f"{p}FLOP/s" for p in "GTP"},
    **{f"{w}byte{pl}": f"{s}B" for w, s in _WORD_PREFIX.items() for pl in ("", "s")},
    **{f"{w}second{pl}": s for w, s in (("", "s"), ("milli", "ms"), ("micro", "µs"), ("nano", "ns"))
       for pl in ("", "s")},
    "minute": "min", "minutes": "min", "hour": "h", "hours": "h",
}
_PER_WORDS = {"FLOP per byte": "FLOP/B", "FLOPs per byte": "FLOP/B", "bytes per second": "B/s",
              "tokens per second": "tokens/s", "requests per second": "req/s"}
_ALIASES.update(_PER_WORDS)
# the unit a value's name implies: its last part (fp32_mb, step_ms), a rate (req_per_s, capacity_req_s,
# achieved_tbs), or the part before "per" (kv_bytes_per_token is in bytes, per token)
_NAME_PARTS = {"bytes": "B", "kb": "kB", "kib": "KiB", "mb": "MB", "mib": "MiB", "gb": "GB", "gib": "GiB",
               "tb": "TB", "tib": "TiB", "ms": "ms", "us": "µs", "ns": "ns", "s": "s", "gbs": "GB/s",
               "tbs": "TB/s", "flops": "FLOP", "mflop": "MFLOP", "mflops": "MFLOP", "gflop": "GFLOP",
               "gflops": "GFLOP", "tflop": "TFLOP", "tflops": "TFLOP"}
_NAME_RATES = {"req": "req/s", "requests": "req/s", "tok": "tokens/s", "tokens": "tokens/s"}

UNIT_WORDS = sorted({*UNITS, *_ALIASES} - {"1", "fraction", "\\%"}, key=lambda w: (-len(w), w))
"""Every unit a page may write after a number, longest first (so that ``ms`` is not read as ``m``)."""
_WORD = "|".join(re.escape(w) for w in UNIT_WORDS)
# a unit written after a claim: spaces, TeX spacing (\ , \, ~) and \text{…}/\mathrm{…} may stand between.
# A unit glued to the number (262MB) is read as one too, but not a single letter (8B is eight billion); in
# math a bare letter is a variable, so there B, s and h count only inside \text{…} (see unit_after).
_AFTER = re.compile(r"^(?P<gap>(?:\s|\\[ ,;!:]|~)*)(?P<text>\\(?:text|mathrm|textrm|mbox)\s*\{\s*)?"
                    rf"(?P<unit>\\%|%|{_WORD})(?![\w/%])")


def parse_unit(text: str) -> Unit | None:
    """A unit as a check declares it or a page writes it (``MB``, ``MiB``, ``bytes``, ``ms``, ``mebibytes``,
    ``TB/s``, ``%``, ``fraction``), or None if unknown."""
    t = text.strip()
    return UNITS.get(_ALIASES.get(t, t)) or UNITS.get(_ALIASES.get(t.lower(), t))


def name_unit(name: str) -> Unit | None:
    """The unit a value name implies (``fp32_mb`` is in MB, ``step_s`` in s, ``req_per_s`` and ``capacity_req_s``
    in req/s, ``kv_bytes_per_token`` in bytes, ``q_gflops`` in GFLOP), or None.

    Names say FLOPs for a count: a rate in FLOP/s records its unit (``unit="TFLOP/s"``)."""
    parts = name.lower().split("_")
    if len(parts) >= 2 and parts[-1] == "s":
        per = parts[-3] if parts[-2] == "per" and len(parts) >= 3 else parts[-2]
        if per in _NAME_RATES:
            return UNITS[_NAME_RATES[per]]
        if parts[-2] == "per":
            of = UNITS.get(_NAME_PARTS.get(per, ""))
            return UNITS.get(of.symbol + "/s") if of is not None and of.dimension in ("bytes", "FLOP") else None
    if parts[-1] in _NAME_PARTS and parts != ["s"]:   # a value named s alone is a sequence length, not seconds
        return UNITS[_NAME_PARTS[parts[-1]]]
    if "per" in parts[1:]:
        numerator = parts[parts.index("per", 1) - 1]
        return UNITS[_NAME_PARTS[numerator]] if numerator in _NAME_PARTS and numerator != "s" else None
    return None


def unit_after(text: str, math: bool = False) -> tuple[Unit, str] | None:
    """The unit written right after a claim, and the words it was written in, if any.

    In math (``math=True``) a single letter after the number is a variable (``2\\,B`` is two times the batch),
    so there B, s and h count only inside ``\\text{…}``."""
    found = unit_written(text, math)
    return found[:2] if found is not None else None


def unit_written(text: str, math: bool = False) -> tuple[Unit, str, int] | None:
    """:func:`unit_after`, with how many characters of ``text`` the gap and the unit take."""
    m = _AFTER.match(text)
    if not m:
        return None
    word = m.group("unit")
    if math and len(word) == 1 and word != "%" and not m.group("text"):
        return None
    if len(word) == 1 and word != "%" and not m.group("gap") and not m.group("text"):
        return None   # one glued letter is no unit: 8B is eight billion, 4s the plural of four
    if word in ("%", "\\%") and not m.group("gap") and not m.group("text"):
        return None   # a glued percent sign changes the literal itself: the verifier's glue rule reports it
    if re.match(r"\s+per\s*$", text[m.end():]):
        return None   # "FLOP per" at the end of a line: per what is on the next line, not read here
    unit = parse_unit(word)
    return (unit, word, m.end()) if unit else None
