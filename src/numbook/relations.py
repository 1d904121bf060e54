"""Relation sentences: a sentence that relates computed quantities is a claim too.

"The masked mean is 17.6% larger", "the loss fails past s = 103.97", "the rank falls three
times", "padding does not help because …": each states a relation between numbers the check
computed, and each must be backed by a ``sanity()`` of the check that tests exactly that
relation, marked ``[[sanity:name]]`` in the same sentence.

The finder is a heuristic, stated so an author can predict it: a sentence (prose, not code,
not a heading) that holds at least one bound claim and, within ``WINDOW`` words of a claim, a
word of relation (comparative, causal, threshold or count words below) and no sanity marker is
reported. A sentence that reads as a relation but is not one (a definition, a quotation of a
setting) carries ``[[relation:none|why]]``, which renders as nothing and keeps the reason in
the source: the reasoned allow-list lives beside the sentence it excuses.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .structure import code_spans, heading, walk

__all__ = ["RELATION_WORDS", "WINDOW", "RelationSentence", "relation_sentences", "ALLOW"]

WINDOW = 8
RELATION_WORDS = (
    # comparative
    "larger", "smaller", "bigger", "greater", "higher", "lower", "fewer", "exceeds", "exceed", "exceeding",
    "understates", "overstates", "understate", "overstate", "cheaper", "costlier", "faster", "slower",
    "longer", "shorter", "twice", "half", "double", "doubles", "halves", "triple", "outgrows", "dominates",
    # change and count
    "grows", "shrinks", "falls", "rises", "drops", "increases", "decreases",
    # threshold
    "overflows", "underflows", "saturates", "fails", "breaks", "threshold", "past", "beyond", "crosses",
    "first", "smallest", "largest",
    # cause
    "because", "therefore", "hence", "causes", "why",
)
_WORD = re.compile(r"[A-Za-z][A-Za-z'’-]*")
_CLAIM = re.compile(r"\[\[(?P<body>[^\]]*(?:\][^\]]+)?)\]\]")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z`$(]|\[\[(?!sanity:|relation:))")
_MARKERS_ONLY = re.compile(r"^\s*(?:\[\[(?:sanity:[\w:./-]+|relation:none\|[^\]]+)\]\]\s*)+$")
ALLOW = re.compile(r"\[\[relation:none\|(?P<why>[^\]]+)\]\]")
_RELATION = {w.lower() for w in RELATION_WORDS}


@dataclass(frozen=True)
class RelationSentence:
    line: int          # 1-based line of the sentence's start, in the verified text
    text: str          # the sentence as written
    words: tuple[str, ...]   # the relation words found next to a claim


def _sentences(text: str) -> list[tuple[int, str]]:
    """(first line, sentence) for the prose of a page: paragraphs split at sentence ends."""
    out: list[tuple[int, str]] = []
    para: list[tuple[int, str]] = []

    def flush() -> None:
        if not para:
            return
        joined = ""
        starts: list[tuple[int, int]] = []   # (offset in joined, line)
        for line, t in para:
            starts.append((len(joined), line))
            joined += t.strip() + " "
        pos = 0
        for piece in _SENTENCE_END.split(joined):
            at = joined.find(piece, pos)
            line = max((ln for off, ln in starts if off <= at), default=para[0][0])
            if piece.strip():
                if out and _MARKERS_ONLY.match(piece) and out[-1][0] >= para[0][0]:
                    out[-1] = (out[-1][0], out[-1][1] + " " + piece.strip())   # "… larger. [[sanity:x]]"
                else:
                    out.append((line, piece.strip()))
            pos = at + len(piece)
        para.clear()

    for ln in walk(text):
        if ln.code or not ln.text.strip() or heading(ln.text) is not None:
            flush()
            continue
        spans = code_spans(ln.text)
        plain = ln.text
        for a, b in reversed(spans):
            plain = plain[:a] + " code " + plain[b:]
        if re.match(r"^\s*(?:[-*+]|\d+\.)\s", plain):
            flush()   # a list item is a sentence group of its own
        para.append((ln.index + 1, plain))
    flush()
    return out


def relation_sentences(text: str) -> list[RelationSentence]:
    """Sentences of ``text`` that relate bound numbers and carry no sanity marker (nor an allowance)."""
    found: list[RelationSentence] = []
    for line, sentence in _sentences(text):
        if "[[sanity:" in sentence or ALLOW.search(sentence):
            continue
        tokens: list[str] = []
        claim_at: list[int] = []
        last = 0
        for m in _CLAIM.finditer(sentence):
            tokens += [w.lower() for w in _WORD.findall(sentence[last:m.start()])]
            body = m.group("body")
            ref = body.rsplit("|", 1)[-1] if "|" in body else ""
            if ref.strip() not in ("free", "") and not body.startswith(("figure:", "relation:")):
                claim_at.append(len(tokens))
                tokens.append("\0claim")
            last = m.end()
        tokens += [w.lower() for w in _WORD.findall(sentence[last:])]
        if not claim_at:
            continue
        near = sorted({tokens[i] for c in claim_at for i in range(max(0, c - WINDOW), min(len(tokens), c + WINDOW + 1))
                       if tokens[i] in _RELATION})
        if near:
            found.append(RelationSentence(line, sentence, tuple(near)))
    return found
