"""Interactive components for lessons, written in Markdown as pymdownx blocks.

    markdown_extensions:
      - numbook.html.components

| block                     | what the reader gets                                        |
|---------------------------|-------------------------------------------------------------|
| ``/// quiz | question``   | a quick check: options, feedback, an explanation for each   |
| ``/// shape-debugger``    | B, F, C controls and the shapes of X, W, b and Z            |
| ``/// your-turn | prompt``| a free-text box with a saved draft, hints, a model answer   |
| ``//// hint``             | (inside your-turn) one hint, revealed in order              |
| ``//// model-answer``     | (inside your-turn) the model answer, behind a reveal        |
| ``/// lesson-nav``        | previous and next lesson, and the problems it prepares for  |
| ``/// contents``          | the book's parts and chapters, their problem counts, links  |

Behaviour lives in ``docs/assets/numbook/components.js`` and the look in
``components.css``; the HTML here is complete without them (every explanation, hint and
answer is on the page), so a reader without JavaScript loses interaction, not content.
A fault in a block (two keys, an unknown option, a hint outside your-turn, a block name no extension
registered, such as a misspelt ``/// contnets``) is a warning
``path:line: /// quiz: …`` under ``mkdocs.*``, so ``mkdocs build --strict`` fails.
"""

from __future__ import annotations

import xml.etree.ElementTree as etree
from typing import Any

from markdown import Markdown
from markdown.preprocessors import Preprocessor
from markdown.treeprocessors import Treeprocessor
from pymdownx.blocks import BlocksExtension, BlocksProcessor
from pymdownx.blocks.block import Block

from numbook.core.quizzes import quiz_faults
from numbook.html.components._base import LOCATOR
from numbook.html.components._common import Locator, warn
from numbook.html.components.contents import Contents
from numbook.html.components.lesson_nav import LessonNav
from numbook.html.components.quiz import Quiz
from numbook.html.components.shape_debugger import ShapeDebugger
from numbook.html.components.your_turn import Hint, ModelAnswer, YourTurn
from numbook.html.extension import extension_of

__all__ = ["ComponentsExtension", "makeExtension", "BLOCKS"]

BLOCKS: tuple[type[Block], ...] = (Quiz, ShapeDebugger, YourTurn, Hint, ModelAnswer, LessonNav, Contents)


class _Audit(Treeprocessor):
    """After the blocks have run: a block start the parser did not take is a fault.

    pymdownx.blocks leaves a block whose options header is not YAML as plain text, and a block whose name no
    extension registered (a typo: ``/// contnets``) as a paragraph.
    """

    def __init__(self, md: Markdown, locator: Locator) -> None:
        super().__init__(md)
        self.locator = locator

    def run(self, root: etree.Element) -> None:
        mgr = self.md.parser.blockprocessors["blocks"]
        assert isinstance(mgr, BlocksProcessor)
        for name, lines in self.locator.lines.items():
            made = mgr.trackers.get(name, {}).get("count", 0)
            if made < len(lines):
                where = ", ".join(str(n) for n in lines[made:])
                warn(self.md, lines[made], f"/// {name}: {len(lines) - made} block(s) not recognised "
                     f"(a header that is not 'key: value' lines?); starts at line(s) {where}")
        known = sorted(mgr.blocks)
        for line, name in self.locator.unknown:
            if name not in mgr.blocks:
                warn(self.md, line, f"/// {name}: no such block (known: {', '.join(known)})")


class _QuizKeys(Preprocessor):
    """The quick checks' rules that the Markdown shows (``numbook.core.quizzes``), on a page the claim processor
    does not verify (no numbook extension, no page, or a page whose front matter failed): on the lines as they
    are. A verified page's quick checks were read with it, with the records of the claims their options bind
    (``numbook.core.bookpass.check_page``), as ``numbook verify`` reads them.
    """

    def run(self, lines: list[str]) -> list[str]:
        if getattr(self.md, "_original_md", None) is not None:
            return lines   # markdown-exec's inner conversion of already rendered text
        ext = extension_of(self.md)
        page = ext.page() if ext is not None else None
        if page is not None and page.verify:
            return lines
        for line, message in quiz_faults("\n".join(lines)):
            warn(self.md, line, message)
        return lines


class ComponentsExtension(BlocksExtension):  # type: ignore[misc]  # pymdownx is untyped
    """Registers the component blocks, the line locator and the audit."""

    def extendMarkdownBlocks(self, md: Markdown, block_mgr: BlocksProcessor) -> None:  # noqa: N802
        locator = Locator(md, {b.NAME for b in BLOCKS})
        md.preprocessors.register(locator, LOCATOR, 28)  # before fences are stashed (25)
        md.preprocessors.register(_QuizKeys(md), "numbook_quiz_keys", 27)   # after the claims (29)
        md.treeprocessors.register(_Audit(md, locator), "numbook_components_audit", 19)
        for block in BLOCKS:
            block_mgr.register(block, {})


def makeExtension(**kwargs: Any) -> ComponentsExtension:  # noqa: N802 (Python-Markdown's API)
    return ComponentsExtension(**kwargs)
