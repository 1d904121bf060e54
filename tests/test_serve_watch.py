"""What makes ``mkdocs serve`` answer an edit sooner on a large book: the theme's files listed once (the project's
own overrides on every rebuild), and a watcher that hears file events instead of reading every file each 0.1 s."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jinja2
import pytest
from watchdog.observers import Observer
from watchdog.observers.polling import PollingObserver

from numbook.mkdocs import serve


def test_a_theme_outside_the_book_is_listed_once_and_the_books_own_overrides_every_time(tmp_path: Path) -> None:
    theme, book = tmp_path / "site-packages" / "theme", tmp_path / "book"
    (theme / "partials").mkdir(parents=True)
    (theme / "main.html").write_text("m", encoding="utf-8")
    (theme / "partials" / "nav.html").write_text("n", encoding="utf-8")
    (book / "overrides").mkdir(parents=True)
    (book / "overrides" / "main.html").write_text("o", encoding="utf-8")
    searchpath = [str(book / "overrides"), str(theme)]
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(searchpath))
    serve.remember_listings(env, book)
    assert env.list_templates() == jinja2.FileSystemLoader(searchpath).list_templates() == [
        "main.html", "partials/nav.html"]
    (book / "overrides" / "partials").mkdir()
    (book / "overrides" / "partials" / "toc.html").write_text("t", encoding="utf-8")
    (theme / "icon.svg").write_text("i", encoding="utf-8")          # an installed theme does not change under serve
    again = jinja2.Environment(loader=jinja2.FileSystemLoader(searchpath))
    serve.remember_listings(again, book)
    assert again.list_templates() == ["main.html", "partials/nav.html", "partials/toc.html"]


class _Server:
    """MkDocs' LiveReloadServer as far as the watcher is concerned."""

    def __init__(self) -> None:
        self._watched_paths = {"docs": 1, "problems": 2}
        self.observer: Any = None
        self.build_delay = 0.1
        self.log: list[tuple[str, str]] = []

    def unwatch(self, path: str) -> None:
        self.log.append(("unwatch", path))

    def watch(self, path: str) -> None:
        self.log.append(("watch", path))


def test_the_watcher_hears_the_systems_events_and_polls_when_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(serve.POLL_ENV, raising=False)
    server = _Server()
    serve.watch_sooner(server)
    if Observer is not PollingObserver:          # inotify here (Linux)
        assert not isinstance(server.observer, PollingObserver) and server.build_delay == 0.03
    assert server.log == [("unwatch", "docs"), ("unwatch", "problems"), ("unwatch", "problems"),
                          ("watch", "docs"), ("watch", "problems"), ("watch", "problems")]
    monkeypatch.setenv(serve.POLL_ENV, "1")
    polled = _Server()
    serve.watch_sooner(polled)
    assert isinstance(polled.observer, PollingObserver) and polled.observer.timeout == 0.1
    assert polled.build_delay == 0.1
