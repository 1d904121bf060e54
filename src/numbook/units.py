"""Units of claims: what a check says a value is measured in, and what the prose writes after it.

A check may give a value its unit (``value("fp32_mb", x, unit="MB")``); without one, a value
whose name ends in a unit suffix (``_mb``, ``_mib``, ``_gb``, ``_gib``, ``_kb``, ``_kib``,
``_bytes``, ``_ms``, ``_us``, ``_ns``) has that unit. A unit word written right after a claim
(``[[262.1|fp32_mb]] MB``, or in math ``[[262.1|fp32_mb]]\\ \\text{MB}``) must be the value's
unit: MB against MiB, or GB against GiB, is an error that gives both readings.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["Unit", "parse_unit", "name_unit", "unit_after", "UNITS"]


@dataclass(frozen=True)
class Unit:
    symbol: str
    dimension: str      # bytes | time
    scale: float        # in the dimension's base unit (bytes, seconds)

    def convert(self, x: float, to: Unit) -> float:
        return x * self.scale / to.scale


UNITS = {u.symbol: u for u in [
    Unit("B", "bytes", 1), Unit("kB", "bytes", 1e3), Unit("KiB", "bytes", 2**10), Unit("MB", "bytes", 1e6),
    Unit("MiB", "bytes", 2**20), Unit("GB", "bytes", 1e9), Unit("GiB", "bytes", 2**30),
    Unit("TB", "bytes", 1e12), Unit("TiB", "bytes", 2**40),
    Unit("s", "time", 1), Unit("ms", "time", 1e-3), Unit("µs", "time", 1e-6), Unit("ns", "time", 1e-9),
]}
_ALIASES = {"bytes": "B", "byte": "B", "KB": "kB", "us": "µs", "μs": "µs"}
_SUFFIXES = {"_bytes": "B", "_kb": "kB", "_kib": "KiB", "_mb": "MB", "_mib": "MiB", "_gb": "GB", "_gib": "GiB",
             "_tb": "TB", "_tib": "TiB", "_ms": "ms", "_us": "µs", "_ns": "ns"}
# a unit written after a claim: spaces, TeX spacing (\ , \, ~) and \text{…}/\mathrm{…} may stand between
_AFTER = re.compile(r"^(?:\s|\\[ ,;!:]|~)*(?:\\(?:text|mathrm|textrm)\s*\{\s*)?"
                    r"(?P<unit>bytes?|KiB|MiB|GiB|TiB|KB|kB|MB|GB|TB|ms|µs|μs|us|ns)(?![\w/])")


def parse_unit(text: str) -> Unit | None:
    """A unit symbol as a check declares it (``MB``, ``MiB``, ``bytes``, ``ms``), or None if unknown."""
    t = text.strip()
    return UNITS.get(_ALIASES.get(t, t))


def name_unit(name: str) -> Unit | None:
    """The unit a value name implies by its suffix (``fp32_mb`` is in MB), or None."""
    low = name.lower()
    for suffix, symbol in _SUFFIXES.items():
        if low.endswith(suffix):
            return UNITS[symbol]
    return None


def unit_after(text: str) -> Unit | None:
    """The unit word written right after a claim, if any."""
    m = _AFTER.match(text)
    return parse_unit(m.group("unit")) if m else None
