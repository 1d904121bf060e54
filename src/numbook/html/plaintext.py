"""The text of a TeX formula as a reader sees it (``plain``) and as a screen reader should say it (``spoken``).

The site shows math through MathJax; the search index and a screen reader's label need the same formula as
text. Both functions read the TeX the pages hold (with the tool's own markup: ``\\class{nb-claim}{\\cssId{…}{…}}``
around a verified number) and never return a backslash or a brace, whatever they are given:

    >>> plain(r"\\class{nb-claim}{\\cssId{nb-m-3}{31{,}999}}")
    '31,999'
    >>> plain(r"3.05 \\times 10^{-5}")
    '3.05 × 10⁻⁵'
    >>> spoken(r"3.05 \\times 10^{-5}")
    '3.05 times 10 to the power minus 5'

An unknown command keeps the text of its arguments and loses its name. Both are pure functions of the text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["plain", "spoken"]

_TOKEN = re.compile(r"\\[A-Za-z]+\*?|\\.|\\$|[{}^_~&]|\s+|[^\\{}^_~&\s]", re.S)

# commands whose first argument is markup for the page (a class, an id, a style, a link), dropped: the second is
# what the reader sees
_DROP_FIRST = {"class", "cssId", "style", "href", "color", "textcolor", "colorbox"}
# commands whose argument is shown as it is
_FONT = {"text", "textrm", "textbf", "textit", "texttt", "textsf", "mathrm", "mathbf", "mathit", "mathsf", "mathtt",
         "mathcal", "mathbb", "mathfrak", "mathscr", "boldsymbol", "bm", "operatorname", "mbox", "hbox", "emph",
         "underline", "mathbin", "mathrel", "mathord",
         "mathop",
         "displaystyle", "textstyle", "scriptstyle", "rm", "bf", "it", "tt", "sf"}
# commands dropped with their one argument (they show nothing the reader reads)
_SILENT_ARG = {"begin", "end", "unicode", "label", "tag", "phantom", "hphantom", "vphantom", "hspace", "vspace", "kern",
               "mspace"}
_SILENT = {"left", "right", "big", "Big", "bigg", "Bigg", "bigl", "bigr", "Bigl", "Bigr", "biggl", "biggr",
           "limits", "nolimits", "middle", "!", "notag", "nonumber", "strut", "displaystyle", "textstyle"}
_SPACE = {",", ";", ":", " ", "quad", "qquad", "enspace", "thinspace", "medspace", "thickspace", "\\", "newline",
          "cr"}

_GREEK = {name: chr(code) for name, code in [
    ("alpha", 0x3B1), ("beta", 0x3B2), ("gamma", 0x3B3), ("delta", 0x3B4), ("epsilon", 0x3F5),
    ("varepsilon", 0x3B5), ("zeta", 0x3B6), ("eta", 0x3B7), ("theta", 0x3B8), ("vartheta", 0x3D1),
    ("iota", 0x3B9), ("kappa", 0x3BA), ("lambda", 0x3BB), ("mu", 0x3BC), ("nu", 0x3BD), ("xi", 0x3BE),
    ("pi", 0x3C0), ("varpi", 0x3D6), ("rho", 0x3C1), ("varrho", 0x3F1), ("sigma", 0x3C3), ("varsigma", 0x3C2),
    ("tau", 0x3C4), ("upsilon", 0x3C5), ("phi", 0x3D5), ("varphi", 0x3C6), ("chi", 0x3C7), ("psi", 0x3C8),
    ("omega", 0x3C9), ("Gamma", 0x393), ("Delta", 0x394), ("Theta", 0x398), ("Lambda", 0x39B), ("Xi", 0x39E),
    ("Pi", 0x3A0), ("Sigma", 0x3A3), ("Upsilon", 0x3A5), ("Phi", 0x3A6), ("Psi", 0x3A8), ("Omega", 0x3A9)]}
_GREEK_WORD = {name: name.removeprefix("var").lower() if name[0].islower() else f"capital {name.lower()}"
               for name in _GREEK}


@dataclass(frozen=True)
class _Op:
    """An operator or relation: its symbol, its spoken word, and whether it may be unary (a sign)."""

    sym: str
    word: str
    sign: bool = False


# operators and relations, written as commands
_OPS = {
    "times": _Op("×", "times"), "cdot": _Op("·", "times"), "div": _Op("÷", "divided by"),
    "pm": _Op("±", "plus or minus", True), "mp": _Op("∓", "minus or plus", True),
    "approx": _Op("≈", "approximately"), "simeq": _Op("≃", "approximately"), "sim": _Op("~", "about"),
    "le": _Op("≤", "at most"), "leq": _Op("≤", "at most"), "leqslant": _Op("≤", "at most"),
    "ge": _Op("≥", "at least"), "geq": _Op("≥", "at least"), "geqslant": _Op("≥", "at least"),
    "ne": _Op("≠", "is not equal to"), "neq": _Op("≠", "is not equal to"), "equiv": _Op("≡", "is identical to"),
    "lt": _Op("<", "is less than"), "gt": _Op(">", "is greater than"), "ll": _Op("≪", "is much less than"),
    "gg": _Op("≫", "is much greater than"), "propto": _Op("∝", "is proportional to"),
    "to": _Op("→", "to"), "rightarrow": _Op("→", "to"), "Rightarrow": _Op("⇒", "implies"),
    "leftarrow": _Op("←", "from"), "mapsto": _Op("↦", "maps to"), "in": _Op("∈", "in"),
    "notin": _Op("∉", "not in"), "subset": _Op("⊂", "subset of"), "cup": _Op("∪", "union"),
    "cap": _Op("∩", "intersection"), "setminus": _Op("∖", "minus"), "otimes": _Op("⊗", "tensor"),
    "oplus": _Op("⊕", "direct sum"), "circ": _Op("∘", "composed with"), "mid": _Op("|", "given"),
    "odot": _Op("⊙", "element-wise times"), "iff": _Op("⟺", "if and only if"),
    "Longrightarrow": _Op("⟹", "implies"), "implies": _Op("⟹", "implies"), "longrightarrow": _Op("→", "to"),
}
# operators and relations, written as characters
_CHAR_OPS = {"+": _Op("+", "plus", True), "-": _Op("-", "minus", True), "=": _Op("=", "equals"),
             "<": _Op("<", "is less than"), ">": _Op(">", "is greater than"), "*": _Op("*", "times"),
             "−": _Op("−", "minus", True), "×": _Op("×", "times"), "·": _Op("·", "times"),
             "≈": _Op("≈", "approximately"), "≤": _Op("≤", "at most"), "≥": _Op("≥", "at least")}
# other symbols: what the reader sees, what a screen reader says
_SYMBOLS = {
    "infty": ("∞", "infinity"), "ldots": ("…", "and so on"), "dots": ("…", "and so on"),
    "cdots": ("⋯", "and so on"), "dotsc": ("…", "and so on"), "vdots": ("⋮", "and so on"),
    "sum": ("Σ", "the sum of"), "prod": ("∏", "the product of"), "int": ("∫", "the integral of"),
    "partial": ("∂", "partial"), "nabla": ("∇", "nabla"), "sqrt": ("√", "the square root of"),
    "top": ("ᵀ", "transpose"), "intercal": ("ᵀ", "transpose"),
    "ell": ("ℓ", "l"), "prime": ("′", "prime"), "degree": ("°", "degrees"), "star": ("*", "star"),
    "forall": ("∀", "for all"), "exists": ("∃", "there is"), "emptyset": ("∅", "the empty set"),
    "lfloor": ("⌊", "the floor of"), "rfloor": ("⌋", ""), "lceil": ("⌈", "the ceiling of"), "rceil": ("⌉", ""),
    "langle": ("⟨", "("), "rangle": ("⟩", ")"), "lbrace": ("(", "("), "rbrace": (")", ")"),
    "vert": ("|", "|"), "lvert": ("|", "|"), "rvert": ("|", "|"), "Vert": ("‖", "the norm of"),
    "ast": ("*", "star"), "lVert": ("‖", "the norm of"), "rVert": ("‖", ""),
    "{": ("(", "("), "}": (")", ")"), "%": ("%", "percent"), "$": ("$", "dollars"), "#": ("#", "number"),
    "&": ("&", "and"), "_": ("_", "underscore"), "|": ("‖", "the norm of"),
    "log": ("log", "log"), "ln": ("ln", "log"), "exp": ("exp", "exp"), "max": ("max", "max"),
    "min": ("min", "min"), "sin": ("sin", "sine"), "cos": ("cos", "cosine"), "tanh": ("tanh", "tanh"),
    "arg": ("arg", "arg"), "argmax": ("argmax", "argmax"), "argmin": ("argmin", "argmin"), "lim": ("lim", "lim"),
    "mod": ("mod", "mod"), "bmod": ("mod", "mod"), "pmod": ("mod", "mod"), "det": ("det", "det"),
    "dim": ("dim", "dim"), "sup": ("sup", "sup"), "inf": ("inf", "inf"), "gcd": ("gcd", "gcd"),
}
_BIG = {"sum", "prod", "int"}
# accents: said after their letter ("p bar"), drawn as a combining mark over a single letter
_ACCENTS = {"bar": ("\u0304", "bar"), "overline": ("\u0305", "bar"), "hat": ("\u0302", "hat"),
            "widehat": ("\u0302", "hat"), "tilde": ("\u0303", "tilde"), "widetilde": ("\u0303", "tilde"),
            "vec": ("\u20d7", "vector"), "dot": ("\u0307", "dot"), "ddot": ("\u0308", "double dot")}
_BARS = {"|", "\\lvert", "\\rvert", "\\vert"}
_CHAR_WORDS = {"%": " percent ", "!": " factorial ", "'": " prime ", "′": " prime ", "°": " degrees ",
               "/": " over ", "|": "|", "…": " and so on "}
_SUPER = dict(zip("0123456789+-−=()niTᵀ*", "⁰¹²³⁴⁵⁶⁷⁸⁹⁺⁻⁻⁼⁽⁾ⁿⁱᵀᵀ*", strict=True))
_SUB = dict(zip("0123456789+-−=()", "₀₁₂₃₄₅₆₇₈₉₊₋₋₌₍₎", strict=True))


class _Reader:
    """A recursive reading of one formula, in one of two voices."""

    def __init__(self, tex: str, voice: str) -> None:
        self.tokens: list[str] = _TOKEN.findall(tex)
        self.at = 0
        self.voice = voice

    # -- the token stream ------------------------------------------------------------------------------
    def _next(self) -> str | None:
        if self.at >= len(self.tokens):
            return None
        tok = self.tokens[self.at]
        self.at += 1
        return tok

    def _skip_space(self) -> None:
        while self.at < len(self.tokens) and self.tokens[self.at].isspace():
            self.at += 1

    def _group(self) -> list[str | _Op]:
        """Everything up to the closing brace of the group just opened (or the end)."""
        return self.read(until="}")

    def _arg(self) -> list[str | _Op]:
        """One argument: a group, or a single token."""
        self._skip_space()
        tok = self._next()
        if tok is None or tok == "}":
            if tok == "}":
                self.at -= 1
            return []
        if tok == "{":
            return self._group()
        return self._one(tok)

    def _optional(self) -> list[str | _Op]:
        """An optional argument ``[…]``, if one follows."""
        self._skip_space()
        if self.at < len(self.tokens) and self.tokens[self.at] == "[":
            self.at += 1
            return self.read(until="]")
        return []

    # -- reading ------------------------------------------------------------------------------------------
    def read(self, until: str | None = None) -> list[str | _Op]:
        out: list[str | _Op] = []
        while (tok := self._next()) is not None:
            if tok == until:
                break
            if until is None and tok == "}":
                continue   # an unmatched closing brace: nothing to show
            out += self._one(tok)
        return out

    def _one(self, tok: str) -> list[str | _Op]:
        spoken = self.voice == "spoken"
        if tok == "{":
            if self.tokens[self.at:self.at + 2] == [",", "}"]:
                self.at += 2
                return [","]     # {,}: a thousands separator, no space after it
            return self._group()
        if tok == ",":   # a comma the author spaced is punctuation; one between digits (32,000) a separator
            spaced = self.at < len(self.tokens) and self.tokens[self.at].isspace()
            return [", " if spaced else ","]
        if tok in ("^", "_"):
            return self._script(tok)
        if tok.isspace():
            return []          # spaces in math are the typesetter's business
        if tok in ("~", "&"):
            return [" "]
        if spoken and tok in _BARS:
            return self._bars()
        if tok in _CHAR_OPS:
            return [_CHAR_OPS[tok]]
        if not tok.startswith("\\"):
            return [_CHAR_WORDS.get(tok, tok) if spoken and tok in "%!'′°/…" else tok]
        name = tok[1:].rstrip("*")
        if name in _SPACE:
            return [" "]
        if name in _SILENT:
            if name in ("left", "right", "middle") or name.startswith(("big", "Big")):
                self._skip_space()
                if self.at < len(self.tokens) and self.tokens[self.at] == ".":
                    self.at += 1     # \left. shows nothing
            return []
        if name in _SILENT_ARG:
            self._arg()
            return []
        if name in _DROP_FIRST:
            self._arg()
            return self._arg()
        if name in _ACCENTS:
            mark, said = _ACCENTS[name]
            body = self._arg()
            if spoken:
                return [*body, f" {said} "]
            text = _join(body, "plain")
            return [text + mark] if len(text) == 1 else body
        if name in ("underbrace", "overbrace"):   # its label, said as what the braced part is
            body = self._arg()
            self._skip_space()
            if self.at < len(self.tokens) and self.tokens[self.at] in ("_", "^"):
                self.at += 1
                label = self._arg()
                return [*body, " (which is ", *label, ") "] if spoken else [*body, " (", *label, ")"]
            return body
        if name in _FONT:
            return self._text_arg() if name.startswith(("text", "mbox", "hbox", "operatorname")) else self._arg()
        if name in ("frac", "dfrac", "tfrac", "cfrac"):
            return self._frac()
        if name in ("binom", "dbinom", "tbinom", "choose"):
            n, k = self._arg(), self._arg()
            if spoken:
                return [" ", *n, " choose ", *k, " "]
            return ["C(", *n, ", ", *k, ")"]
        if name == "sqrt":
            index = self._optional()
            body = self._arg()
            if spoken:
                root = ["the ", *index, "-th root of "] if index else ["the square root of "]
                end = [", end root "] if self._compound(body) else [" "]
                return [" ", *root, *body, *end]
            return [*(self._sup(index) if index else []), "√", *self._paren(body)]
        if name in _OPS:
            return [_OPS[name]]
        if name in _GREEK:
            return [f" {_GREEK_WORD[name]} " if spoken else _GREEK[name]]
        if name in _SYMBOLS:
            seen, said = _SYMBOLS[name]
            if name in _BIG:    # a big operator: its limits with it, a space either side
                base = said.removesuffix(" of")   # spoken: "the sum from i equals 1 to n of"
                out: list[str | _Op] = [f" {base} " if spoken else f" {seen}"]
                self._skip_space()
                while self.at < len(self.tokens) and self.tokens[self.at] in ("^", "_", "\\limits"):
                    tok = self.tokens[self.at]
                    self.at += 1
                    if tok != "\\limits" and spoken:   # its limits: from … to …
                        out += [" from " if tok == "_" else " to ", *self._arg(), " "]
                    elif tok != "\\limits":
                        out += self._script(tok)
                    self._skip_space()
                return [*out, " of " if spoken and base != said else " "]
            return [f" {said} " if spoken else seen]
        if len(name) == 1 and not name.isalpha():
            return [name] if name not in "{}\\" else []
        return []   # an unknown command: its name goes; what follows (its argument) is read as it comes

    def _bars(self) -> list[str | _Op]:
        """Spoken ``|x|``: the absolute value of x, ``|V|`` the size of V (a set's; a bar with no partner is said as
        a bar)."""
        start = self.at
        inner: list[str | _Op] = []
        while (tok := self._next()) is not None:
            if tok in _BARS:
                text = _join(inner, "spoken")
                if re.fullmatch(r"[A-Z]( sub \w+)?", text):   # |V|, |V₂|: the size of a set (a vocabulary)
                    return [" the size of ", *inner, " "]
                return [" absolute value of ", *inner, " "]
            if tok == "}":
                break
            inner += self._one(tok)
        self.at = start
        return [" | "]

    def _text_arg(self) -> list[str | _Op]:
        """``\\text{…}``: its spaces are kept (they are text, not math)."""
        self._skip_space()
        if self.at < len(self.tokens) and self.tokens[self.at] == "{":
            self.at += 1
            out: list[str | _Op] = []
            depth = 0
            while (tok := self._next()) is not None:
                if tok == "}" and depth == 0:
                    break
                if tok == "{":
                    depth += 1
                    continue
                if tok == "}":
                    depth -= 1
                    continue
                if tok.isspace() or tok == "~":
                    out.append(" ")
                elif tok in ("^", "_"):
                    out += self._script(tok)
                elif tok.startswith("\\") or tok == "&":
                    out += self._one(tok)
                else:
                    out.append(tok)
            return out
        return self._arg()

    def _frac(self) -> list[str | _Op]:
        num, den = self._arg(), self._arg()
        if self.voice == "spoken":
            if self._compound(num) or self._compound(den):
                return [" the fraction with numerator ", *num, " and denominator ", *den, ", end fraction "]
            return [" ", *num, " over ", *den, " "]
        return [*self._paren(num), "/", *self._paren(den)]

    @staticmethod
    def _compound(part: list[str | _Op]) -> bool:
        """A part with an operator in it (a sum, a product written with a sign), or more than one word."""
        return any(isinstance(p, _Op) for p in part) or " " in _join(part, "spoken")

    def _paren(self, part: list[str | _Op]) -> list[str | _Op]:
        """A part of a fraction or a root, in parentheses when it has an operator or a space in it."""
        text = _join(part, "plain")
        if any(isinstance(p, _Op) for p in part) or " " in text or "/" in text:
            return ["(", *part, ")"]
        return part

    def _sup(self, part: list[str | _Op]) -> list[str | _Op]:
        text = _join(part, "plain").replace(" ", "")
        if text and all(ch in _SUPER for ch in text):
            return ["".join(_SUPER[ch] for ch in text)]
        return ["^", *self._paren(part)] if len(text) != 1 else ["^", text]

    def _script(self, tok: str) -> list[str | _Op]:
        part = self._arg()
        if self.voice == "spoken":
            text = _join(part, "spoken")
            if tok == "^":
                if text in ("prime", "transpose", "star"):
                    return [f" {text} "]
                if len(part) == 1 and isinstance(part[0], _Op) and part[0].sym == "*":
                    return [" star "]   # T^*: T star, not a power
                return [" to the power ", *part, " "]
            return [" sub ", *part, " "]
        if tok == "^":
            return self._sup(part)
        text = _join(part, "plain").replace(" ", "")
        if text and all(ch in _SUB for ch in text):
            return ["".join(_SUB[ch] for ch in text)]
        return ["_", *self._paren(part)] if len(text) != 1 else ["_", text]


def _join(parts: list[str | _Op], voice: str) -> str:
    """The pieces as one line: operators spaced as binary, or as a sign where nothing stands before them."""
    out: list[str] = []
    prev: str | _Op | None = None
    for p in parts:
        if isinstance(p, _Op):
            word = p.word if voice == "spoken" else p.sym
            before = "".join(out).rstrip()
            unary = p.sign and (not before or isinstance(prev, _Op) or before[-1] in "([⁽₍^_,")
            if voice == "spoken":
                out.append(f" {word} ")
            elif unary:
                out.append(word if not before or before[-1] in "([⁽₍^_" else f" {word}")
            else:
                out.append(f" {word} ")
        else:
            out.append(p)
        prev = p
    text = "".join(out)
    return re.sub(r"\s+", " ", text).strip()


def _clean(text: str) -> str:
    """Never a backslash or a brace, whatever came in."""
    return re.sub(r"\s+", " ", text.replace("\\", " ").replace("{", "(").replace("}", ")")).strip()


def plain(tex: str) -> str:
    """The text a reader sees for the TeX ``tex``: Unicode symbols, superscript digits, no markup."""
    return _clean(_join(_Reader(tex, "plain").read(), "plain"))


def spoken(tex: str) -> str:
    """The words a screen reader should say for ``tex``: operators as words, numbers with their digits."""
    text = _join(_Reader(tex, "spoken").read(), "spoken")
    return _clean(re.sub(r"\s+\)", ")", re.sub(r"\(\s+", "(", text)))
