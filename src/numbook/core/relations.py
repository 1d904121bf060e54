"""Relation sentences: a sentence that relates computed quantities is a claim too.

"The masked mean is 17.6% larger", "the loss fails past s = 103.97", "the rank falls three
times", "padding does not help because …": each states a relation between numbers the check
computed, and each must be backed by a ``sanity()`` of the check that tests exactly that
relation, marked ``[[sanity:name]]`` in the same sentence.

The finder is a heuristic, stated so an author can predict it: a sentence (prose, not code,
not a heading) that holds at least one bound claim and a word of relation and no sanity marker
is reported: a word of comparison, change or ratio anywhere in the sentence, a word of threshold or
cause (and "above", "below") within ``WINDOW`` words of a claim; unless
it compares two bound values that the verifier can test ("[[10.9|a]] is larger than [[6.7|b]]").

The words of a sentence that a sanity backs are bound to what the sanity declares: the grammar
below (``stated_relations``) reads the relations a run of words states, negation included, and
``sanity(name, cond, relation="larger")`` declares what the sanity asserts, read by the same
grammar; the verifier requires the two to agree. A sentence that reads as a relation but is not one
(a definition, a quotation of a setting) carries ``[[relation:none|why]]``, which renders as nothing
and keeps the reason in the source: the reasoned allow-list lives beside the sentence it excuses.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from numbook.core.structure import code_spans, heading, walk

__all__ = ["RELATION_WORDS", "WINDOW", "RelationSentence", "relation_sentences", "ALLOW", "Stated", "Segment",
           "stated_relations", "declared_relations", "sanity_segments", "NAMES", "POLAR", "NEG", "bound_before"]

WINDOW = 8
"""Words of threshold and cause (first, past, because …) and the place words above and below count within
this many words of a bound claim; a word of comparison (larger, exceeds, twice, grows …) counts anywhere in
the sentence."""
_PLACE = frozenset({"above", "below"})   # "the trace below", "the lengths above": places as often as orders
RELATION_WORDS = (
    # comparative
    "larger", "smaller", "bigger", "greater", "higher", "lower", "fewer", "exceeds", "exceed", "exceeding",
    "understates", "overstates", "understate", "overstate", "cheaper", "costlier", "faster", "slower",
    "longer", "shorter", "twice", "half", "double", "doubles", "halves", "triple", "outgrows", "dominates",
    # change and count
    "grows", "shrinks", "falls", "rises", "drops", "increases", "decreases",
    # threshold
    "above", "below", "exceeded",
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
    words: tuple[str, ...]   # the relation words found in it
    tokens: tuple[str, ...] = ()          # its words, lower case, each bound claim as "\0claim"
    claims: tuple[tuple[int, str], ...] = ()   # (index in tokens, marker body "lit|ref") of each bound claim
    equality: bool = False   # read only for an equality word between two bound claims ("[[a]] equals [[b]]"):
                             # tested where one of the two carries an interval, else left alone


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
    """Sentences of ``text`` that hold a bound claim and a relation word anywhere, with no sanity marker
    (nor an allowance): each must be backed, by a sanity or by a comparison of two bound values."""
    found: list[RelationSentence] = []
    for line, sentence in _sentences(text):
        if "[[sanity:" in sentence or ALLOW.search(sentence):
            continue
        tokens: list[str] = []
        claims: list[tuple[int, str]] = []
        last = 0
        for m in _CLAIM.finditer(sentence):
            tokens += [w.lower() for w in _WORD.findall(sentence[last:m.start()])]
            body = m.group("body")
            ref = body.rsplit("|", 1)[-1] if "|" in body else ""
            if ref.strip() not in ("free", "") and not body.startswith(("figure:", "relation:")):
                claims.append((len(tokens), body))
                tokens.append("\0claim")
            last = m.end()
        tokens += [w.lower() for w in _WORD.findall(sentence[last:])]
        if not claims:
            continue
        strong = {t for i, t in enumerate(tokens) if t in _RELATION and t in _WORDS and t not in _PLACE
                  and not _adverb(tokens, i)}
        weak = {tokens[i] for c, _ in claims for i in range(max(0, c - WINDOW), min(len(tokens), c + WINDOW + 1))
                if tokens[i] in _RELATION and (tokens[i] not in _WORDS or tokens[i] in _PLACE)}
        near = sorted(strong | weak)
        if near:
            found.append(RelationSentence(line, sentence, tuple(near), tuple(tokens), tuple(claims)))
        elif len(claims) > 1 and (equal := sorted({t for t in tokens if t in EQUAL})):
            found.append(RelationSentence(line, sentence, tuple(equal), tuple(tokens), tuple(claims), equality=True))
    return found


# -- the grammar of stated relations ---------------------------------------------------------------
#
# A relation word (or phrase) states a relation of a *family* between the sentence's subject and what
# it is compared with: cmp (larger, smaller, at least, at most, equal, differs), speed (faster,
# slower), trend (grows, falls: the later value against the earlier), ratio (twice, half, triple) and
# extreme (largest, smallest). A negation word up to three words before a word of the first three
# families turns it into its complement ("does not exceed" is at most); before a ratio or extreme word
# it is kept as "not". A negation that belongs to no relation word ("the layer receives no gradient",
# "padding does not help") is the family neg.

CMP, SPEED, TREND, RATIO, EXTREME, NEG = "cmp", "speed", "trend", "ratio", "extreme", "neg"
POLAR = (CMP, SPEED, TREND, RATIO, EXTREME)
_PHRASES: tuple[tuple[tuple[str, ...], str, str], ...] = (
    (("no", "more", "than"), CMP, "<="), (("no", "larger", "than"), CMP, "<="), (("no", "greater", "than"), CMP, "<="),
    (("no", "higher", "than"), CMP, "<="), (("no", "bigger", "than"), CMP, "<="), (("no", "longer", "than"), CMP, "<="),
    (("no", "less", "than"), CMP, ">="), (("no", "fewer", "than"), CMP, ">="), (("no", "smaller", "than"), CMP, ">="),
    (("no", "lower", "than"), CMP, ">="), (("no", "shorter", "than"), CMP, ">="),
    (("at", "least"), CMP, ">="), (("at", "most"), CMP, "<="), (("or", "more"), CMP, ">="), (("or", "less"), CMP, "<="),
    (("or", "fewer"), CMP, "<="), (("more", "than"), CMP, ">"), (("less", "than"), CMP, "<"),
    (("no", "faster", "than"), SPEED, "<="), (("no", "slower", "than"), SPEED, ">="),
)
EQUAL = ("equal", "equals", "identical")
"""The equality words: not relation words of a sentence on their own; read between two bound claims."""
_WORDS: dict[str, tuple[str, str]] = {
    **dict.fromkeys(("larger", "bigger", "greater", "higher", "above", "exceeds", "exceed", "exceeding", "exceeded",
                     "longer", "costlier", "overstates", "overstate", "outgrows", "dominates", "wider", "heavier"),
                    (CMP, ">")),
    **dict.fromkeys(("smaller", "lower", "fewer", "below", "shorter", "cheaper", "understates", "understate",
                     "narrower", "lighter"), (CMP, "<")),
    **dict.fromkeys(EQUAL, (CMP, "==")),
    **dict.fromkeys(("differs", "differ", "different", "unequal"), (CMP, "!=")),
    "faster": (SPEED, ">"), "slower": (SPEED, "<"),
    **dict.fromkeys(("grows", "grow", "rises", "rise", "increases", "increase", "climbs"), (TREND, ">")),
    **dict.fromkeys(("falls", "fall", "shrinks", "shrink", "drops", "drop", "decreases", "decrease", "declines"),
                    (TREND, "<")),
    **dict.fromkeys(("twice", "double", "doubles"), (RATIO, "x2")),
    **dict.fromkeys(("half", "halves"), (RATIO, "x1/2")),
    **dict.fromkeys(("triple", "triples"), (RATIO, "x3")),
    **dict.fromkeys(("largest", "biggest", "highest", "greatest", "maximum"), (EXTREME, "max")),
    **dict.fromkeys(("smallest", "lowest", "fewest", "minimum"), (EXTREME, "min")),
}
NEGATIONS = frozenset({"not", "no", "never", "cannot", "nor", "neither", "doesn't", "isn't", "don't", "won't",
                       "can't", "aren't", "wasn't", "didn't", "doesn’t", "isn’t", "don’t", "can’t", "won’t"})
_COMPLEMENT = {">": "<=", "<": ">=", ">=": "<", "<=": ">", "==": "!=", "!=": "=="}
_IMPLIES = {(">", ">="), (">", "!="), ("<", "<="), ("<", "!="), ("==", ">="), ("==", "<=")}
NAMES: dict[tuple[str, str], str] = {
    (CMP, ">"): "larger", (CMP, "<"): "smaller", (CMP, ">="): "at least", (CMP, "<="): "at most",
    (CMP, "=="): "equal", (CMP, "!="): "differs",
    (SPEED, ">"): "faster", (SPEED, "<"): "slower", (SPEED, ">="): "no slower", (SPEED, "<="): "no faster",
    (SPEED, "=="): "as fast", (SPEED, "!="): "not as fast",
    (TREND, ">"): "grows", (TREND, "<"): "falls", (TREND, ">="): "does not fall", (TREND, "<="): "does not grow",
    (TREND, "=="): "stays", (TREND, "!="): "changes",
    (RATIO, "x2"): "twice", (RATIO, "x1/2"): "half", (RATIO, "x3"): "triple",
    (RATIO, "not x2"): "not twice", (RATIO, "not x1/2"): "not half", (RATIO, "not x3"): "not triple",
    (EXTREME, "max"): "largest", (EXTREME, "min"): "smallest",
    (EXTREME, "not max"): "not the largest", (EXTREME, "not min"): "not the smallest",
    (NEG, "not"): "not",
}
_SYMBOL = {">": ">", "<": "<", ">=": "≥", "<=": "≤", "==": "=", "!=": "≠"}


@dataclass(frozen=True)
class Stated:
    """One relation a sentence states (or a sanity declares): its family, its operator, and the words."""

    family: str
    op: str
    words: str          # as written: "does not exceed", "larger"
    at: int = field(default=-1, compare=False)   # index of the relation word among the words read

    @property
    def name(self) -> str:
        """The canonical name (what ``sanity(..., relation=...)`` declares): "at most" for "does not exceed"."""
        return NAMES.get((self.family, self.op), self.words)

    def implied_by(self, declared: Stated) -> bool:
        """Whether asserting ``declared`` asserts this too (a > b asserts a ≥ b and a ≠ b)."""
        if declared.family != self.family:
            return False
        return declared.op == self.op or (declared.op, self.op) in _IMPLIES

    def holds(self, left: float, right: float) -> bool | None:
        """The relation evaluated on two numbers (cmp and trend only; None where numbers cannot say)."""
        if self.family not in (CMP, TREND):
            return None
        return {">": left > right, "<": left < right, ">=": left >= right, "<=": left <= right,
                "==": left == right, "!=": left != right}[self.op]

    @property
    def symbol(self) -> str:
        return _SYMBOL.get(self.op, self.op)


def stated_relations(words: list[str], *, declaration: bool = False) -> list[Stated]:
    """The relations stated by a run of words (lower case, markers removed), negation included.

    A negation up to three words before a relation word is taken by it; every other negation is one
    relation of the family neg (the sentence denies something).
    """
    out: list[Stated] = []
    taken: set[int] = set()
    i = 0
    while i < len(words):
        hit: tuple[int, str, str] | None = None
        for phrase, fam, op in _PHRASES:
            if tuple(words[i:i + len(phrase)]) == phrase:
                hit = (len(phrase), fam, op)
                break
        if hit is None and words[i] in _WORDS and (declaration or not _adverb(words, i)):
            hit = (1, *_WORDS[words[i]])
        if hit is None:
            i += 1
            continue
        n, fam, op = hit
        start = i
        neg = next((j for j in range(i - 1, max(-1, i - 4), -1)
                    if words[j] in NEGATIONS and j not in taken), None)
        if neg is not None and not any(words[j] in _WORDS for j in range(neg + 1, i)):
            taken.add(neg)
            start = neg
            op = _COMPLEMENT[op] if fam in (CMP, SPEED, TREND) else f"not {op}"
        taken.update(range(i, i + n))
        out.append(Stated(fam, op, " ".join(words[start:i + n]), i))
        i += n
    for j, w in enumerate(words):
        if w in NEGATIONS and j not in taken:
            out.append(Stated(NEG, "not", w, j))
    return out


_RATIO_NEXT = frozenset({"as", "the", "that", "of", "its", "their", "this", "these", "those", "what",
                         "\0claim"})


def _adverb(words: list[str], i: int) -> bool:
    """A relation word used as no relation: "twice", "half" or "double" that counts how often ("computes it
    twice"; "twice as large", "half the bytes", "half of fp32" are ratios: the word must be followed by as, the,
    of, that, a claim …), and the idioms "no longer", "any longer", "lower bound", "upper bound"."""
    w = words[i]
    nxt = words[i + 1] if i + 1 < len(words) else ""
    prev = words[i - 1] if i > 0 else ""
    if w in ("twice", "half", "double", "triple"):
        return nxt not in _RATIO_NEXT
    return (w == "longer" and prev in ("no", "any")) or (w in ("lower", "higher") and nxt in ("bound", "bounds"))


def declared_relations(text: str) -> list[Stated]:
    """What ``sanity(..., relation=text)`` declares, read by the sentence grammar ("larger", "does not exceed")."""
    return stated_relations([w.lower() for w in _WORD.findall(text)], declaration=True)


@dataclass(frozen=True)
class Segment:
    """The words a group of adjacent sanity markers backs: from the previous group (or the sentence's start)."""

    line: int
    sanities: tuple[str, ...]        # the markers' bodies after 'sanity:' ("name" or "other_check:name")
    words: tuple[str, ...]
    claims: tuple[tuple[int, str], ...]   # (word index, marker body "lit|ref") of the bound claims in it


def sanity_segments(text: str) -> list[tuple[str, list[Segment]]]:
    """For every prose sentence of ``text`` with a sanity marker: the sentence and its segments.

    Each group of adjacent ``[[sanity:…]]`` markers backs the words before it, back to the previous
    group; words after the last group belong to it.
    """
    return [(sentence, _segments(line, sentence)) for line, sentence in _sentences(text) if "[[sanity:" in sentence]


def _segments(line: int, sentence: str) -> list[Segment]:
    segs: list[Segment] = []
    words: list[str] = []
    claims: list[tuple[int, str]] = []
    group: list[str] = []
    last = 0
    for m in _CLAIM.finditer(sentence):
        between = [w.lower() for w in _WORD.findall(sentence[last:m.start()])]
        body = m.group("body")
        if between and group:
            segs.append(Segment(line, tuple(group), tuple(words), tuple(claims)))
            group, words, claims = [], [], []
        words += between
        if body.startswith("sanity:"):
            group.append(body.removeprefix("sanity:"))
        elif "|" in body and not body.startswith(("figure:", "relation:")):
            claims.append((len(words), body))
        last = m.end()
    tail = [w.lower() for w in _WORD.findall(sentence[last:])]
    if group:
        segs.append(Segment(line, tuple(group), tuple(words + tail), tuple(claims)))
    elif segs:
        segs[-1] = Segment(line, segs[-1].sanities, segs[-1].words + tuple(tail), segs[-1].claims)
    return segs


# -- a bound written before a claim ------------------------------------------------------------------
#
# "p99 TTFT stays under [[50|p99_ms]] ms", "at least [[3|ratio]]×", "p99 \leq [[50|p99_ms]]": the words right
# before a claim make its number a bound on the value. The verifier reads them so for a measured value with an
# interval, and tests the bound on the whole interval (numbook.core.verify).

_SYMBOLS = {"≥": ">=", ">=": ">=", "≤": "<=", "<=": "<=", ">": ">", "<": "<", "\\geq": ">=", "\\leq": "<=",
            "\\ge": ">=", "\\le": "<="}
_SYMBOL_BEFORE = re.compile(r"(?:^|[^<>=\\\w-])(?P<sym>≥|>=|≤|<=|>|<|\\geq|\\leq|\\ge|\\le)\s*$")
_PLACES = {"under": "below", "over": "above"}   # words of bound the relation grammar leaves to places and prepositions


def bound_before(before: str, name: str = "") -> tuple[str, str] | None:
    """The bound that the text right before a claim states on it: (operator, the words as written), or None.

    ``before`` is the paragraph up to the claim; its last sentence is read. A comparison of the relation grammar
    that ends right before the claim (``at least``, ``no more than``, ``does not exceed``, ``below``; a single
    comparative may be followed by ``than``; ``under`` and ``over`` too) or a sign (≥, ≤, >, <; ``\\leq`` in
    math) is a bound; equal and differs are not. Where a claim of another value than ``name`` (the claim's
    reference) stands fewer than six words before those words in the same clause, they relate the two values
    (numbook.core.statements tests that): None.
    """
    clause = _SENTENCE_END.split(before)[-1].rpartition(";")[2]
    found = _bound_words(clause)
    if found is None:
        return None
    op, written = found
    last = None
    for m in _CLAIM.finditer(clause):
        body = m.group("body")
        if "|" in body and body.rsplit("|", 1)[1].strip() not in ("free", "") and not body.startswith(
                ("figure:", "relation:", "sanity:")):
            last = m
    if (last is not None and _ref(last.group("body")) != _ref(name)
            and len(_WORD.findall(clause[last.end():])) - len(_WORD.findall(written)) < _NEAR):
        return None   # "[[41|a_ms]] ms, below [[50|b_ms]]": two values compared
    return op, written


def _ref(text: str) -> str:
    """The value a marker body (``41|a_ms ± 2``) or a reference (``a_ms``) names."""
    return text.rsplit("|", 1)[-1].partition("±")[0].strip()


_NEAR = 6   # words between a claim and the bound words after it within which the sentence compares the two


def _bound_words(sentence: str) -> tuple[str, str] | None:
    sym = _SYMBOL_BEFORE.search(sentence)
    if sym:
        return _SYMBOLS[sym.group("sym")], sym.group("sym")
    if not re.search(r"[A-Za-z]\s*$", sentence):
        return None   # the words must end right before the claim: "under (about) [[50|x]]" states no bound
    words = [w.lower() for w in _WORD.findall(sentence)][-8:]
    if not words:
        return None
    than = words[-1] == "than"
    read = [_PLACES.get(w, w) for w in words]
    stated = stated_relations(read)
    for k in range(len(stated) - 1, -1, -1):
        s = stated[k]
        if s.family != CMP or s.op in ("==", "!="):
            continue
        n = len(s.words.split())
        end = len(read) - (1 if than and " ".join(read[-n:]) != s.words else 0)
        if " ".join(read[end - n:end]) != s.words:
            return None   # the last comparison of the words does not end at the claim
        op, start = s.op, end - n
        verb = stated[k - 1] if k else None   # "never falls below": the negation the grammar gave the verb
        if (verb is not None and verb.family == TREND and verb.words.split()[0] in NEGATIONS
                and " ".join(read[start - len(verb.words.split()):start]) == verb.words):
            op, start = _COMPLEMENT[op], start - len(verb.words.split())
        return op, " ".join(words[start:len(words)])
    return None
