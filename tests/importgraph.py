"""The import graph of hubsvc/: who imports whom (anywhere in a module), and its circles."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent / "hubsvc"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(node: ast.AST, typing: bool):
    """Every import statement, in functions too; under `if TYPE_CHECKING` only if typing."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.Import, ast.ImportFrom)):
            yield child
        elif isinstance(child, ast.If) and _is_type_checking(child.test) and not typing:
            for other in child.orelse:
                yield from _imports(other, typing)
        else:
            yield from _imports(child, typing)


def graph(typing: bool = False) -> tuple[dict[str, set[str]], dict[str, int]]:
    """(module -> hubsvc modules it imports, module -> lines); typing: TYPE_CHECKING ones too."""
    files = {module_name(p): p for p in ROOT.rglob("*.py")}
    edges: dict[str, set[str]] = {}
    lines: dict[str, int] = {}
    for name, path in files.items():
        text = path.read_text()
        lines[name] = text.count("\n")
        tree = ast.parse(text)
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        found: set[str] = set()
        for node in _imports(tree, typing):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                base = package
                for _ in range(node.level - 1 if node.level else 0):
                    base = base.rpartition(".")[0]
                mod = node.module or ""
                stem = (f"{base}.{mod}" if mod else base) if node.level else mod
                targets = [
                    f"{stem}.{a.name}" if f"{stem}.{a.name}" in files else stem for a in node.names
                ]
            for target in targets:
                while target and target not in files:
                    target = target.rpartition(".")[0]
                if target and target != name:
                    found.add(target)
        edges[name] = found
    return edges, lines


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


if __name__ == "__main__":
    edges, lines = graph()
    biggest = max(lines, key=lines.get)
    print(
        f"modules: {len(edges)}, lines: {sum(lines.values())}, "
        f"largest: {biggest} ({lines[biggest]} lines)"
    )
    print(f"modules directly in hubsvc/: {sum(1 for m in edges if m.count('.') == 1)}")
    for comp in cycles(edges):
        print("circle:", " ".join(comp))
    typed, _ = graph(typing=True)
    for comp in cycles(typed):
        print("circle counting TYPE_CHECKING imports:", " ".join(comp))
