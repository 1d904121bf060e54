"""The key of a quick check, tested with the book's claim literals.

The claim preprocessor has already verified every ``[[literal|name]]`` in an option (the key
is right). What it cannot see is the question as a whole, so this module adds two rules:

- a key that is a number or a shape must be a claim, so executed code verifies it;
- no wrong option may also be true: a distractor written as a literal must not match the
  value the key is bound to (``(8, 5)`` twice, or ``40`` against a key of ``40``).

It runs after inline processing, when a claim is a stashed ``<span class="nb-claim"
data-claim=…>``. Outside a page with checks only the first rule applies.
"""

from __future__ import annotations

import html
import re
import xml.etree.ElementTree as etree
from typing import Any

from markdown import Markdown
from markdown import util as mutil

from ..claims import LiteralError, parse_literal
from ._common import current_page

__all__ = ["check_key", "option_text", "hide_claim_titles"]

_PLACEHOLDER = re.compile(re.escape(mutil.STX) + r"wzxhzdk:(\d+)" + re.escape(mutil.ETX))
# Inline HTML is stashed tag by tag: the opening tag of a claim is one stash entry.
_CLAIM = re.compile(r'<span class="nb-claim[^"]*" title="(?P<title>[^"]*)" data-claim="(?P<name>[^"]*)">')
_TAG = re.compile(r"<[^>]+>")


def option_text(md: Markdown, el: etree.Element) -> tuple[str, list[tuple[str, str]]]:
    """The plain text of a rendered option, and the claims in it as ``(name, check)`` pairs."""
    claims: list[tuple[str, str]] = []

    def expand(m: re.Match[str]) -> str:
        i = int(m.group(1))
        raw = md.htmlStash.rawHtmlBlocks[i] if i < len(md.htmlStash.rawHtmlBlocks) else ""
        raw = raw if isinstance(raw, str) else etree.tostring(raw, encoding="unicode")
        c = _CLAIM.search(raw)
        if c:
            title = html.unescape(c.group("title"))
            check = title.split(" · ", 1)[1].split(" (", 1)[0] if " · " in title else ""
            claims.append((html.unescape(c.group("name")), check))
        return html.unescape(_TAG.sub("", raw))

    text = _PLACEHOLDER.sub(expand, "".join(el.itertext()))
    return " ".join(text.split()), claims


def _page_value(name: str, check: str) -> tuple[bool, Any]:
    ctx = current_page()
    if ctx is None or not check:
        return False, None
    res = ctx.results(check)
    return res.lookup(name) if res.ok else (False, None)


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
    found, value = _page_value(*key_claims[0])
    if not found:
        return faults
    for correct, text, claims in options:
        if correct or claims:
            continue
        try:
            literal = parse_literal(text)
        except LiteralError:
            continue
        if literal.matches(value):
            faults.append(f"the wrong option '{text}' also matches the key's value "
                          f"{key_claims[0][0]} = {value!r}")
    return faults


def hide_claim_titles(md: Markdown, el: etree.Element) -> None:
    """Move the tooltip of every claim inside ``el`` to ``data-nb-title``.

    A claim's tooltip names its value and check, which would give the key away on hover;
    ``components.js`` puts it back once the reader has found the right answer.
    """
    for m in _PLACEHOLDER.finditer("".join(el.itertext())):
        i = int(m.group(1))
        raw = md.htmlStash.rawHtmlBlocks[i] if i < len(md.htmlStash.rawHtmlBlocks) else None
        if isinstance(raw, str) and _CLAIM.match(raw):
            md.htmlStash.rawHtmlBlocks[i] = raw.replace(' title="', ' data-nb-title="', 1)
