"""The API a check script uses to expose its inputs, values and sanity assertions.

A check is a plain script: ``python checks/x.py`` prints its trace and nothing else
happens. Run by the book's runner, the environment variable ``NUMBOOK_RESULT`` names a file;
at exit the check writes every recorded input, value and assertion there as JSON.

    from numbook.check import given, value, sanity

    B = given("B", 4)                        # an input, stated in the page's Given
    logits = torch.empty(B, T, V)
    value("fp32_mb", logits.nbytes / 1e6)    # a value claims in the prose bind to
    sanity("reshape_conserves", logits.numel() == flat.numel())

Names are unique per check. Values are numbers (int, float, bool), strings, or shapes
(tuples or lists of ints, ``torch.Size`` included); 0-d tensors and numpy scalars are
converted with ``.item()``.

A check that needs a GPU says so in a header comment the runner reads before running it:
``# numbook: requires=cuda, timeout=300``.
"""

from __future__ import annotations

import atexit
import json
import os
import re
import sys
import time
from typing import Any, TypeVar

__all__ = ["given", "value", "sanity", "figure", "SanityError", "RESULT_ENV"]

RESULT_ENV = "NUMBOOK_RESULT"
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_RESERVED = {"free", "sanity"}

T = TypeVar("T")

_state: dict[str, Any] = {
    "inputs": {},
    "values": {},
    "sanity": {},
    "figures": {},
    "lines": {},
    "units": {},
    "dtypes": {},
}


class SanityError(AssertionError):
    """A sanity assertion of a check did not hold."""


def _caller_line(depth: int = 2) -> int:
    """The line of the check that called the API function ``depth - 1`` frames up."""
    return sys._getframe(depth).f_lineno


def _plain(x: Any) -> Any:
    """Convert library scalars and shapes to JSON-friendly Python values."""
    if isinstance(x, bool | int | float | str):
        return x
    if hasattr(x, "tolist") and hasattr(x, "ndim") and getattr(x, "ndim", 1) == 0:
        return x.item()
    if isinstance(x, tuple | list):  # torch.Size is a tuple
        return [_plain(v) for v in x]
    if hasattr(x, "item") and callable(x.item):
        try:
            return x.item()
        except (ValueError, RuntimeError):
            pass
    raise TypeError(f"cannot record a value of type {type(x).__name__}: {x!r}")


def _register(kind: str, name: str, x: Any) -> None:
    if not _NAME.match(name) or name in _RESERVED:
        raise ValueError(f"invalid {kind} name {name!r}: use a Python identifier, not 'free' or 'sanity'")
    for other in ("inputs", "values"):
        if name in _state[other]:
            raise ValueError(f"{kind} name {name!r} is recorded twice")
    _state[kind][name] = _plain(x)
    _state["lines"][name] = _caller_line(3)   # _register <- given/value <- the check


def _dtype(x: Any) -> str | None:
    """The floating dtype of a tensor or numpy scalar (``float32``), else None.

    It bounds the significant digits a claim may state."""
    dt = getattr(x, "dtype", None)
    if dt is None:
        return None
    text = str(dt).removeprefix("torch.")
    return text if text in ("float64", "float32", "float16", "bfloat16") else None


def _describe(name: str, x: Any, unit: str | None, dtype: str | None) -> None:
    if unit:
        _state["units"][name] = unit
    found = dtype or _dtype(x)
    if found:
        _state["dtypes"][name] = found


def given(name: str, x: T, *, unit: str | None = None) -> T:
    """Record an input of the problem; the page's Given section must state it."""
    _register("inputs", name, x)
    _describe(name, x, unit, None)
    return x


def value(name: str, x: T, *, unit: str | None = None, dtype: str | None = None) -> T:
    """Record a computed value that claims in the prose can bind to; returns ``x``.

    ``unit`` (``"MB"``, ``"MiB"``, ``"ms"``…) is checked against a unit word written after a
    claim. ``dtype`` (``"float32"``) is read from a tensor or numpy scalar when not given: a claim
    may not state more significant digits than it carries (fp32: 8, bf16: 3, fp16: 4, fp64: 16).
    """
    _register("values", name, x)
    _describe(name, x, unit, dtype)
    return x


def sanity(name: str, condition: Any, message: str = "", *, operands: tuple[Any, Any] | None = None) -> None:
    """Assert a sanity property; a false condition stops the check with a SanityError.

    A sanity that backs a relation sentence ("the masked mean is larger than the plain mean")
    passes the two sides, each computed by its own route, as ``operands=(left, right)``: the page
    shows them beside what was asserted.
    """
    if not _NAME.match(name):
        raise ValueError(f"invalid sanity name {name!r}")
    if name in _state["sanity"]:
        raise ValueError(f"sanity name {name!r} is recorded twice")
    ok = bool(condition)
    entry: dict[str, Any] = {"ok": ok, "message": message}
    if operands is not None:
        left, right = operands
        entry["operands"] = [_plain(left), _plain(right)]
    _state["sanity"][name] = entry
    _state["lines"][name] = _caller_line()
    if not ok:
        raise SanityError(f"sanity '{name}' failed" + (f": {message}" if message else ""))


def figure(name: str, fig: Any, caption: str) -> None:
    """Record a matplotlib figure as SVG; a page shows it with ``[[figure:name]]``.

    The SVG is written with text as paths, so it needs no font; the figure is closed.
    """
    import io

    if not _NAME.match(name) or name in _state["figures"]:
        raise ValueError(f"invalid or repeated figure name {name!r}")
    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight", metadata={"Date": None})
    _state["figures"][name] = {"caption": caption, "svg": buf.getvalue()}
    _state["lines"][name] = _caller_line()
    try:
        import matplotlib.pyplot as plt

        plt.close(fig)
    except ImportError:  # pragma: no cover
        pass


def _write_result() -> None:
    path = os.environ.get(RESULT_ENV)
    if not path:
        return
    data = {
        "inputs": _state["inputs"],
        "values": _state["values"],
        "sanity": _state["sanity"],
        "figures": _state["figures"],
        "lines": _state["lines"],
        "units": _state["units"],
        "dtypes": _state["dtypes"],
        "cpu_s": time.process_time(),  # CPU seconds of this process, all threads: steadier than wall time
    }
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(data, fh)


atexit.register(_write_result)
