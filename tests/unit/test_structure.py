"""The shape of the package and of scripts/verify_install.py (issue #24):
imports inside ``vpq`` go one way, every public function and class says what
it does, and no function runs over 60 lines."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.conftest import REPO_ROOT

PACKAGE = REPO_ROOT / "scripts" / "vpq"
MODULES = sorted(PACKAGE.rglob("*.py"))
SOURCES = [*MODULES, REPO_ROOT / "scripts" / "verify_install.py"]
MAX_LINES = 60
#: The contract package's modules in the one order they may import each other.
CONTRACT_ORDER = ["items", "target", "drafter", "table"]


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


def test_the_contract_imports_items_then_target_drafter_table_run() -> None:
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
    the contract package), and the contract package's own docstring names
    each of its modules."""
    index = (PACKAGE / "__init__.py").read_text()
    names = [_module(p).removeprefix("vpq.") for p in MODULES if p.stem != "__init__"]
    unnamed = [m for m in names if f"``{m}``" not in index]
    contract = (PACKAGE / "contract" / "__init__.py").read_text()
    unnamed += [
        f"contract/{p.stem}"
        for p in (PACKAGE / "contract").glob("*.py")
        if p.stem != "__init__" and f"``{p.stem}``" not in contract
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
