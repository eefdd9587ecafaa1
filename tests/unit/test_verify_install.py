"""scripts/verify_install.py as a file: one standard-library script that a
serving host copies, with the claimed architectures it knows held equal to
the repository's one table (``vpq.contract.items.CLAIMS``). Its function lengths
and docstrings are held by tests/unit/test_structure.py, with the package's."""

from __future__ import annotations

import ast
import sys

import verify_install as vi
from vpq import build
from vpq.contract import items as contract_items

from tests.conftest import REPO_ROOT

SCRIPT = REPO_ROOT / "scripts" / "verify_install.py"
TREE = ast.parse(SCRIPT.read_text(encoding="utf-8"))
#: Imported only inside the functions that ask the installed vLLM.
SERVING_HOST_PACKAGES = {"vllm", "transformers"}


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


def test_the_script_knows_exactly_the_architectures_the_build_claims() -> None:
    """The manifest's ``eagle3_architectures`` (``build.CLAIMED_ARCHITECTURES``)
    are what ``verify_install.py`` checks on a serving host: a new claim
    without its module there would first fail on the host."""
    assert list(vi.MODULES) == list(contract_items.CLAIMS) == list(build.CLAIMED_ARCHITECTURES)
    assert vi.MODULES == {a: c.module for a, c in contract_items.CLAIMS.items()}


def test_the_preflight_finds_each_claimed_text_model_by_its_model_type() -> None:
    """``TEXT_ARCHS`` (a ``text_config`` without architectures) names, for
    each claimed text model_type, the claimed architecture of that type."""
    text_types = {c.text_model_type for c in contract_items.CLAIMS.values()}
    assert set(vi.TEXT_ARCHS) == text_types
    for model_type, arch in vi.TEXT_ARCHS.items():
        assert contract_items.CLAIMS[arch].model_type == model_type
