"""The book's layout, read from ``mkdocs.yml`` by MkDocs itself.

``NumbookConfig`` is the plugin's options: the one schema, with the one set of defaults.
``load_layout(root)`` loads ``root/mkdocs.yml`` with ``mkdocs.config.load_config`` and reads the
numbook plugin's options as MkDocs validated them. A configuration error (a bad plugin option, a
missing folder) is a ConfigError that names each fault.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path

from mkdocs.config import base, load_config
from mkdocs.config import config_options as c
from mkdocs.exceptions import MkDocsException, PluginError

from numbook.core.result import DEFAULT_CACHE_DIR, DEFAULT_MEMORY, DEFAULT_TIMEOUT, parse_memory

__all__ = ["Layout", "ConfigError", "load_layout", "NumbookConfig", "EXTENSION_MISSING", "memory_option"]


class NumbookConfig(base.Config):
    """Options of the ``numbook`` plugin."""

    problems_dir = c.Dir(exists=True, default="problems")
    """Folder of the problem pages, relative to mkdocs.yml."""
    checks_dir = c.Dir(exists=True, default="checks")
    """Folder of the check scripts, relative to mkdocs.yml."""
    cache_dir = c.Type(str, default=DEFAULT_CACHE_DIR)
    """Result cache, relative to mkdocs.yml; empty for no cache."""
    timeout = c.Type((int, float), default=DEFAULT_TIMEOUT)
    """Seconds a check may run before it is stopped (a check's header can override it)."""
    jobs = c.Type(int, default=0)
    """Checks run at once; 0 for one per CPU core."""
    memory = c.Type(str, default="default")
    """Memory each check may use, like ``8GiB`` or ``none``; ``default`` fits two checks on 24 GiB. A check's
    ``# numbook: memory=…`` header overrides it."""
    execute = c.Type(bool, default=True)
    """Run the checks. Off, claims are not verified (for measuring the build's floor only)."""
    nav_title = c.Type(str, default="Problems")
    """Title of the generated navigation section of problems."""
    nav_after = c.Type(str, default="Lessons")
    """Insert that section after the nav item with this title (else at the end)."""
    ledger = c.Type(str, default="numbers.json")
    """File beside the site listing every published number (``numbook diff`` compares two); empty for none."""
    report = c.Type(str, default="report.md")
    """Site path of the generated run report page (last in the nav); empty for none."""
    run_yourself = c.Type(bool, default=False)
    """Offer each problem's check as a standalone script and an executed notebook next to its page
    (needs nbformat, nbclient and a python3 kernel: the book's dependencies)."""


EXTENSION_MISSING = "the numbook plugin needs the 'numbook' Markdown extension in markdown_extensions"
"""Refused by the build (``on_config``) and by ``numbook verify`` (``numbook.mkdocs.config``) alike."""


def memory_option(text: str) -> int | None:
    """The plugin's ``memory`` option in bytes (None: no limit); a malformed one stops the build at once."""
    if text == "default":
        return DEFAULT_MEMORY
    try:
        return parse_memory(text)
    except ValueError as exc:
        raise PluginError(f"numbook plugin option 'memory': {exc}") from None


class ConfigError(ValueError):
    """``mkdocs.yml`` cannot be loaded, or the numbook plugin's options are invalid."""


@dataclass(frozen=True)
class Layout:
    """Where the book's parts are (relative to ``root``, posix) and how its checks run."""

    root: Path
    docs_dir: str = "docs"
    problems_dir: str = "problems"
    checks_dir: str = "checks"
    cache_dir: str | None = DEFAULT_CACHE_DIR    # None: no cache
    timeout: float = DEFAULT_TIMEOUT
    jobs: int = 0
    execute: bool = True
    memory: int | None = DEFAULT_MEMORY
    run_yourself: bool = False   # problems offer their check as a notebook, run and compared


class _Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())   # a warning aborts too, in strict mode


def _rel(root: Path, path: str) -> str:
    return Path(os.path.relpath(path, root)).as_posix()


def load_layout(root: Path) -> Layout:
    """The layout of the book whose ``mkdocs.yml`` is in ``root``; raises ConfigError."""
    root = root.resolve()
    cfg_file = root / "mkdocs.yml"
    if not cfg_file.is_file():
        raise ConfigError(f"{cfg_file}: no such file: run numbook in the folder holding mkdocs.yml, or pass --root")
    collect = _Collect()
    logger = logging.getLogger("mkdocs")
    logger.addHandler(collect)
    try:
        cfg = load_config(config_file=str(cfg_file))
    except MkDocsException as exc:
        faults = "; ".join(collect.messages) or str(exc)
        raise ConfigError(f"{_rel(root, str(cfg_file))}: {faults}") from None
    finally:
        logger.removeHandler(collect)
    plugin = cfg.plugins.get("numbook")
    if plugin is None:
        raise ConfigError(f"{_rel(root, str(cfg_file))}: the numbook plugin is not in 'plugins'")
    if "numbook" not in cfg.markdown_extensions:   # the build refuses it in the plugin's on_config: so does verify
        raise ConfigError(f"{_rel(root, str(cfg_file))}: {EXTENSION_MISSING}")
    opts = plugin.config
    assert isinstance(opts, NumbookConfig)
    return Layout(
        root=root,
        docs_dir=_rel(root, cfg.docs_dir),
        problems_dir=_rel(root, opts.problems_dir),
        checks_dir=_rel(root, opts.checks_dir),
        cache_dir=opts.cache_dir or None,
        timeout=float(opts.timeout),
        jobs=int(opts.jobs),
        execute=bool(opts.execute),
        memory=memory_option(opts.memory),
        run_yourself=bool(opts.run_yourself),
    )
