"""The core layer: the book, its pages and claims, and their verification. No MkDocs, no Markdown, no runs.

It reads the book's files (front matter against a schema, Markdown structure, claim literals, units,
relation words) and verifies each page against the results of its checks (``verify``, once per page
for the whole book in ``bookpass``), yielding records and diagnostics; it writes no HTML. Results
come in through the ``Results`` protocol (``verify``), which the run layer's runner satisfies, and
the types every layer shares live here: ``result`` (a check's result and header), ``diagnostics``.
It imports nothing else of numbook (tests/test_imports.py, pyproject.toml's import contract).
"""
