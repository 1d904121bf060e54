"""Quick check: a multiple-choice question with feedback and an explanation for every option.

    /// quiz | If `X` has shape (8, 3) and `W` has shape (3, 5), what shape does `X @ W` have?
    - [ ] (3, 5)
        That is the shape of `W` alone; the batch of eight rows is missing.
    - [x] [[(8, 5)|xw_shape]]
        Each of the 8 rows of `X` meets each of the 5 columns of `W`.
    ///

Text before the list is extra prompt (Markdown). The list of options is the block's last
list; every item starts with ``[ ]`` or ``[x]``, its first line is the option and the indented
lines under it are the explanation shown when the reader picks it. Exactly one option is
marked ``[x]``. A right answer that is a computed fact is written as a claim, so the key is
verified against the check like any number in the prose, and named in the header as
``answer: name``, so the ``[x]`` is tied to the check's value: moved to another option, it fails.

    /// quiz | If `X` has shape (8, 3) and `W` has shape (3, 5), what shape does `X @ W` have?
        answer: xw_shape

The key rules (the count of ``[x]``, the answer, a wrong option that is also true) are read from
the Markdown (``numbook.core.quizzes``) with the page's verification, so ``numbook verify`` reports
them too; this block reports what only the parsed block shows.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as etree

from numbook.html.components._base import ComponentBlock, type_id, type_text
from numbook.html.components._common import sub
from numbook.html.components.keys import hide_claim_titles

__all__ = ["Quiz"]

_MARK = re.compile(r"^\[(?P<mark>[ xX])\][ \t]+")


class _Option:
    def __init__(self, correct: bool, label: str, why_text: str, why_children: list[etree.Element]):
        self.correct = correct
        self.label = label
        self.why_text = why_text
        self.why_children = why_children


def _read_option(li: etree.Element) -> _Option | None:
    """Split a list item into its mark, its label (first line) and its explanation."""
    children = list(li)
    if (li.text or "").strip():
        head, rest = li.text or "", children
    elif children and children[0].tag == "p" and (children[0].text or "").strip() and not len(children[0]):
        head, rest = children[0].text or "", children[1:]
    else:
        return None
    head = head.strip()
    m = _MARK.match(head)
    if not m:
        return None
    label, _, why = head[m.end() :].partition("\n")
    why = "\n".join(line.strip() for line in why.split("\n")).strip()
    return _Option(m.group("mark") != " ", label.strip(), why, rest)


class Quiz(ComponentBlock):
    """``/// quiz | question``: options are a task list; exactly one is ``[x]``."""

    NAME = "quiz"
    OPTIONS = {
        "id": ("", type_id),
        "label": ("Quick check", type_text),
        "answer": ("", type_text),   # the value the key binds (read and checked in numbook.core.quizzes)
    }

    def on_validate(self, parent: etree.Element) -> bool:
        return True   # the question, like every rule the Markdown shows, is checked in numbook.core.quizzes

    def on_create(self, parent: etree.Element) -> etree.Element:
        self.qid = self.unique_id("nb-" + (self.options["id"] or f"quiz-{self.ordinal}"))
        el = sub(parent, "div", class_="nb-quiz", id=self.qid, data_nb_quiz="")
        sub(el, "p", self.options["label"], class_="nb-quiz__label")
        sub(el, "p", (self.argument or "").strip(), class_="nb-quiz__question", id=f"{self.qid}-q")
        self.prompt = sub(el, "div", class_="nb-quiz__prompt")
        return el

    def on_add(self, block: etree.Element) -> etree.Element:
        return self.prompt

    def on_end(self, block: etree.Element) -> None:
        lists = [c for c in self.prompt if c.tag in ("ul", "ol")]
        options = [_read_option(li) for li in lists[-1]] if lists else []
        if not options or any(o is None for o in options):
            self.warn("end the block with a list of options, each starting with '[ ]' or '[x]'")
            return
        self.prompt.remove(lists[-1])
        if not len(self.prompt) and not (self.prompt.text or "").strip():
            block.remove(self.prompt)

        opts = [o for o in options if o is not None]   # their count and key: numbook.core.quizzes

        group = sub(block, "div", class_="nb-quiz__group", role="group", aria_labelledby=f"{self.qid}-q")
        ul = sub(group, "ul", class_="nb-quiz__options")
        for n, o in enumerate(opts, start=1):
            li = sub(ul, "li", class_="nb-quiz__option", data_correct="true" if o.correct else "false")
            button = sub(li, "button", type="button", class_="nb-quiz__choice", aria_pressed="false")
            sub(button, "span", o.label, class_="nb-quiz__text")
            why = sub(li, "div", class_="nb-quiz__why", id=f"{self.qid}-why-{n}",
                      data_search_exclude="")   # search must not give away which option is right
            if o.why_text:
                sub(why, "p", o.why_text)
            why.extend(o.why_children)
            if not len(why):
                self.warn(f"option {n} ('{o.label}') has no explanation; indent one under it")
        sub(block, "div", class_="nb-quiz__feedback", role="status", aria_live="polite")
        self.options_seen = opts

    def on_inline_end(self, block: etree.Element) -> None:
        """Once claims are rendered, hide their tooltips in the options (``keys.py``)."""
        for label in block.iter("span"):
            if label.get("class") == "nb-quiz__text":
                hide_claim_titles(self.md, label)
