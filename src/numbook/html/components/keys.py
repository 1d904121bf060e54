"""The claims in a quick check's options, once rendered: their tooltips wait for the reader's answer.

The key's rules (a number key must be a claim, the ``[x]`` must bind the declared answer, no wrong
option may also be true) are read from the Markdown (``numbook.core.quizzes``) when the page is
verified, so ``numbook verify`` applies them too. This module runs after inline processing, when a
claim is a stashed element: it finds the claims of an option by the placeholders Python-Markdown's
``htmlStash`` put in its text, reads each one's verification record (``NumbookExtension.stashed``,
by stash index) and renders the claim again from its record; it never reads the HTML a claim
renders as.
"""

from __future__ import annotations

import xml.etree.ElementTree as etree

from markdown import Markdown

from numbook.core.verify import Record, RecordKind
from numbook.html.extension import extension_of
from numbook.html.render import element, interval, to_html

__all__ = ["hide_claim_titles"]



def _stashed(md: Markdown, index: int) -> Record | None:
    ext = extension_of(md)
    return ext.stashed.get(index) if ext is not None else None


def _stash_in(md: Markdown, text: str) -> list[int]:
    """Indices of the stashed entries whose placeholders occur in ``text``, in order of appearance."""
    found = [(text.find(md.htmlStash.get_placeholder(i)), i) for i in range(len(md.htmlStash.rawHtmlBlocks))]
    return [i for at, i in sorted(found) if at >= 0]


def hide_claim_titles(md: Markdown, el: etree.Element) -> None:
    """Move the tooltip of every claim inside ``el``, and of a measured claim's interval suffix (``nb-ci``), to
    ``data-nb-title``.

    A claim's tooltip names its value and check, and the suffix's its interval, which would give the key away on
    hover; ``components.js`` puts them back once the reader has found the right answer. Each is rendered again
    from its record, with the tooltip moved.
    """
    ext = extension_of(md)
    for i in _stash_in(md, "".join(el.itertext())):
        behind = ext.intervals.get(i) if ext is not None else None
        rec = _stashed(md, i)
        if behind is not None:
            rec, render = behind, interval
        elif rec is None or rec.kind != RecordKind.CLAIM:
            continue
        else:
            render = element
        claim = render(rec)
        if claim is not None and claim.get("title") is not None:
            claim.set("data-nb-title", claim.attrib.pop("title"))
            md.htmlStash.rawHtmlBlocks[i] = to_html(claim)
