"""The key of a quick check, tested with the book's claim literals.

The claim preprocessor has already verified every ``[[literal|name]]`` in an option (the key
is right). What it cannot see is the question as a whole, so this module adds two rules:

- a key that is a number or a shape must be a claim, so executed code verifies it;
- no wrong option may also be true: a distractor written as a literal must not match the
  value the key is bound to (``(8, 5)`` twice, or ``40`` against a key of ``40``).

It runs after inline processing, when a claim is a stashed element. It reads the claim's
verification record (``NumbookExtension.stashed``), never the HTML the claim renders as.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as etree

from markdown import Markdown

from ..claims import LiteralError, format_value, parse_literal
from ..markdown_ext import extension_of
from ..render import element, to_html
from ..verify import Record, RecordKind

__all__ = ["check_key", "option_text", "hide_claim_titles"]

_TAG = re.compile(r"<[^>]+>")


def _stashed(md: Markdown, index: int) -> Record | None:
    ext = extension_of(md)
    return ext.stashed.get(index) if ext is not None else None


def _stash_in(md: Markdown, text: str) -> list[int]:
    """Indices of the stashed entries whose placeholders occur in ``text``, in order of appearance."""
    found = [(text.find(md.htmlStash.get_placeholder(i)), i) for i in range(len(md.htmlStash.rawHtmlBlocks))]
    return [i for at, i in sorted(found) if at >= 0]


def option_text(md: Markdown, el: etree.Element) -> tuple[str, list[Record]]:
    """The plain text of a rendered option, and the claim records in it."""
    records: list[Record] = []
    text = "".join(el.itertext())
    for i in _stash_in(md, text):
        rec = _stashed(md, i)
        if rec is not None:
            if rec.kind in (RecordKind.CLAIM, RecordKind.UNVERIFIED):
                records.append(rec)
            shown = rec.shown
        else:
            raw = md.htmlStash.rawHtmlBlocks[i]
            shown = _TAG.sub("", raw if isinstance(raw, str) else to_html(raw))
        text = text.replace(md.htmlStash.get_placeholder(i), shown)
    return " ".join(text.split()), records


def check_key(md: Markdown, block: etree.Element) -> list[str]:
    """Faults in the key of one rendered quiz."""
    faults: list[str] = []
    options = []
    for li in block.iter("li"):
        if "nb-quiz__option" in (li.get("class") or "").split():
            label = next((s for s in li.iter("span") if s.get("class") == "nb-quiz__text"), None)
            if label is not None:
                options.append((li.get("data-correct") == "true", *option_text(md, label)))
    keys = [o for o in options if o[0]]
    if len(keys) != 1:
        return faults  # the count is reported when the block ends
    _, key_text, key_claims = keys[0]
    if not key_claims:
        try:
            parse_literal(key_text)
        except LiteralError:
            return faults  # a key in words: nothing to verify
        faults.append(f"the key '{key_text}' is a number; bind it to a check value as [[{key_text}|name]]")
        return faults
    key = key_claims[0]
    if key.kind != RecordKind.CLAIM:
        return faults  # a key claim that failed is reported by the claim itself
    for correct, text, claims in options:
        if correct or claims:
            continue
        try:
            literal = parse_literal(text)
        except LiteralError:
            continue
        if literal.matches(key.value):
            faults.append(f"the wrong option '{text}' also matches the key's value "
                          f"{key.name} = {format_value(key.value)}")
    return faults


def hide_claim_titles(md: Markdown, el: etree.Element) -> None:
    """Move the tooltip of every claim inside ``el`` to ``data-nb-title``.

    A claim's tooltip names its value and check, which would give the key away on hover;
    ``components.js`` puts it back once the reader has found the right answer. The claim is
    rendered again from its record, with the tooltip moved.
    """
    for i in _stash_in(md, "".join(el.itertext())):
        rec = _stashed(md, i)
        if rec is None or rec.kind != RecordKind.CLAIM:
            continue
        claim = element(rec)
        if claim is not None and claim.get("title") is not None:
            claim.set("data-nb-title", claim.attrib.pop("title"))
            md.htmlStash.rawHtmlBlocks[i] = to_html(claim)
