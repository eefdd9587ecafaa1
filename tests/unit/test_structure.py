"""The shape of the package and of scripts/verify_install.py (issue #24):
imports inside ``vpq`` go one way, every public function and class says what
it does, and no function runs over 60 lines."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.conftest import REPO_ROOT

PACKAGE = REPO_ROOT / "scripts" / "vpq"
SOURCES = [*sorted(PACKAGE.glob("*.py")), REPO_ROOT / "scripts" / "verify_install.py"]
MAX_LINES = 60


def _module(path: Path) -> str:
    return "vpq" if path.stem == "__init__" else f"vpq.{path.stem}"


def _imports(path: Path, modules: set[str]) -> set[str]:
    """The ``vpq`` modules ``path`` imports, at module level or in a function."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module == "vpq":
            out |= {f"vpq.{a.name}" for a in node.names} & modules
        elif isinstance(node, ast.ImportFrom) and node.module in modules:
            out.add(node.module)
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


def test_imports_inside_the_package_go_one_way() -> None:
    paths = sorted(PACKAGE.glob("*.py"))
    modules = {_module(p) for p in paths}
    graph = {_module(p): _imports(p, modules) for p in paths}
    assert _cycle(graph) is None, f"import cycle: {' -> '.join(_cycle(graph) or [])}"


def test_every_public_function_and_class_has_a_docstring() -> None:
    kinds = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    missing = [
        f"{path.relative_to(REPO_ROOT)}:{node.lineno} {node.name}"
        for path in SOURCES
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, kinds) and not node.name.startswith("_")
        and not ast.get_docstring(node)
    ]
    assert missing == []


def test_the_package_docstring_names_every_module() -> None:
    index = (PACKAGE / "__init__.py").read_text()
    unnamed = [p.stem for p in PACKAGE.glob("*.py") if p.stem != "__init__"]
    unnamed = [m for m in unnamed if f"``{m}``" not in index]
    assert unnamed == []


def test_no_function_runs_over_60_lines() -> None:
    long = [
        f"{path.relative_to(REPO_ROOT)}:{fn.lineno} {fn.name} ({n} lines)"
        for path in SOURCES
        for fn in _functions(path)
        if (n := (fn.end_lineno or fn.lineno) - fn.lineno + 1) > MAX_LINES
    ]
    assert long == []
