"""Fixtures for the browser tests: the site built once, served locally, and headless Chromium.

The site is the one ``tests/conftest.py`` builds once per session (set ``NUMBOOK_SITE_DIR`` to a
built site to skip the build while iterating), served by a
``http.server`` thread on 127.0.0.1, and driven by Playwright with the system Chromium
(``NUMBOOK_CHROMIUM``, default ``/usr/bin/chromium``).
"""

from __future__ import annotations

import functools
import http.server
import os
import re
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = os.environ.get("NUMBOOK_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run"]


class _Handler(http.server.SimpleHTTPRequestHandler):
    """Serves the built site; quiet; and rewrites sitemap.xml to the address it is served at.

    Material's instant navigation only intercepts links listed in the sitemap, and it keeps the
    sitemap's path and port (``site_url``). Deployed at ``site_url`` that holds by itself; on
    127.0.0.1 with a free port the sitemap must name this server instead.
    """

    site_url = ""

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (the stdlib's name)
        pass

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """A missing page gets the site's 404.html, as GitHub Pages serves it."""
        page = Path(self.directory) / "404.html"
        if code != 404 or not page.is_file():
            super().send_error(code, message, explain)
            return
        body = page.read_bytes()
        self.send_response(404)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:  # noqa: N802 (the stdlib's name)
        if self.path.split("?")[0] != "/sitemap.xml" or not self.site_url:
            super().do_GET()
            return
        host, port = self.server.server_address[:2]
        body = (Path(self.directory) / "sitemap.xml").read_text(encoding="utf-8")
        body = body.replace(f"<loc>{self.site_url}", f"<loc>http://{host}:{port}/").encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/xml")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def _site_url(site: Path) -> str:
    """The root URL the site was built for: the shortest <loc> of its sitemap."""
    sitemap = site / "sitemap.xml"
    locs = re.findall(r"<loc>([^<]+)</loc>", sitemap.read_text(encoding="utf-8")) if sitemap.exists() else []
    return min(locs, key=len) if locs else ""


@pytest.fixture(scope="session")
def base_url(site_dir: Path) -> Iterator[str]:
    handler = functools.partial(type("Handler", (_Handler,), {"site_url": _site_url(site_dir)}),
                                directory=str(site_dir))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()
    server.server_close()
    thread.join()


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    if not Path(CHROMIUM).exists():
        pytest.skip(f"no Chromium at {CHROMIUM} (set NUMBOOK_CHROMIUM)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


class Tab:
    """A browser page with the faults it saw: script errors and requests that left the site."""

    def __init__(self, page: Any, base_url: str) -> None:
        self.page = page
        self.base_url = base_url
        self.errors: list[str] = []
        self.remote: list[str] = []
        page.on("pageerror", lambda exc: self.errors.append(str(exc)))
        page.on("request", self._request)

    def _request(self, request: Any) -> None:
        if not request.url.startswith((self.base_url, "data:", "blob:", "about:")):
            self.remote.append(request.url)

    def open(self, path: str) -> Any:
        self.page.goto(self.base_url + path, wait_until="load")
        self.page.wait_for_function("() => window.numbookComponents !== undefined")
        return self.page


@pytest.fixture(params=["light"])
def tab(request: pytest.FixtureRequest, browser: Any, base_url: str) -> Iterator[Tab]:
    context = browser.new_context(viewport={"width": 1280, "height": 900}, color_scheme=request.param)
    t = Tab(context.new_page(), base_url)
    yield t
    context.close()
    assert t.errors == [], f"script errors: {t.errors}"
    assert t.remote == [], f"requests outside the site: {t.remote}"
