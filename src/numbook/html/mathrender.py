"""Math rendered at build time: every page's equations are SVG in its HTML before any script runs.

Arithmatex (``generic: true``) leaves each equation's TeX in ``<span class="arithmatex">\\(…\\)</span>`` or
``<div class="arithmatex">\\[…\\]</div>``. :func:`render_page` hands one page's equations to MathJax 3.2.2
running under Node (``mathjax/render.cjs``, one process per build, kept by :class:`MathRenderer`) and writes
each one's SVG in place, the glyphs they use once per page in a hidden ``<svg>`` at the top of the article.
A reader's browser then loads no MathJax at all (2.3 MB less on every page), and the math shows with
JavaScript off.

What the browser's MathJax did after typesetting is done here too, on the SVG:

- **Provenance of math claims.** The page's ``<script class="nb-claims">`` index (one entry per math claim:
  the id ``\\cssId`` gave its element, the text shown, the hint) decorates the claim's ``<g>``: a focus stop
  with a visible ring (numbook.css), the hint as ``data-nb-tip`` (claims.js shows it on focus and tap) and as
  an SVG ``<title>`` (hover), and a label for screen readers in words and digits, never TeX
  (:func:`numbook.html.plaintext.spoken`).
- **Names for screen readers.** An equation without a claim is ``role="img"`` named by its spoken text; one
  that holds claims is a ``role="group"`` with that name (an image's children are presentational, and a
  focus stop inside one is hidden from assistive technology), so each claim inside stays reachable.

TeX that MathJax cannot read (a missing brace, an undefined macro: the ``noundefined`` package is off, so an
unknown command is an error, not red text) is a fault of the page with the equation and MathJax's message.
"""

from __future__ import annotations

import hashlib
import html
import json
import os
import re
import shutil
import subprocess
import threading
from dataclasses import dataclass, field
from pathlib import Path

from numbook.html.plaintext import plain, spoken

__all__ = ["MathRenderer", "MathError", "NodeMissing", "render_page", "RENDER_SCRIPT", "NODE_ENV", "equations"]

RENDER_SCRIPT = Path(__file__).with_name("mathjax") / "render.cjs"
NODE_ENV = "NUMBOOK_NODE"
"""Names the ``node`` to run (a path), where it is not the one on PATH."""

_EQUATION = re.compile(r'<(span|div) class="arithmatex">(.*?)</\1>', re.S)
_CLAIMS = re.compile(r'<script type="application/json" class="nb-claims">(.*?)</script>', re.S)
_ARTICLE = re.compile(r'<article class="md-content__inner md-typeset">')
_BODY = re.compile(r"<body[^>]*>")
_SVG_OPEN = re.compile(r"^<svg ([^>]*)>")
_RENDERER = hashlib.sha256(RENDER_SCRIPT.read_bytes()).digest()
"""The renderer's own script (and with it the MathJax version it names): a change renders every page again."""


class NodeMissing(RuntimeError):
    """No ``node`` to run MathJax with."""


@dataclass
class MathError(Exception):
    """An equation MathJax cannot read."""

    tex: str
    message: str

    def __str__(self) -> str:
        return f"math that MathJax cannot read ({self.message}): {self.tex!r}"


@dataclass
class MathRenderer:
    """One MathJax process under Node for a whole build (and for every rebuild under ``mkdocs serve``).

    Pages are rendered one at a time (a lock), each request a JSON line: a build renders its pages in
    order, and ``render`` is the only way in. A page's result is kept by its equations, so a rebuild
    under serve renders only pages whose math changed.
    """

    node: str | None = None
    cache_dir: Path | None = None
    css: str = ""
    _proc: subprocess.Popen[str] | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _memo: dict[str, tuple[list[str], str]] = field(default_factory=dict)

    def _start(self) -> subprocess.Popen[str]:
        node = shutil.which(self.node or os.environ.get(NODE_ENV) or "node")
        if not node:
            raise NodeMissing("numbook renders math at build time with Node.js (18 or newer), and `node` is not "
                              "on PATH: install it (Debian: apt-get install -y nodejs)")
        proc = subprocess.Popen([node, str(RENDER_SCRIPT)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, encoding="utf-8", bufsize=1)
        ready = self._reply(proc)
        self.css = str(ready.get("css", ""))
        return proc

    @staticmethod
    def _reply(proc: subprocess.Popen[str]) -> dict[str, object]:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if not line:
            err = proc.stderr.read() if proc.stderr is not None else ""
            raise RuntimeError(f"MathJax under Node stopped ({RENDER_SCRIPT}): {err.strip()[-2000:]}")
        reply: dict[str, object] = json.loads(line)
        return reply

    def render(self, items: list[tuple[str, bool]]) -> tuple[list[str], str]:
        """Each equation's ``<svg>`` (TeX, display?) in order, and the ``<defs>`` of the glyphs they use."""
        if not items:
            return [], ""
        key = json.dumps(items)
        stored = self._stored(key)
        with self._lock:
            if key in self._memo:
                return self._memo[key]
            if stored is not None and stored.is_file():
                cached = json.loads(stored.read_text(encoding="utf-8"))
                self._memo[key] = ([str(s) for s in cached["svgs"]], str(cached["defs"]))
                return self._memo[key]
            if self._proc is None or self._proc.poll() is not None:
                self._proc = self._start()
            assert self._proc.stdin is not None
            self._proc.stdin.write(json.dumps({"items": items}) + "\n")
            self._proc.stdin.flush()
            reply = self._reply(self._proc)
            if "error" in reply:
                index = reply.get("index", 0)
                raise MathError(items[index if isinstance(index, int) else 0][0], str(reply["error"]))
            svgs = reply["svgs"]
            assert isinstance(svgs, list)
            result = ([str(s) for s in svgs], str(reply["defs"]))
            self._memo[key] = result
            if stored is not None:
                stored.parent.mkdir(parents=True, exist_ok=True)
                tmp = stored.with_suffix(".tmp")
                tmp.write_text(json.dumps({"svgs": result[0], "defs": result[1]}), encoding="utf-8")
                tmp.replace(stored)
            return result

    def _stored(self, key: str) -> Path | None:
        """Where a page's rendered math is kept between builds: keyed by its equations and by this renderer."""
        if self.cache_dir is None:
            return None
        digest = hashlib.sha256(_RENDERER + key.encode()).hexdigest()[:24]
        return self.cache_dir / f"{digest}.json"

    def close(self) -> None:
        with self._lock:
            if self._proc is not None:
                if self._proc.stdin is not None:
                    self._proc.stdin.close()
                try:
                    self._proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    self._proc.kill()
                    self._proc.wait()
                for pipe in (self._proc.stdout, self._proc.stderr):
                    if pipe is not None:
                        pipe.close()
                self._proc = None


def equations(page_html: str) -> list[tuple[str, bool]]:
    """The TeX of each equation Arithmatex left on the page, and whether it is displayed."""
    found = []
    for m in _EQUATION.finditer(page_html):
        tex = html.unescape(m.group(2)).strip()
        display = m.group(1) == "div"
        if tex.startswith(("\\(", "\\[")) and tex.endswith(("\\)", "\\]")):
            tex = tex[2:-2]
        found.append((tex, display))
    return found


def _claim_index(page_html: str) -> dict[str, dict[str, str]]:
    out: dict[str, dict[str, str]] = {}
    for m in _CLAIMS.finditer(page_html):
        for c in json.loads(m.group(1)):   # a script's text: JSON as written, never HTML-escaped
            out[str(c["id"])] = {k: str(v) for k, v in c.items()}
    return out


def _attr(value: str) -> str:
    return html.escape(value, quote=True)


def _decorate_claims(svg: str, claims: dict[str, dict[str, str]]) -> tuple[str, int]:
    """The claims' ``<g>`` made focus stops with their hint and spoken label; how many there were."""
    count = 0

    def one(m: re.Match[str]) -> str:
        nonlocal count
        attrs, ident = m.group(1), m.group(2)
        c = claims.get(ident)
        if c is None:
            return m.group(0)
        count += 1
        attrs = re.sub(r'\sclass="([^"]*)"', lambda k: f' class="{(k.group(1) + " nb-math-claim").strip()}"', attrs)
        shown = plain(c.get("shown", ""))
        label = f"{shown}: {c.get('tip', '')}" if c.get("tip") else shown
        extra = (f' tabindex="0" role="note" data-nb-tip="{_attr(c.get("tip", ""))}" '
                 f'aria-label="{_attr(label)}"')
        return f"<g{attrs}{extra}><title>{html.escape(c.get('tip', ''))}</title>"

    out = re.sub(r'<g((?:\s[^>]*?)?\sid="([^"]+)"[^>]*)>', one, svg)
    return out, count


def _name_svg(svg: str, tex: str, group: bool) -> str:
    """The equation's role and spoken name on its ``<svg>``."""
    def head(m: re.Match[str]) -> str:
        attrs = re.sub(r'\s(role|focusable|aria-hidden)="[^"]*"', "", m.group(1))
        role = "group" if group else "img"
        return f'<svg {attrs} role="{role}" aria-label="{_attr(spoken(tex))}">'

    return _SVG_OPEN.sub(head, svg, count=1)


def render_page(page_html: str, renderer: MathRenderer) -> tuple[str, int]:
    """The page with every equation drawn as SVG; how many equations. Raises :class:`MathError`."""
    items = equations(page_html)
    if not items:
        return page_html, 0
    svgs, defs = renderer.render(items)
    claims = _claim_index(page_html)
    it = iter(zip(items, svgs, strict=True))

    def one(m: re.Match[str]) -> str:
        (tex, display), svg = next(it)
        svg, n = _decorate_claims(svg, claims)
        svg = _name_svg(svg, tex, group=n > 0)
        shown = ' display="true"' if display else ""
        tag = m.group(1)
        return (f'<{tag} class="arithmatex"><mjx-container class="MathJax" jax="SVG"{shown}>{svg}'
                f"</mjx-container></{tag}>")

    out = _EQUATION.sub(one, page_html)
    cache = (f'<svg id="MJX-SVG-global-cache" style="display: none" aria-hidden="true" focusable="false" '
             f'xmlns="http://www.w3.org/2000/svg">{defs}</svg>')
    where = _ARTICLE.search(out) or _BODY.search(out)
    at = where.end() if where is not None else 0
    return out[:at] + cache + out[at:], len(items)
