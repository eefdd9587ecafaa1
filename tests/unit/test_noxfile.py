"""The nox sessions never build the tool in the checkout: a setuptools build
writes build/lib and build/bdist.* next to build/work, and two sessions at
once raced on it ("Failed to build installable wheels ... vpq")."""

from __future__ import annotations

import ast

from tests.support.paths import REPO_ROOT


def _install_args(tree: ast.AST) -> list[ast.expr]:
    return [
        arg
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "install"
        for arg in node.args
    ]


def test_no_session_installs_the_checkout_itself() -> None:
    tree = ast.parse((REPO_ROOT / "noxfile.py").read_text())
    args = _install_args(tree)
    assert args, "the sessions install the tool's dependencies somewhere"
    for arg in args:
        if isinstance(arg, ast.Starred):
            continue  # *DEPS, *extra: requirement strings from pyproject.toml / the session
        assert not (
            isinstance(arg, ast.Constant) and str(arg.value).rstrip("/") in (".", str(REPO_ROOT))
        ), ast.dump(arg)
        assert not isinstance(arg, ast.Name), f"install({arg.id}) may be the checkout"  # type: ignore[attr-defined]
