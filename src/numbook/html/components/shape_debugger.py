"""Shape debugger: controls for B, F and C, and the shapes of X, W, b and Z = X @ W + b.

    /// shape-debugger
        B: 4
        F: 3
        C: 5
        max: 64
    Optional caption (Markdown), shown under the controls.
    ///

The table is rendered at build time for the starting sizes, so the page reads correctly
before (and without) JavaScript; ``components.js`` then recomputes it as the reader moves
the controls, and says in words which tensors changed and which did not.
"""

from __future__ import annotations

import xml.etree.ElementTree as etree

from numbook.html.components._base import ComponentBlock, type_id, type_positive_int
from numbook.html.components._common import sub

__all__ = ["ShapeDebugger", "TENSORS", "shape_of"]

DIMS = (
    ("B", "Batch size", "requests per batch"),
    ("F", "Input features", "numbers per request"),
    ("C", "Output classes", "scores per request"),
)

# name, role, dimensions (letters of DIMS), grows with B
TENSORS = (
    ("X", "inputs", ("B", "F"), True),
    ("W", "weights (shared)", ("F", "C"), False),
    ("b", "bias (shared)", ("C",), False),
    ("Z", "logits", ("B", "C"), True),
)


def shape_of(dims: tuple[str, ...], sizes: dict[str, int]) -> str:
    """A shape written as a Python tuple: ``(4, 3)``, ``(5,)``."""
    values = [str(sizes[d]) for d in dims]
    return "(" + ", ".join(values) + ("," if len(values) == 1 else "") + ")"


def _count(dims: tuple[str, ...], sizes: dict[str, int]) -> int:
    n = 1
    for d in dims:
        n *= sizes[d]
    return n


class ShapeDebugger(ComponentBlock):
    """``/// shape-debugger``: options B, F, C (starting sizes), max (largest size), id."""

    NAME = "shape-debugger"
    OPTIONS = {
        "B": (4, type_positive_int),
        "F": (3, type_positive_int),
        "C": (5, type_positive_int),
        "max": (64, type_positive_int),
        "id": ("", type_id),
    }

    def on_validate(self, parent: etree.Element) -> bool:
        if self.argument:
            self.warn(f"takes no title after '|' (got '{self.argument}'); write a caption in the block")
        top = self.options["max"]
        for d, *_ in DIMS:
            if self.options[d] > top:
                self.warn(f"{d} = {self.options[d]} is larger than max = {top}")
                self.options[d] = top
        return True

    def on_create(self, parent: etree.Element) -> etree.Element:
        sid = self.unique_id("nb-" + (self.options["id"] or f"shapes-{self.ordinal}"))
        sizes = {d: self.options[d] for d, *_ in DIMS}
        top = str(self.options["max"])
        el = sub(parent, "div", class_="nb-shapes", id=sid, data_nb_shapes="")
        sub(el, "p", "Shape debugger", class_="nb-shapes__label")
        controls = sub(el, "div", class_="nb-shapes__controls")
        for d, name, hint in DIMS:
            box = sub(controls, "div", class_="nb-shapes__control")
            label = sub(box, "label", for_=f"{sid}-{d}")
            label.text = f"{name}, "
            sub(label, "var", d).tail = ""
            sub(box, "span", hint, class_="nb-shapes__hint", id=f"{sid}-{d}-hint")
            common = {"min": "1", "max": top, "step": "1", "value": str(sizes[d]), "data_dim": d}
            sub(box, "input", type="number", id=f"{sid}-{d}", inputmode="numeric",
                aria_describedby=f"{sid}-{d}-hint", class_="nb-shapes__number", **common)
            # A mouse-friendly twin of the number field; keyboard and screen reader use the field.
            sub(box, "input", type="range", tabindex="-1", aria_hidden="true", class_="nb-shapes__range", **common)
        self.caption = sub(el, "div", class_="nb-shapes__caption")

        table = sub(el, "table")  # no class: Material styles and wraps it like any table
        sub(table, "caption", "Z = X @ W + b at the sizes above", class_="nb-shapes__table-caption")
        head = sub(sub(table, "thead"), "tr")
        for title in ("Tensor", "Shape", "Elements", "Grows with B"):
            sub(head, "th", title, scope="col")
        body = sub(table, "tbody")
        for name, role, dims, grows in TENSORS:
            row = sub(body, "tr", data_tensor=name, data_dims="".join(dims))
            th = sub(row, "th", scope="row")
            sub(th, "code", name).tail = " "
            sub(th, "span", role, class_="nb-shapes__role")
            sub(row, "td", shape_of(dims, sizes), class_="nb-shapes__shape")
            sub(row, "td", f"{_count(dims, sizes):,}", class_="nb-shapes__count")
            sub(row, "td", "yes" if grows else "no", class_="nb-shapes__grows")
        sub(el, "div", class_="nb-shapes__grids", aria_hidden="true")
        sub(el, "p", class_="nb-shapes__summary", role="status", aria_live="polite")
        return el

    def on_add(self, block: etree.Element) -> etree.Element:
        return self.caption

    def on_end(self, block: etree.Element) -> None:
        if not len(self.caption) and not (self.caption.text or "").strip():
            block.remove(self.caption)
