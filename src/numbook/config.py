"""The book's layout, read from ``mkdocs.yml`` by MkDocs itself.

``load_layout(root)`` loads ``root/mkdocs.yml`` with ``mkdocs.config.load_config`` and reads the
numbook plugin's validated options (``NumbookConfig`` in the plugin: the one schema, with the one
set of defaults). A configuration error (a bad plugin option, a missing folder) is a ConfigError
that names each fault.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path

from mkdocs.config import load_config
from mkdocs.exceptions import MkDocsException

from .plugin import EXTENSION_MISSING, NumbookConfig, memory_option
from .result import DEFAULT_CACHE_DIR, DEFAULT_MEMORY, DEFAULT_TIMEOUT

__all__ = ["Layout", "ConfigError", "load_layout"]


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
