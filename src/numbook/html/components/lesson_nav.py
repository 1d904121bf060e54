"""Lesson navigation: the previous and next lesson and the problems a lesson prepares for.

    /// lesson-nav
    - Previous: [Lesson 4 · Bias and broadcasting](lesson-4.md)
    - Next: [Lesson 6 · From logits to a loss](lesson-6.md)
    - Prepares for: [I.4.B07](../problems/I.4.B07.md), [I.4.B04](../problems/I.4.B04.md)
    ///

Links are ordinary Markdown links, so MkDocs resolves them and ``--strict`` fails on a
missing target. The first link after ``Previous:`` gets ``rel="prev"``, after ``Next:``
``rel="next"``.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as etree

from numbook.html.components._base import ComponentBlock
from numbook.html.components._common import sub

__all__ = ["LessonNav"]

_KINDS = {"previous": ("prev", "Previous lesson"), "next": ("next", "Next lesson"),
          "prepares for": ("", "Prepares you for")}
_HEAD = re.compile(r"^\s*(?P<kind>previous|next|prepares for)\s*:\s*", re.I)


class LessonNav(ComponentBlock):
    """``/// lesson-nav``: a list whose items start with Previous:, Next: or Prepares for:."""

    NAME = "lesson-nav"

    def on_create(self, parent: etree.Element) -> etree.Element:
        label = (self.argument or "Lesson navigation").strip()
        return sub(parent, "nav", class_="nb-lesson-nav", aria_label=label)

    def on_end(self, block: etree.Element) -> None:
        items = [li for ul in block if ul.tag == "ul" for li in ul]
        if not items or any(not _HEAD.match(li.text or "") for li in items):
            self.warn("write a list whose items start with 'Previous:', 'Next:' or 'Prepares for:'")
            return
        for li in items:
            m = _HEAD.match(li.text or "")
            assert m is not None
            kind = m.group("kind").lower()
            li.set("class", f"nb-lesson-nav__{kind.split()[0]}")
            li.set("data-rel", _KINDS[kind][0])
            li.text = li.text[m.end() :] if li.text else ""
            head = etree.Element("span", {"class": "nb-lesson-nav__kind"})
            head.text = _KINDS[kind][1]
            head.tail = li.text
            li.text = None
            li.insert(0, head)

    def on_inline_end(self, block: etree.Element) -> None:
        for li in (li for ul in block if ul.tag == "ul" for li in ul):
            rel = li.attrib.pop("data-rel", "")
            link = next(iter(li.iter("a")), None)
            if link is None:
                self.warn(f"'{_KINDS_BY_CLASS.get(li.get('class', ''), '?')}' has no link")
            elif rel:
                link.set("rel", rel)


_KINDS_BY_CLASS = {f"nb-lesson-nav__{k.split()[0]}": v[1] for k, v in _KINDS.items()}
