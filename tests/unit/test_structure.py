"""The shape of the package and of scripts/verify_install.py (issue #24):
imports inside ``vpq`` go one way, every public function and class says what
it does, and no function runs over 60 lines."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.support.paths import REPO_ROOT

PACKAGE = REPO_ROOT / "scripts" / "vpq"
MODULES = sorted(PACKAGE.rglob("*.py"))
SOURCES = [*MODULES, REPO_ROOT / "scripts" / "verify_install.py"]
MAX_LINES = 60
#: The contract package's modules in the one order they may import each other.
CONTRACT_ORDER = ["items", "target", "drafter", "table"]
#: The sub-packages of ``vpq``, lowest first: a module imports only from its
#: own sub-package and those before it (``cli`` and ``__main__``, on top,
#: from any).
LAYERS = ["core", "contract", "checkpoints", "source", "wheels", "envs", "move", "checks"]
#: The modules outside every sub-package.
TOP = {"vpq", "vpq.cli", "vpq.__main__"}


def _module(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path, modules: set[str]) -> set[str]:
    """The ``vpq`` modules ``path`` imports, at module level or in a function
    (``from vpq.x import y`` counts as importing ``vpq.x.y`` where that is a
    module, else ``vpq.x``)."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module in modules:
            subs = {f"{node.module}.{a.name}" for a in node.names} & modules
            out |= subs or {node.module}
        elif isinstance(node, ast.Import):
            out |= {a.name for a in node.names} & modules
    return out - {_module(path)}


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle in ``graph``, or None (depth-first search)."""
    state: dict[str, int] = {}

    def visit(node: str, stack: list[str]) -> list[str] | None:
        state[node] = 1
        for dep in sorted(graph[node]):
            if state.get(dep) == 1:
                return stack[stack.index(dep) :] + [dep]
            if dep not in state and (found := visit(dep, [*stack, dep])):
                return found
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state and (found := visit(start, [start])):
            return found
    return None


def _functions(path: Path) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    tree = ast.parse(path.read_text())
    kinds = (ast.FunctionDef, ast.AsyncFunctionDef)
    return [n for n in ast.walk(tree) if isinstance(n, kinds)]


def _graph() -> dict[str, set[str]]:
    modules = {_module(p) for p in MODULES}
    return {_module(p): _imports(p, modules) for p in MODULES}


def test_imports_inside_the_package_go_one_way() -> None:
    graph = _graph()
    assert _cycle(graph) is None, f"import cycle: {' -> '.join(_cycle(graph) or [])}"


def _layer(module: str) -> int:
    """The rank of ``module``'s sub-package in ``LAYERS``; above them all for ``TOP``."""
    return len(LAYERS) if module in TOP else LAYERS.index(module.split(".")[1])


def test_every_module_but_the_command_line_sits_in_a_sub_package() -> None:
    flat = {_module(p) for p in MODULES if len(_module(p).split(".")) < 3} - TOP
    assert flat == {f"vpq.{layer}" for layer in LAYERS}


def test_sub_packages_import_only_from_those_below() -> None:
    """Across sub-packages an import goes down ``LAYERS``, never up or
    sideways, so the sub-packages' own graph has no cycle either; their
    ``__init__`` files import nothing."""
    graph = _graph()
    upward = sorted(
        f"{m} -> {dep}"
        for m, deps in graph.items()
        for dep in deps
        if _layer(dep) != _layer(m) and _layer(dep) > _layer(m)
    )
    assert upward == []
    packages = {f"vpq.{layer}" for layer in LAYERS}
    between = {
        layer: {LAYERS[_layer(d)] for m in graph if m.split(".")[1:2] == [layer] for d in graph[m]}
        - {layer}
        for layer in LAYERS
    }
    assert _cycle({k: {d for d in v if d in between} for k, v in between.items()}) is None
    assert {p: graph[p] for p in packages} == {p: set() for p in packages}


def test_the_contract_imports_items_then_target_drafter_table() -> None:
    """Each module of ``vpq.contract`` imports only those before it in
    ``CONTRACT_ORDER``; the probe and the package's ``__init__`` import none
    of them, and the contract imports no test checkpoints (``vpq.checkpoints.fixture``)."""
    graph = _graph()
    order = [f"vpq.contract.{m}" for m in CONTRACT_ORDER]
    backwards = {
        (m, dep)
        for k, m in enumerate(order)
        for dep in graph[m]
        if dep.startswith("vpq.contract") and dep not in order[:k]
    }
    assert backwards == set()
    assert graph["vpq.contract"] == graph["vpq.contract.probe"] == set()
    assert not any("vpq.checkpoints.fixture" in graph[m] for m in order)


def test_every_public_function_and_class_has_a_docstring() -> None:
    kinds = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    missing = [
        f"{path.relative_to(REPO_ROOT)}:{node.lineno} {node.name}"
        for path in SOURCES
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, kinds) and not node.name.startswith("_") and not ast.get_docstring(node)
    ]
    assert missing == []


def test_the_package_docstring_names_every_module() -> None:
    """``vpq/__init__.py`` names each module (``contract.items`` for one in
    the contract package), and each sub-package's own docstring names each
    of its modules."""
    index = (PACKAGE / "__init__.py").read_text()
    names = [_module(p).removeprefix("vpq.") for p in MODULES if p.stem != "__init__"]
    unnamed = [m for m in names if f"``{m}``" not in index]
    for layer in LAYERS:
        own = (PACKAGE / layer / "__init__.py").read_text()
        unnamed += [
            f"{layer}/{p.stem}"
            for p in (PACKAGE / layer).glob("*.py")
            if p.stem != "__init__" and f"``{p.stem}``" not in own
        ]
    assert unnamed == []


def test_no_function_runs_over_60_lines() -> None:
    long = [
        f"{path.relative_to(REPO_ROOT)}:{fn.lineno} {fn.name} ({n} lines)"
        for path in SOURCES
        for fn in _functions(path)
        if (n := (fn.end_lineno or fn.lineno) - fn.lineno + 1) > MAX_LINES
    ]
    assert long == []


def test_tarfile_comes_from_vpq_core_compat() -> None:
    """Extraction filters (``filter="data"``) need CPython 3.11.4, and
    Debian 12's stock ``python3`` is 3.11.2: every module but ``compat``
    takes ``tarfile`` from ``vpq.core.compat`` (a stdlib ``import tarfile``
    failed the peer tests there with ``unexpected keyword argument
    'filter'``)."""
    compat = PACKAGE / "core" / "compat.py"
    stdlib = []
    for path in SOURCES:
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if path != compat and "tarfile" in names:
                stdlib.append(str(path.relative_to(REPO_ROOT)))
    assert stdlib == []
