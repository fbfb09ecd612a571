"""The type stub `onyx/_grammar.pyi` against the built module `onyx._grammar`: the same public
names, the same members per class, each of the same kind (method, static method, property), the
same parameters (names, kinds, defaults) wherever the module states a signature, and the same
exception hierarchy. A stub that drifts from the Rust binding fails here."""

from __future__ import annotations

import ast
import inspect
import sys
from pathlib import Path

import pytest

import onyx._grammar as grammar

STUB = Path(__file__).resolve().parents[2] / "onyx" / "_grammar.pyi"

# What every class has at run time without the binding defining it.
IMPLICIT = {"__doc__", "__module__", "__weakref__", "__dict__", "__qualname__"}


def _stub() -> ast.Module:
    return ast.parse(STUB.read_text(), str(STUB))


def _public(names) -> set[str]:
    return {n for n in names if not n.startswith("_")}


def _stub_classes() -> dict[str, ast.ClassDef]:
    return {n.name: n for n in _stub().body if isinstance(n, ast.ClassDef)}


def _stub_functions(body) -> dict[str, ast.FunctionDef]:
    return {n.name: n for n in body if isinstance(n, ast.FunctionDef)}


def _decorators(fn: ast.FunctionDef) -> set[str]:
    return {d.id for d in fn.decorator_list if isinstance(d, ast.Name)}


def _stub_params(fn: ast.FunctionDef, drop_first: bool) -> list[tuple[str, str, object]]:
    """(name, kind, default) of a stub function's parameters, as `inspect` names kinds."""
    a = fn.args
    positional = [(p, "POSITIONAL_ONLY") for p in a.posonlyargs] + [(p, "POSITIONAL_OR_KEYWORD") for p in a.args]
    defaults = [inspect.Parameter.empty] * (len(positional) - len(a.defaults)) + [ast.literal_eval(d) for d in a.defaults]
    out = [(p.arg, kind, d) for (p, kind), d in zip(positional, defaults)]
    if a.vararg:
        out.append((a.vararg.arg, "VAR_POSITIONAL", inspect.Parameter.empty))
    for p, d in zip(a.kwonlyargs, a.kw_defaults):
        out.append((p.arg, "KEYWORD_ONLY", inspect.Parameter.empty if d is None else ast.literal_eval(d)))
    if a.kwarg:
        out.append((a.kwarg.arg, "VAR_KEYWORD", inspect.Parameter.empty))
    return out[1:] if drop_first else out


def _runtime_params(obj, drop_first: bool) -> list[tuple[str, str, object]] | None:
    """The same for a runtime callable, or None when the module states no signature for it."""
    try:
        sig = inspect.signature(obj)
    except (ValueError, TypeError):
        return None
    out = [(p.name, p.kind.name, p.default) for p in sig.parameters.values()]
    return out[1:] if drop_first else out


def _kind(raw) -> str:
    if isinstance(raw, staticmethod):
        return "staticmethod"
    if inspect.isdatadescriptor(raw):
        return "property"
    return "method"


def _stub_kind(fn: ast.FunctionDef) -> str:
    decorators = _decorators(fn)
    if "staticmethod" in decorators:
        return "staticmethod"
    if "property" in decorators:
        return "property"
    return "method"


def _same_params(stub, runtime) -> bool:
    # Positional-only and positional-or-keyword differ only in how `self` was written.
    norm = lambda ps: [(n, "POSITIONAL" if k.startswith("POSITIONAL_") else k, d) for n, k, d in ps]
    return norm(stub) == norm(runtime)


def test_the_stub_names_exactly_what_the_module_exports():
    stub = _stub()
    names = set(_stub_classes()) | set(_stub_functions(stub.body))
    names |= {t.id for n in stub.body if isinstance(n, ast.AnnAssign) for t in [n.target] if isinstance(t, ast.Name)}
    runtime = _public(dir(grammar))
    assert _public(names) == runtime, (
        f"in the module, not the stub: {sorted(runtime - names)}; in the stub, not the module: {sorted(_public(names) - runtime)}"
    )
    assert set(grammar.__all__) == runtime


@pytest.mark.parametrize("name", sorted(n for n in _public(dir(grammar)) if inspect.isclass(getattr(grammar, n))))
def test_each_class_has_the_stubs_members_bases_and_signatures(name):
    cls = getattr(grammar, name)
    node = _stub_classes()[name]
    bases = [b.id for b in node.bases if isinstance(b, ast.Name)]
    assert bases == ([b.__name__ for b in cls.__bases__] if cls.__bases__ != (object,) else []), f"{name}'s bases"
    stub_members = _stub_functions(node.body)
    runtime_members = {k: v for k, v in vars(cls).items() if k not in IMPLICIT}
    assert set(stub_members) == set(runtime_members), (
        f"{name}: in the module, not the stub: {sorted(set(runtime_members) - set(stub_members))}; "
        f"in the stub, not the module: {sorted(set(stub_members) - set(runtime_members))}"
    )
    for member, raw in runtime_members.items():
        fn = stub_members[member]
        assert _stub_kind(fn) == _kind(raw), f"{name}.{member}: {_stub_kind(fn)} in the stub, {_kind(raw)} in the module"
        assert ast.get_docstring(fn), f"{name}.{member} has no docstring in the stub"
        if _kind(raw) == "property":
            continue
        if member == "__new__":
            # The class states the constructor's signature.
            runtime = _runtime_params(cls, drop_first=False)
        else:
            runtime = _runtime_params(getattr(cls, member), drop_first=_kind(raw) == "method")
        if runtime is None:
            continue
        stub = _stub_params(fn, drop_first=_kind(raw) == "method" or member == "__new__")
        assert _same_params(stub, runtime), f"{name}.{member}: stub {stub}, module {runtime}"
    assert ast.get_docstring(node), f"{name} has no docstring in the stub"


def test_module_functions_match():
    functions = _stub_functions(_stub().body)
    for name in _public(dir(grammar)):
        obj = getattr(grammar, name)
        if inspect.isclass(obj):
            continue
        runtime = _runtime_params(obj, drop_first=False)
        assert runtime is not None, f"{name} states no signature"
        stub = _stub_params(functions[name], drop_first=False)
        assert _same_params(stub, runtime), f"{name}: stub {stub}, module {runtime}"
        assert ast.get_docstring(functions[name]), f"{name} has no docstring in the stub"


def test_the_comparison_sees_a_drifted_stub(tmp_path, monkeypatch):
    """The checks above fail on a stub that renames an argument or drops a method."""
    text = STUB.read_text()
    drifted = text.replace("def advance(self, state: int, token_id: int)", "def advance(self, state: int, token: int)")
    assert drifted != text
    path = tmp_path / "_grammar.pyi"
    path.write_text(drifted)
    monkeypatch.setattr(sys.modules[__name__], "STUB", path)
    with pytest.raises(AssertionError, match="Grammar.advance"):
        test_each_class_has_the_stubs_members_bases_and_signatures("Grammar")
    path.write_text(text.replace('    def build_all(self) -> None:\n        """Computes every state\'s row now, in parallel (the eager build)."""\n', ""))
    with pytest.raises(AssertionError, match="build_all"):
        test_each_class_has_the_stubs_members_bases_and_signatures("Grammar")
