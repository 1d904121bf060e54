"""The run layer: each check run once per build, sandboxed, cached, or derived from frozen GPU measurements.

``runner`` asks a check's sources in order (memory, ``cache``, ``frozen``, ``executor``); the
executor runs a check under ``sandbox`` in a fresh interpreter or a child of the ``warm`` parent;
``machine`` says what the machine is; ``perturb`` nudges inputs; ``standalone`` writes the
run-it-yourself script and notebook and runs the notebook in the check's sandbox. It imports only
the core layer and the check API (``numbook.check``); ``sandbox`` and ``warm``, which run in a
check's own process, import nothing else of numbook.
"""
