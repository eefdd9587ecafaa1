"""The shape of tests/ (issue #39): each tier is a folder that imports only
its own modules and ``tests/support``, the one package of test code the
tiers share; a ``conftest.py`` holds its tier's fixtures and hooks and is
imported by nobody; a test module (``test_*.py``) is imported by nobody
either: what two test modules share is a helper module of their tier
(``tests/unit/cli.py``, ``tests/engine/cases.py``, ...); ``tests/support``
imports no tier.
An exception is named in ``EXCEPTIONS`` with its reason, and must still be
needed."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.support.paths import REPO_ROOT

TESTS = REPO_ROOT / "tests"
#: The package every tier may import.
SHARED = "support"
#: What is under tests/ but is not test code: reference files written by
#: other tools (``generate.py`` runs the speculators library, never pytest).
NOT_TEST_CODE = {"data"}
#: The modules that may sit at the top of tests/: pytest's root conftest and
#: the package marker. Shared helpers go to tests/support.
TOP_LEVEL = {"conftest.py", "__init__.py"}
#: (importing file, imported module) -> why the import crosses a tier or
#: imports a test module.
EXCEPTIONS = {
    ("tests/unit/test_gpu_assertions.py", f"tests.gpu.{name}"): (
        "the unit tier runs the GPU tier's own test functions on CPU, fed "
        "engine results shaped like engine_probe.py's (a GPU runs them for "
        "real); copying their assertions into tests/support would test a copy"
    )
    for name in ("test_eagle3_engine", "test_eagle3_heads", "test_eagle3_serving_fixes")
}


def _imports(path: Path, root: Path) -> list[tuple[int, str]]:
    """(line, module) for every import in ``path``, at any depth, relative
    imports resolved against ``path``'s package; ``from pkg import name``
    gives ``pkg.name`` (``name`` may be a module)."""
    package = list(path.relative_to(root).parent.parts)
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            module = ".".join([*base, *(node.module.split(".") if node.module else [])])
            out += [(node.lineno, f"{module}.{a.name}".lstrip(".")) for a in node.names]
    return sorted(out)


def violations(root: Path, exceptions: dict[tuple[str, str], str]) -> list[str]:
    """Every import under ``root``/tests that breaks the rules, one line each
    (``file:line: imports module: why not``), and every exception no longer
    needed; ``root`` is a checkout's root."""
    tests = root / "tests"
    out, used = [], set()
    for path in sorted(tests.rglob("*.py")):
        rel = path.relative_to(tests)
        if rel.parts[0] in NOT_TEST_CODE or "__pycache__" in rel.parts:
            continue
        name = path.relative_to(root).as_posix()
        if len(rel.parts) == 1:
            if rel.name not in TOP_LEVEL:
                out.append(f"{name}: shared test code goes to tests/{SHARED}/")
            continue
        tier = rel.parts[0]
        for line, module in _imports(path, root):
            parts = module.split(".")
            if "conftest" in parts:
                why = "a conftest.py holds fixtures and hooks; import helpers from a module"
            elif parts[0] == "tests" and any(p.startswith("test_") for p in parts[1:3]):
                why = "a test module: its helpers go to a helper module"
            elif parts[0] != "tests" or len(parts) < 2 or parts[1] in (tier, SHARED):
                continue
            elif tier == SHARED:
                why = f"tests/{SHARED} is shared by every tier and imports none"
            else:
                why = f"outside tests/{tier}: share it through tests/{SHARED}"
            key = (name, ".".join(parts[:3]))
            if key in exceptions:
                used.add(key)
                continue
            out.append(f"{name}:{line}: imports {module}: {why}")
    out += [f"{f}: exception for {m} no longer needed" for f, m in sorted(set(exceptions) - used)]
    return out


def test_tiers_import_only_their_own_modules_and_tests_support() -> None:
    assert violations(REPO_ROOT, EXCEPTIONS) == []


def test_every_exception_says_why() -> None:
    assert all(len(why.split()) >= 8 for why in EXCEPTIONS.values()), EXCEPTIONS


def _tree(tmp: Path, files: dict[str, str]) -> Path:
    for name, text in {"tests/__init__.py": "", **files}.items():
        (tmp / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp / name).write_text(text)
    return tmp


def test_each_kind_of_crossing_is_named_with_its_file_and_line(tmp_path: Path) -> None:
    root = _tree(
        tmp_path,
        {
            "tests/conftest.py": "",
            "tests/helpers.py": "X = 1\n",
            "tests/support/__init__.py": "",
            "tests/support/shared.py": "from tests.unit import cases\n",
            "tests/unit/__init__.py": "",
            "tests/unit/cases.py": "from tests.support import shared\nfrom tests.unit import x\n",
            "tests/unit/test_a.py": (
                "from tests.engine.cases import PROMPTS\n"
                "from tests.conftest import REPO_ROOT\n"
                "def f():\n    from .conftest import thing\n"
                "import tests.gpu.conftest\n"
                "from tests import heads\n"
            ),
            "tests/engine/test_b.py": "from tests.unit.test_a import f\n",
            "tests/engine/test_c.py": "from tests.engine import test_b\n",
            "tests/data/tool/generate.py": "from tests.unit import anything\n",
        },
    )
    assert violations(root, {}) == [
        "tests/engine/test_b.py:1: imports tests.unit.test_a.f: a test module: "
        "its helpers go to a helper module",
        "tests/engine/test_c.py:1: imports tests.engine.test_b: a test module: "
        "its helpers go to a helper module",
        "tests/helpers.py: shared test code goes to tests/support/",
        "tests/support/shared.py:1: imports tests.unit.cases: tests/support is shared by "
        "every tier and imports none",
        "tests/unit/test_a.py:1: imports tests.engine.cases.PROMPTS: outside tests/unit: "
        "share it through tests/support",
        "tests/unit/test_a.py:2: imports tests.conftest.REPO_ROOT: a conftest.py holds "
        "fixtures and hooks; import helpers from a module",
        "tests/unit/test_a.py:4: imports tests.unit.conftest.thing: a conftest.py holds "
        "fixtures and hooks; import helpers from a module",
        "tests/unit/test_a.py:5: imports tests.gpu.conftest: a conftest.py holds "
        "fixtures and hooks; import helpers from a module",
        "tests/unit/test_a.py:6: imports tests.heads: outside tests/unit: "
        "share it through tests/support",
    ]


def test_an_exception_covers_its_import_and_a_stale_one_is_named(tmp_path: Path) -> None:
    root = _tree(
        tmp_path,
        {"tests/unit/test_a.py": "from tests.gpu import test_x as gx\n"},
    )
    why = "the reason"
    assert violations(root, {("tests/unit/test_a.py", "tests.gpu.test_x"): why}) == []
    assert violations(root, {("tests/unit/test_b.py", "tests.gpu.test_y"): why}) == [
        "tests/unit/test_a.py:1: imports tests.gpu.test_x: a test module: "
        "its helpers go to a helper module",
        "tests/unit/test_b.py: exception for tests.gpu.test_y no longer needed",
    ]
