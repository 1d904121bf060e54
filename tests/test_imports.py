"""The modules of ``numbook`` import each other without a circle, and each imports only from its layer and those below.

Every import counts: at module level, inside a function, under ``if TYPE_CHECKING:`` and in an
``if __name__ == "__main__":`` block. The same rules are pyproject.toml's ``[tool.importlinter]``
contracts, which ``nox -s lint`` runs with import-linter."""

from __future__ import annotations

import ast
from pathlib import Path

PKG = Path(__file__).resolve().parent.parent / "src" / "numbook"


def module_name(path: Path, top: Path = PKG.parent) -> str:
    parts = list(path.relative_to(top).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path, modules: set[str], top: Path = PKG.parent) -> set[str]:
    """The numbook modules ``path`` imports, resolved to modules of the package."""
    name = module_name(path, top)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()

    def add(target: str) -> None:
        while target and target not in modules:        # `from .x import y`: y a name in module x
            target = target.rpartition(".")[0]
        if target and target != name:
            found.add(target)

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "numbook":
                    add(alias.name)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            if mod.split(".")[0] == "numbook":
                for alias in node.names:
                    add(f"{mod}.{alias.name}")
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(path.read_text(encoding="utf-8")))
    return found


def graph() -> dict[str, set[str]]:
    files = {module_name(p): p for p in PKG.rglob("*.py")}
    return {name: imports(path, set(files)) for name, path in files.items()}


def cycles(g: dict[str, set[str]]) -> list[list[str]]:
    """One cycle through each strongly connected part that has one (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def strong(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(g[v]):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            part = []
            while True:
                w = stack.pop()
                on.discard(w)
                part.append(w)
                if w == v:
                    break
            if len(part) > 1:
                out.append(sorted(part))

    for v in sorted(g):
        if v not in index:
            strong(v)
    return out


LAYERS = ("numbook.core", "numbook.run", "numbook.html", "numbook.mkdocs", "numbook.cli")
"""Lowest first: a module may import from its own layer and those below it, never above."""
IN_A_CHECK = ("numbook.check", "numbook.run.sandbox", "numbook.run.warm")
"""What runs in a check's own process: it imports nothing else of numbook."""


def layer(module: str) -> int:
    """The layer of a module; the package itself and ``numbook.check`` (the check API, which imports nothing of
    numbook) are below every layer."""
    for i, name in enumerate(LAYERS):
        if module == name or module.startswith(name + "."):
            return i
    return -1


def breaches(g: dict[str, set[str]]) -> list[str]:
    out = [f"{m} (layer {LAYERS[layer(m)]}) imports {t} (layer {LAYERS[layer(t)]})"
           for m in sorted(g) if layer(m) >= 0 for t in sorted(g[m]) if layer(t) > layer(m)]
    out += [f"{m} runs in a check's process and imports {t}" for m in IN_A_CHECK for t in sorted(g[m])
            if t not in IN_A_CHECK and t != "numbook"]
    return out


def test_the_walker_sees_every_import(tmp_path: Path) -> None:
    g = graph()
    assert "numbook.core.result" in g["numbook.run.runner"]            # from numbook.core.result import ...
    pkg = tmp_path / "numbook"
    (pkg / "core").mkdir(parents=True)
    for name in ("__init__", "core/__init__", "core/a", "core/b", "core/c", "core/d", "core/e"):
        (pkg / f"{name}.py").write_text("", encoding="utf-8")
    (pkg / "core" / "a.py").write_text(
        "from typing import TYPE_CHECKING\n"
        "from . import b\n"                                               # relative, a module of the package
        "if TYPE_CHECKING:\n    from numbook.core.c import C\n"          # for types only: counted
        "def f():\n    import numbook.core.d\n"                           # inside a function: counted
        "if __name__ == '__main__':\n    from .e import main\n",          # an entry point: counted
        encoding="utf-8")
    modules = {"numbook", "numbook.core", *(f"numbook.core.{x}" for x in "abcde")}
    assert imports(pkg / "core" / "a.py", modules, pkg.parent) == {f"numbook.core.{x}" for x in "bcde"}


def test_the_package_has_no_import_cycle() -> None:
    assert cycles(graph()) == []


def test_each_layer_imports_only_from_itself_and_below() -> None:
    assert breaches(graph()) == []


def test_a_breach_is_named_with_both_layers() -> None:
    g = {"numbook.core.verify": {"numbook.run.runner"}, "numbook.run.runner": set(),
         "numbook.check": {"numbook.core.x"}, "numbook.run.sandbox": set(), "numbook.run.warm": {"numbook.run.sandbox"}}
    assert breaches(g) == ["numbook.core.verify (layer numbook.core) imports numbook.run.runner (layer numbook.run)",
                           "numbook.check runs in a check's process and imports numbook.core.x"]
