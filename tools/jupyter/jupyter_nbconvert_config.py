"""nbconvert's configuration for the notebook build (loaded through tools/jupyter_ipc.py).

The kernel's channels are Unix domain sockets (IPC transport), not unencrypted TCP ports. Their
path prefix must be absolute: the kernel runs in the notebook's folder and the client in the
build's, so jupyter_client's default relative prefix ("kernel-ipc") names two different places.
This file is read once per notebook conversion, so each kernel gets a prefix of its own in
Jupyter's runtime directory; jupyter_client removes the socket files when the kernel shuts down.
"""

import os
import uuid

from jupyter_core.paths import jupyter_runtime_dir

c = get_config()  # noqa: F821 - traitlets provides get_config() to configuration files

runtime = jupyter_runtime_dir()
os.makedirs(runtime, mode=0o700, exist_ok=True)
c.KernelManager.transport = "ipc"
c.KernelManager.ip = os.path.join(runtime, f"nb-{uuid.uuid4().hex[:12]}-ipc")
