"""Your turn: a free-text answer with a saved draft, hints one at a time and a model answer.

    /// your-turn | Why does one `W` serve all eight requests?
        id: shared-w
        maxlength: 800
        label: Your explanation
    The question in more detail (Markdown).

    //// hint
    Which dimension of `X` changes when more requests arrive?
    ////

    //// model-answer
    Each row of `Z` is one request's five scores ...
    ////
    ///

The draft is stored in the reader's browser (``localStorage``), keyed by the page and the
box's ``id``, so give a box an explicit ``id`` when the page may gain boxes above it.
Nothing is sent anywhere and nothing is marked.
"""

from __future__ import annotations

import xml.etree.ElementTree as etree

from numbook.html.components._base import ComponentBlock, type_id, type_positive_int, type_text
from numbook.html.components._common import add_class, has_class, sub

__all__ = ["YourTurn", "Hint", "ModelAnswer"]


class YourTurn(ComponentBlock):
    """``/// your-turn | question``: options id, maxlength (800), label, rows (5)."""

    NAME = "your-turn"
    OPTIONS = {
        "id": ("", type_id),
        "maxlength": (800, type_positive_int),
        "label": ("Your answer", type_text),
        "rows": (5, type_positive_int),
    }

    def on_validate(self, parent: etree.Element) -> bool:
        if not (self.argument or "").strip():
            self.warn("needs its question after '|': /// your-turn | Explain it in your own words")
        return True

    def on_create(self, parent: etree.Element) -> etree.Element:
        self.box_id = self.options["id"] or f"your-turn-{self.ordinal}"
        self.yid = self.unique_id(f"nb-{self.box_id}")
        el = sub(parent, "section", class_="nb-yourturn", id=self.yid, data_nb_yourturn="",
                 data_nb_box=self.box_id, aria_labelledby=f"{self.yid}-title")
        sub(el, "p", "Your turn · not marked", class_="nb-yourturn__label")
        sub(el, "p", (self.argument or "").strip(), class_="nb-yourturn__title", id=f"{self.yid}-title")
        self.content = sub(el, "div", class_="nb-yourturn__prompt")
        return el

    def on_add(self, block: etree.Element) -> etree.Element:
        return self.content

    def on_end(self, block: etree.Element) -> None:
        hints = [c for c in self.content if has_class(c, "nb-hint")]
        answers = [c for c in self.content if has_class(c, "nb-model-answer")]
        for c in hints + answers:
            self.content.remove(c)
        if not len(self.content) and not (self.content.text or "").strip():
            block.remove(self.content)
        if len(answers) > 1:
            self.warn(f"has {len(answers)} model answers; keep one")

        yid, top = self.yid, str(self.options["maxlength"])
        field = sub(block, "div", class_="nb-yourturn__field")
        sub(field, "label", self.options["label"], for_=f"{yid}-text", class_="nb-yourturn__field-label")
        sub(field, "textarea", id=f"{yid}-text", class_="nb-yourturn__text", name=self.box_id,
            rows=str(self.options["rows"]), maxlength=top, aria_describedby=f"{yid}-note {yid}-count")
        meta = sub(field, "p", class_="nb-yourturn__meta")
        sub(meta, "span", "Your draft stays in this browser; nothing is sent or marked.",
            class_="nb-yourturn__note", id=f"{yid}-note")
        sub(meta, "span", f"0 / {top} characters", class_="nb-yourturn__count", id=f"{yid}-count")

        if hints:
            box = sub(block, "div", class_="nb-hints", data_nb_hints="")
            listing = sub(box, "div", class_="nb-hints__list", aria_live="polite")
            for n, hint in enumerate(hints, start=1):
                hint.set("id", f"{yid}-hint-{n}")
                hint.set("tabindex", "-1")
                title = etree.Element("p", {"class": "nb-hint__title"})
                title.text = f"Hint {n} of {len(hints)}"
                hint.insert(0, title)
                listing.append(hint)
            sub(box, "button", f"Show hint 1 of {len(hints)}", type="button", class_="nb-hints__next",
                aria_controls=" ".join(f"{yid}-hint-{n}" for n in range(1, len(hints) + 1)))
        block.extend(answers)


class _Part(ComponentBlock):
    """A part of ``your-turn`` (a hint, the model answer); a fault anywhere else."""

    CLASS = ""

    def on_validate(self, parent: etree.Element) -> bool:
        if not has_class(parent, "nb-yourturn__prompt"):
            self.warn("belongs inside a /// your-turn block (open it with four slashes: ////)")
        return True


class Hint(_Part):
    """``//// hint`` inside ``your-turn``: revealed one at a time, in order."""

    NAME = "hint"

    def on_create(self, parent: etree.Element) -> etree.Element:
        el = sub(parent, "div", class_="nb-hint", data_search_exclude="")
        if self.argument:
            self.warn(f"takes no title after '|' (got '{self.argument}'); hints are numbered for you")
        return el


class ModelAnswer(_Part):
    """``//// model-answer`` inside ``your-turn``: behind a <details> the reader opens."""

    NAME = "model-answer"

    def on_create(self, parent: etree.Element) -> etree.Element:
        el = sub(parent, "details", class_="nb-model-answer", data_search_exclude="")
        sub(el, "summary", (self.argument or "Model answer").strip())
        self.body = sub(el, "div", class_="nb-model-answer__body")
        return el

    def on_add(self, block: etree.Element) -> etree.Element:
        return self.body

    def on_end(self, block: etree.Element) -> None:
        add_class(block, "nb-model-answer")
