"""What makes ``mkdocs serve`` answer an edit sooner: compiled theme templates kept, and a faster file watcher.

- :data:`TEMPLATES`: serve makes a new theme environment for every rebuild, which compiles the theme's
  templates again (a third of an edit's rebuild here). The plugin gives each environment this cache,
  which keeps what the templates compiled to for the life of the process.
- :func:`watch_sooner`: MkDocs' file watcher polls every 0.5 s; this one hears the system's file events.
- :func:`remember_listings`: every rebuild lists every file of the theme (MkDocs copies its static files),
  thousands of icons in Material's case (0.2 s a rebuild here, whatever the book's size): a theme folder
  outside the project is listed once for the process; the project's own (a ``custom_dir``) on every rebuild.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import jinja2

from numbook.core.diagnostics import log

__all__ = ["CompiledTemplates", "TEMPLATES", "watch_sooner", "POLL_ENV", "remember_listings"]


class CompiledTemplates(jinja2.BytecodeCache):
    """Compiled theme templates, kept in memory for the life of the process (``mkdocs serve``'s rebuilds).

    Jinja keys each entry by the template's name and file and checks it against a checksum of the template's
    source, so an edited template is compiled again. What a template compiles to also depends on its
    environment's settings (extensions, delimiters, autoescape): they are part of the key here, so two
    projects built in one process never share code compiled for the other's environment."""

    def __init__(self) -> None:
        self.store: dict[tuple[str, str], bytes] = {}

    @staticmethod
    def _key(bucket: jinja2.bccache.Bucket) -> tuple[str, str] | None:
        """None where the environment decides autoescaping per template by a function (MkDocs does not): the
        template's name is not in the bucket to ask it with, so such templates are compiled every time."""
        env = bucket.environment
        if not isinstance(env.autoescape, bool):
            return None
        settings = (sorted(env.extensions), env.block_start_string, env.block_end_string, env.variable_start_string,
                    env.variable_end_string, env.comment_start_string, env.comment_end_string,
                    env.line_statement_prefix, env.line_comment_prefix, env.trim_blocks, env.lstrip_blocks,
                    env.newline_sequence, env.keep_trailing_newline, env.optimized, env.is_async, env.autoescape,
                    env.finalize is None)
        return bucket.key, repr(settings)

    def load_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
        key = self._key(bucket)
        code = self.store.get(key) if key is not None else None
        if code is not None:
            bucket.bytecode_from_string(code)

    def dump_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
        key = self._key(bucket)
        if key is not None:
            self.store[key] = bucket.bytecode_to_string()

    def clear(self) -> None:
        self.store.clear()


TEMPLATES = CompiledTemplates()
"""The one cache of the process: every rebuild's theme environment uses it."""


POLL_ENV = "NUMBOOK_SERVE_POLL"
"""Set (to anything) for a watcher that polls every 0.1 s: for folders whose file events never arrive (some
network and container mounts)."""


def watch_sooner(server: Any, interval: float = 0.1) -> None:
    """MkDocs' file watcher polls every 0.5 s: on average a quarter of a second of every edit's wait before the
    rebuild even starts, and each poll reads the state of every watched file (30 ms for a book of a thousand
    problems, while holding the interpreter a rebuild needs). Watch by the system's own file events instead
    (inotify, FSEvents, ReadDirectoryChangesW, as watchdog has them), which see an edit at once and read nothing
    between edits (and a rebuild waits 0.03 s for the events of one save to end, not 0.1 s); where watchdog has
    none, or with ``NUMBOOK_SERVE_POLL`` set, poll every ``interval`` s. This
    reaches into MkDocs' LiveReloadServer (its observer and watched paths); if those ever change, the watcher
    stays MkDocs' own."""
    try:
        from watchdog.observers import Observer
        from watchdog.observers.polling import PollingObserver

        watched = dict(server._watched_paths)
        for path, n in watched.items():
            for _ in range(n):
                server.unwatch(path)
        native = Observer is not PollingObserver and not os.environ.get(POLL_ENV)
        server.observer = Observer(timeout=interval) if native else PollingObserver(timeout=interval)
        if native:   # an editor's save arrives as a burst of events within milliseconds: wait 0.03 s, not 0.1 s
            server.build_delay = min(float(server.build_delay), 0.03)
        for path, n in watched.items():
            for _ in range(n):
                server.watch(path)
    except (AttributeError, ImportError, KeyError, TypeError):
        log.debug("numbook: the file watcher stays MkDocs' own")


_LISTINGS: dict[tuple[str, bool], list[str]] = {}


def _listing(searchpath: str, followlinks: bool) -> list[str]:
    """The template names under one folder, as jinja2's FileSystemLoader.list_templates names them."""
    found = []
    for dirpath, _, filenames in os.walk(searchpath, followlinks=followlinks):
        for filename in filenames:
            name = os.path.join(dirpath, filename)[len(searchpath):].strip(os.path.sep).replace(os.path.sep, "/")
            found.append(name[2:] if name[:2] == "./" else name)
    return found


def remember_listings(env: jinja2.Environment, root: Path) -> None:
    """Give ``env``'s file loader a listing that walks a theme folder outside ``root`` once for the process (an
    installed theme does not change while serve runs) and each folder inside it (the project's overrides) on
    every call, in jinja2's order. Another kind of loader is left alone."""
    loader = env.loader
    if type(loader) is not jinja2.FileSystemLoader:
        return
    inside = str(root.resolve())

    def list_templates() -> list[str]:
        found: set[str] = set()
        for searchpath in loader.searchpath:
            own = os.path.realpath(searchpath).startswith(inside + os.sep)
            if own:
                found.update(_listing(searchpath, loader.followlinks))
            else:
                key = (searchpath, loader.followlinks)
                if key not in _LISTINGS:
                    _LISTINGS[key] = _listing(searchpath, loader.followlinks)
                found.update(_LISTINGS[key])
        return sorted(found)

    loader.list_templates = list_templates  # type: ignore[method-assign]
