"""The layout rules, read from the source: imports run one way (between modules and between the
packages of the data flow), the library never reaches into the server, the CLI or the
integrations, no module reads another's private fields, files stay small, and the Rust core
calls no Python."""

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
    assert "onyx.grammar.constraint" in graph["onyx.decoding.drafts"]


# What each layer of the library may import besides itself (the root package `onyx` is allowed
# everywhere: it is what loads the Rust extension). Lower layers never import higher ones:
# paths, errors < options < grammar < chat; paths < cpu < kv; models (cpu, grammar) <
# decoding < scheduler < engine < the apps.
LAYERS = {
    "onyx.paths": set(),
    "onyx.errors": set(),
    "onyx.options": {"onyx.errors"},
    "onyx.grammar": {"onyx.errors", "onyx.options", "onyx.paths"},
    "onyx.chat": {"onyx.errors", "onyx.options", "onyx.grammar"},
    "onyx.cpu": {"onyx.paths"},
    "onyx.kv": {"onyx.errors", "onyx.cpu"},
    "onyx.models": {"onyx.errors", "onyx.paths", "onyx.cpu", "onyx.grammar"},
    "onyx.decoding": {"onyx.errors", "onyx.options", "onyx.grammar", "onyx.cpu", "onyx.kv", "onyx.models"},
    "onyx.scheduler": {"onyx.errors", "onyx.options", "onyx.grammar", "onyx.decoding"},
    "onyx.engine": {"onyx.errors", "onyx.options", "onyx.grammar", "onyx.chat", "onyx.models", "onyx.decoding",
                    "onyx.scheduler"},
}


def _layer(name: str) -> str:
    parts = name.split(".")
    return ".".join(parts[:2]) if len(parts) > 1 else name


def test_the_layers_import_one_way():
    bad = []
    for module, deps in _graph().items():
        allowed = LAYERS.get(_layer(module))
        if allowed is None:
            continue
        for d in deps:
            if _layer(d) not in allowed | {_layer(module), "onyx"}:
                bad.append(f"{module} -> {d}")
    assert not bad, f"imports against the layer order: {sorted(bad)}"
    assert set(LAYERS) | set(APPS) | {"onyx"} >= {_layer(m) for m in _graph()}, "a package missing from LAYERS"


# Private names of other libraries that are their documented way in (os._exit; the backend
# tokenizer a transformers or mlx-lm tokenizer wraps; vLLM's record of a request's
# structured-output backend and the validation that sets it, which a backend outside vLLM's
# fixed list has to take part in: vLLM has no registry for backends).
FOREIGN_PRIVATE = {"_exit", "_tokenizer", "_backend", "_validate_structured_outputs"}


def _private_reads(path: Path, root: Path = ROOT) -> list[str]:
    """`x._name` in a file where `x` is not `self`, `cls` or `super()` and `_name` is not the file's
    own (a function, class or module name it defines, or an attribute it sets on `self` or on a
    function or class it defines)."""
    tree = ast.parse(path.read_text(), str(path))
    defined = {n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}
    own = set(defined)
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            own.add(node.id)
        elif (isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store)
              and isinstance(node.value, ast.Name) and node.value.id in ("self", "cls", *defined)):
            own.add(node.attr)
    out = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__")):
            continue
        v = node.value
        if isinstance(v, ast.Name) and v.id in ("self", "cls"):
            continue
        if isinstance(v, ast.Call) and getattr(v.func, "id", None) == "super":
            continue
        if node.attr in own or node.attr in FOREIGN_PRIVATE:
            continue
        out.append(f"{path.relative_to(root)}:{node.lineno}: {ast.unparse(node)}")
    return out


def test_no_module_reads_another_modules_private_fields():
    bad = [hit for p in sorted(PACKAGE.rglob("*.py")) for hit in _private_reads(p)]
    assert not bad, "private fields read from outside their module:\n" + "\n".join(bad)


def test_the_private_field_check_can_fail(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text("import os\n\nclass A:\n    def __init__(self):\n        self._mine = 1\n\n"
                     "def f(seq, a):\n    return seq._blocks, a._mine, os._exit\n")
    assert [r.split(": ", 1)[1] for r in _private_reads(probe, tmp_path)] == ["seq._blocks"]


MAX_PYTHON_LINES = 600
MAX_RUST_LINES = 800


def test_files_stay_small():
    py = [p for d in ("onyx", "tests", "bench") for p in (ROOT / d).rglob("*.py")]
    long_py = {str(p.relative_to(ROOT)): n for p in py if (n := len(p.read_text().splitlines())) > MAX_PYTHON_LINES}
    assert not long_py, f"Python files over {MAX_PYTHON_LINES} lines: {long_py}"
    src = ROOT / "grammar_engine" / "src"
    long_rs = {str(p.relative_to(ROOT)): n for p in src.rglob("*.rs")
               if p.name != "tests.rs" and "tests" not in p.relative_to(src).parts
               and (n := len(p.read_text().splitlines())) > MAX_RUST_LINES}
    assert not long_rs, f"Rust files over {MAX_RUST_LINES} lines outside tests: {long_rs}"


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
