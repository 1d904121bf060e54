"""Look at every page of a built site: screenshots at 1280 px and 390 px, light and dark, and a list
of what does not fit.

    python tools/screenshots.py site/ /tmp/shots          # every page
    python tools/screenshots.py site/ /tmp/shots inference/batching/
    python tools/screenshots.py --width=390 site/ /tmp/shots     # the phone views only

For each page and each of the four views it writes ``<out>/<page>--<width>-<scheme>.png`` (the
top of the page, one viewport high, and a full-page image scaled to the width) and prints
one line per element of the article (every fold opened) that reaches past the right edge of the column without a
scroll container of its own (clipped content), and per scroll container whose content is wider
than it is and that does not show it (the scroll shadows of ``numbook.css``). Exit
status 1 if any page has either. Needs Playwright and Debian's chromium (``/usr/bin/chromium``).
"""

from __future__ import annotations

import functools
import http.server
import sys
import threading
from pathlib import Path

from playwright.sync_api import sync_playwright

VIEWS = [(1280, 900, "light"), (1280, 900, "dark"), (390, 844, "light"), (390, 844, "dark")]

# Elements of the article that end past the column's right edge, outside any horizontal scroller;
# and scrollers whose content is wider than their box and that do not show that they scroll.
PROBE = """() => {
  const col = document.querySelector('.md-content__inner');
  if (!col) return {clipped: [], hidden: []};
  // on a phone Material lets code blocks reach the screen's edges: only what leaves the screen is clipped there
  const vw = document.documentElement.clientWidth;
  const edge = (vw < 600 ? vw : col.getBoundingClientRect().right) + 3;
  const scrolls = el => { for (let p = el.parentElement; p && p !== col; p = p.parentElement) {
      const o = getComputedStyle(p).overflowX; if (o === 'auto' || o === 'scroll') return p; } return null; };
  const name = el => el.tagName.toLowerCase() + (el.className && typeof el.className === 'string'
      ? '.' + el.className.trim().split(/\\s+/).slice(0, 2).join('.') : '');
  const clipped = [], hidden = [];
  for (const el of col.querySelectorAll('*')) {
    const r = el.getBoundingClientRect();
    if (r.width === 0 || r.height === 0) continue;
    const own = getComputedStyle(el).overflowX;
    if (el.closest('.md-code__nav, .md-code__button, .md-clipboard')) continue;   // Material's own buttons
    if (r.right > edge && own !== 'auto' && own !== 'scroll' && !scrolls(el) && !el.closest('.md-typeset__scrollwrap'))
      clipped.push(name(el) + ' ' + Math.round(r.right - edge) + ' px: ' + (el.textContent || '').trim().slice(0, 50));
    const o = getComputedStyle(el).overflowX;
    const cue = getComputedStyle(el).backgroundAttachment.includes('local');   // scroll shadows (numbook.css)
    if ((o === 'auto' || o === 'scroll') && el.scrollWidth > el.clientWidth + 2 && !cue)
      hidden.push(name(el) + ' ' + (el.scrollWidth - el.clientWidth) + ' px hidden, no scroll cue');
  }
  const dedup = a => [...new Set(a)].slice(0, 8);
  return {clipped: dedup(clipped), hidden: dedup(hidden)};
}"""


class Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 (the base class's name)
        pass


def pages(site: Path, only: list[str]) -> list[str]:
    found = sorted(p.parent.relative_to(site).as_posix() + "/" for p in site.rglob("index.html"))
    found = [("" if p == "./" else p) for p in found if not p.startswith(("assets/", "search/"))]
    return [p for p in found if not only or p in only]


def main(argv: list[str]) -> int:
    widths = {int(a.split("=", 1)[1]) for a in argv if a.startswith("--width=")}
    argv = [a for a in argv if not a.startswith("--width=")]
    views = [v for v in VIEWS if not widths or v[0] in widths]
    site, out, only = Path(argv[0]), Path(argv[1]), argv[2:]
    out.mkdir(parents=True, exist_ok=True)
    handler = functools.partial(Quiet, directory=str(site))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{httpd.server_address[1]}/"
    faults = 0
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path="/usr/bin/chromium",
                                     args=["--headless", "--no-sandbox", "--disable-gpu"])
        for width, height, scheme in views:
            ctx = browser.new_context(viewport={"width": width, "height": height}, color_scheme=scheme)  # type: ignore[arg-type]
            page = ctx.new_page()
            for uri in pages(site, only):
                page.goto(base + uri, wait_until="networkidle")
                page.wait_for_timeout(150)
                stem = (uri.strip("/").replace("/", "_") or "home") + f"--{width}-{scheme}"
                page.screenshot(path=str(out / f"{stem}.png"))
                page.screenshot(path=str(out / f"{stem}-full.png"), full_page=True, scale="css")
                # what fits is judged with every fold open: a solution's equations and tables count too
                page.evaluate("() => document.querySelectorAll('details').forEach(d => { d.open = true; })")
                page.wait_for_timeout(50)
                found = page.evaluate(PROBE)
                for kind in ("clipped", "hidden"):
                    for what in found[kind]:
                        faults += 1
                        print(f"{uri or '/'} @{width} {scheme}: {kind}: {what}")
            ctx.close()
        browser.close()
    httpd.shutdown()
    n = len(pages(site, only))
    print(f"{n} pages x {len(views)} views: {faults} things that do not fit; screenshots in {out}")
    return 1 if faults else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
