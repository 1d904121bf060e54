"""PLACEHOLDER until the idx branch lands: TeX as plain and spoken text."""

from __future__ import annotations

import re

__all__ = ["plain", "spoken"]


def plain(tex: str) -> str:
    s = re.sub(r"\\(class|cssId)\{[^}]*\}", "", tex)
    s = s.replace("{,}", ",").replace("\\times", "×")
    s = re.sub(r"\\[a-zA-Z]+", "", s)
    return re.sub(r"[{}\\]", "", s).strip()


def spoken(tex: str) -> str:
    return plain(tex)
