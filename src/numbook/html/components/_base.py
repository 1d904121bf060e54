"""The base of every component block: options that fail loudly, and the block's source line."""

from __future__ import annotations

import re
import xml.etree.ElementTree as etree
from typing import Any

from pymdownx.blocks.block import Block

from numbook.html.components._common import Locator, warn

__all__ = ["ComponentBlock", "LOCATOR", "type_id", "type_positive_int", "type_text"]

LOCATOR = "numbook_components_locator"
_ID = re.compile(r"^[A-Za-z][A-Za-z0-9_-]*$")


def type_text(value: Any) -> str:
    """Text; YAML may have read ``800`` or ``yes`` as another type, which is kept as written."""
    if isinstance(value, dict | list) or value is None:
        raise ValueError(f"expected text, got {value!r}")
    return value if isinstance(value, str) else str(value)


def type_id(value: Any) -> str:
    """An id made of letters, digits, '-' and '_', starting with a letter."""
    text = type_text(value)
    if not _ID.match(text):
        raise ValueError(f"'{text}' is not an id (letters, digits, '-' and '_', starting with a letter)")
    return text


def type_positive_int(value: Any) -> int:
    """A whole number of at least 1."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"expected a whole number of at least 1, got {value!r}")
    return value


def _locator(md: Any) -> Locator | None:
    try:
        found = md.preprocessors[LOCATOR]
    except KeyError:
        return None
    return found if isinstance(found, Locator) else None


class ComponentBlock(Block):  # type: ignore[misc]  # pymdownx is untyped
    """A pymdownx block whose faults are warnings with ``path:line``, never silent.

    pymdownx.blocks drops a block whose options do not parse and leaves its text on the page;
    a component instead keeps rendering, and says what is wrong and where.
    """

    ARGUMENT: bool | None = None

    line: int | None = None
    ordinal: int = 0

    def warn(self, message: str) -> None:
        warn(self.md, self.line, f"/// {self.NAME}: {message}")

    def _validate(self, parent: etree.Element, arg: Any, **options: Any) -> bool:
        count = self.tracker.get("count", 0)
        self.tracker["count"] = count + 1
        self.ordinal = count + 1
        locator = _locator(self.md)
        self.line = locator.next_line(self.NAME, count) if locator else None

        parsed = {k: v[0] for k, v in self.option_spec.items()}
        for key, raw in options.items():
            if key not in self.option_spec:
                known = ", ".join(sorted(k for k in self.option_spec if k != "attrs"))
                self.warn(f"unknown option '{key}' (known: {known or 'none'})")
                continue
            parser = self.option_spec[key][1]
            try:
                parsed[key] = parser(raw) if parser is not None else raw
            except (ValueError, TypeError) as exc:
                self.warn(f"option '{key}': {exc}")
        self.argument = arg
        self.options = parsed
        self.on_validate(parent)
        return True

    def unique_id(self, wanted: str) -> str:
        """Reserve ``wanted`` as an element id on this page; a second use is a fault."""
        locator = _locator(self.md)
        seen: set[str] = locator.ids if locator else self.tracker.setdefault("ids", set())
        if wanted in seen:
            self.warn(f"id '{wanted}' is used twice on this page; give each block its own 'id'")
        seen.add(wanted)
        return wanted
