"""The modules of ``numbook`` import each other without a circle (imports inside functions included)."""

from __future__ import annotations

import ast
from pathlib import Path

PKG = Path(__file__).resolve().parent.parent / "src" / "numbook"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PKG.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _skipped(node: ast.If) -> bool:
    """``if TYPE_CHECKING:`` (never runs) and ``if __name__ == "__main__":`` (an entry point, not an import)."""
    test = node.test
    if isinstance(test, ast.Name | ast.Attribute) and ast.unparse(test).endswith("TYPE_CHECKING"):
        return True
    return isinstance(test, ast.Compare) and ast.unparse(test).replace("'", '"') == '__name__ == "__main__"'


def imports(path: Path, modules: set[str]) -> set[str]:
    """The numbook modules ``path`` imports, resolved to modules of the package."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()

    def add(target: str) -> None:
        while target and target not in modules:        # `from .x import y`: y a name in module x
            target = target.rpartition(".")[0]
        if target and target != name:
            found.add(target)

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _skipped(node):
            for child in node.orelse:
                visit(child)
            return
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


def test_the_walker_sees_relative_absolute_and_function_level_imports() -> None:
    g = graph()
    assert "numbook.result" in g["numbook.runner"]              # from .result import ...
    assert "numbook.frozen" in g["numbook.runner"]              # inside a function
    assert "numbook.runner" not in g["numbook.frozen"]          # under TYPE_CHECKING only
    assert "numbook.cli" not in g["numbook.frozen"]             # its __main__ block is an entry point


def test_the_package_has_no_import_cycle() -> None:
    assert cycles(graph()) == []
