"""The layout rules, read from the source: imports run one way, the library never reaches into
the server, the CLI or the integrations, and the Rust core calls no Python."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "onyx"
# Layers above the library: nothing below them may import them.
APPS = ("onyx.server", "onyx.cli", "onyx.integrations")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path, name: str) -> set[str]:
    """The onyx modules a file imports (module level or not), resolved to module names."""
    tree = ast.parse(path.read_text(), str(path))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in _runtime_nodes(tree):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            found.add(base)
            found.update(f"{base}.{a.name}" for a in node.names)
    return {m for m in found if m == "onyx" or m.startswith("onyx.")}


def _runtime_nodes(tree: ast.AST):
    """Every node, except those under `if TYPE_CHECKING:` (imports for annotations only)."""
    stack = [tree]
    while stack:
        node = stack.pop()
        yield node
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and getattr(child.test, "id", None) == "TYPE_CHECKING":
                stack.extend(child.orelse)
                continue
            stack.append(child)


def _graph() -> dict[str, set[str]]:
    files = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph = {}
    for name, path in files.items():
        # "from onyx.x import y" names a module only when y is one; keep the existing ones.
        graph[name] = {m for m in _imports(path, name) if m in files and m != name}
    return graph


def _is_app(name: str) -> bool:
    return any(name == a or name.startswith(a + ".") for a in APPS)


def test_the_library_never_imports_the_server_the_cli_or_the_integrations():
    bad = sorted((m, d) for m, deps in _graph().items() if not _is_app(m) for d in deps if _is_app(d))
    assert not bad, f"library modules importing an app layer: {bad}"


def test_module_imports_have_no_cycles():
    graph = _graph()
    # A package's __init__ re-exports its children; an edge child -> package is the cycle to find,
    # so package -> child edges are left out (importing a submodule imports its package anyway).
    edges = {m: {d for d in deps if not d.startswith(m + ".")} for m, deps in graph.items()}
    state: dict[str, int] = {}
    cycles = []

    def visit(m: str, stack: list[str]) -> None:
        state[m] = 1
        for d in sorted(edges[m]):
            if state.get(d) == 1:
                cycles.append(stack[stack.index(d):] + [d])
            elif d not in state:
                visit(d, stack + [d])
        state[m] = 2

    for m in sorted(edges):
        if m not in state:
            visit(m, [m])
    assert not cycles, f"import cycles: {cycles[:5]}"


def test_the_graph_reader_sees_real_edges():
    """The checks above are only as good as the graph: known edges must be in it."""
    graph = _graph()
    assert "onyx.scheduler" in graph["onyx.engine"]
    assert "onyx.errors" in graph["onyx.server.routes"]  # from onyx import errors as E
    assert "onyx.kv.sequence" in graph["onyx.kv.pool"]


def test_the_rust_core_calls_no_python():
    offenders = []
    for path in (ROOT / "grammar_engine" / "src").rglob("*.rs"):
        rel = path.relative_to(ROOT / "grammar_engine" / "src")
        if rel.parts[0] == "python":  # the PyO3 layer may hand Python objects back and forth
            continue
        text = path.read_text()
        if "pyo3" in text or "PyModule::import" in text or "py.import" in text:
            offenders.append(str(rel))
    assert not offenders, f"Rust core files touching Python: {offenders}"
    # The PyO3 layer may use the standard library (json.dumps of a dict), never onyx's own modules.
    binding = "\n".join(p.read_text() for p in (ROOT / "grammar_engine" / "src" / "python").rglob("*.rs"))
    assert 'import("onyx' not in binding, "the PyO3 layer imports a module of onyx"
