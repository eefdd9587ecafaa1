"""scripts/verify_install.py as a file: one standard-library script that a
serving host copies, with short functions that have docstrings."""

from __future__ import annotations

import ast
import sys

from tests.conftest import REPO_ROOT

SCRIPT = REPO_ROOT / "scripts" / "verify_install.py"
TREE = ast.parse(SCRIPT.read_text(encoding="utf-8"))
#: Imported only inside the functions that ask the installed vLLM.
SERVING_HOST_PACKAGES = {"vllm", "transformers"}


def _lengths() -> dict[str, int]:
    """Each function's name and its length in lines, docstring included."""
    return {
        n.name: (n.end_lineno or n.lineno) - n.lineno + 1
        for n in ast.walk(TREE)
        if isinstance(n, ast.FunctionDef)
    }


def test_no_function_in_the_script_runs_over_60_lines() -> None:
    long = {name: n for name, n in _lengths().items() if n > 60}
    assert long == {}, long


def test_every_public_function_and_class_has_a_docstring() -> None:
    nodes = [n for n in ast.walk(TREE) if isinstance(n, ast.FunctionDef | ast.ClassDef)]
    bare = [n.name for n in nodes if not n.name.startswith("_") and not ast.get_docstring(n)]
    assert bare == []


def test_the_script_needs_only_the_standard_library() -> None:
    """At module level only the standard library; vLLM and transformers only
    inside the functions that ask the installed vLLM."""
    top: set[str] = set()
    inner: set[str] = set()
    for node in ast.walk(TREE):
        if isinstance(node, ast.Import):
            names = {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = {node.module.split(".")[0]}
        else:
            continue
        (top if node.col_offset == 0 else inner).update(names)
    assert top - set(sys.stdlib_module_names) == set()
    assert inner - set(sys.stdlib_module_names) <= SERVING_HOST_PACKAGES
