"""What a reader's browser downloads, and how soon the page is ready: built sites side by side, in one run.

    python tools/weight.py OLD_SITE NEW_SITE [PAGE ...]     # default pages: the home page and I.4.B07

Each site is served from 127.0.0.1 (no compression, as ``python -m http.server``); each page is loaded
``--repeats`` times (default 5) in headless Chromium with an empty cache, alternating between the sites so
that a busy machine slows both alike. Reported per page and site: the requests, the bytes transferred
(response bodies as served, and gzip -6 of each, which is what a host that compresses would send), the
largest resources, and DOMContentLoaded and load (navigation timing, ms) as the median and the range over
the repeats. Needs Playwright and Debian's chromium (``/usr/bin/chromium``).
"""

from __future__ import annotations

import argparse
import functools
import gzip
import http.server
import statistics
import threading
from pathlib import Path
from typing import Any

from playwright.sync_api import sync_playwright

PAGES = ["", "problems/I.4.B07/"]


class Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 (the base class's name)
        pass


def serve(site: Path) -> tuple[http.server.ThreadingHTTPServer, str]:
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(site)))
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    return httpd, f"http://127.0.0.1:{httpd.server_address[1]}/"


def load(browser: Any, url: str) -> dict[str, Any]:
    ctx = browser.new_context(viewport={"width": 1280, "height": 900})
    page = ctx.new_page()
    bodies: list[tuple[str, int, int]] = []

    def done(response: Any) -> None:
        try:
            body = response.body()
        except Exception:  # noqa: BLE001 (a redirect or an aborted request has no body)
            return
        bodies.append((response.url, len(body), len(gzip.compress(body, 6))))

    page.on("response", done)
    page.goto(url, wait_until="networkidle")
    timing = page.evaluate("() => { const t = performance.getEntriesByType('navigation')[0];"
                           " return [t.domContentLoadedEventEnd, t.loadEventEnd]; }")
    ctx.close()
    return {"bodies": bodies, "dcl": timing[0], "load": timing[1]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("old", type=Path)
    ap.add_argument("new", type=Path)
    ap.add_argument("pages", nargs="*", default=PAGES)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    servers = {name: serve(site) for name, site in (("before", args.old), ("after", args.new))}
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path="/usr/bin/chromium",
                                     args=["--headless", "--no-sandbox", "--disable-gpu"])
        for path in args.pages:
            runs: dict[str, list[dict[str, Any]]] = {"before": [], "after": []}
            for _ in range(args.repeats):
                for name, (_, base) in servers.items():
                    runs[name].append(load(browser, base + path))
            print(f"\n## /{path}")
            for name, rs in runs.items():
                bodies = rs[-1]["bodies"]
                raw, gz = sum(b[1] for b in bodies), sum(b[2] for b in bodies)
                dcl = [r["dcl"] for r in rs]
                ld = [r["load"] for r in rs]
                print(f"{name:6}  {len(bodies)} requests, {raw / 1e6:.2f} MB as served, {gz / 1e6:.2f} MB gzipped; "
                      f"DOMContentLoaded {statistics.median(dcl):.0f} ms ({min(dcl):.0f}–{max(dcl):.0f}), "
                      f"load {statistics.median(ld):.0f} ms ({min(ld):.0f}–{max(ld):.0f}) over {len(rs)} loads")
                for url, size, packed in sorted(bodies, key=lambda b: -b[1])[:4]:
                    short = url.split("/", 3)[-1] or "(page)"
                    print(f"          {size / 1e3:8.1f} kB ({packed / 1e3:6.1f} kB gzipped)  {short}")
        browser.close()
    for httpd, _ in servers.values():
        httpd.shutdown()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
