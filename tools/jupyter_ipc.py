"""MkDocs hook (``hooks:`` in mkdocs.yml): the notebook build's kernels talk over IPC, not TCP.

mkdocs-jupyter executes each notebook in docs/lessons/notebooks/ through nbconvert, which starts an
ipykernel through jupyter_client's KernelManager. Its default transport is TCP on localhost without
encryption, and ipykernel warns about that on every kernel start ("Kernel is running over TCP
without encryption"). With ``KernelManager.transport = "ipc"`` the kernel's channels are Unix
domain sockets in Jupyter's runtime directory instead of open local ports: the warning's own
advice, so it has nothing left to say.

mkdocs-jupyter passes no kernel settings through, but nbconvert loads its configuration from the
Jupyter config path on each conversion; this hook puts tools/jupyter/ first on that path, for every
way the book is built (nox, mkdocs by hand, the tests). Its jupyter_nbconvert_config.py sets the
transport and gives each kernel an absolute socket path (see there).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

CONFIG_DIR = str(Path(__file__).resolve().parent / "jupyter")


def on_config(config: Any) -> Any:
    paths = [p for p in os.environ.get("JUPYTER_CONFIG_PATH", "").split(os.pathsep) if p]
    if CONFIG_DIR not in paths:
        os.environ["JUPYTER_CONFIG_PATH"] = os.pathsep.join([CONFIG_DIR, *paths])
    return config
