"""The peer-test list: upstream's own tests for each file the series changes.

``peer-tests.toml`` (beside ``series``) is a reviewed choice, one table per
source file the series changes (or adds), naming the test files of the
pinned release's ``tests/`` that exercise it::

    ["vllm/v1/sample/rejection_sampler.py"]
    tests = ["tests/v1/sample/test_rejection_sampler.py"]

or, where no upstream test is worth running, why not::

    ["vllm/model_executor/models/llama4_eagle.py"]
    tests = []
    why = "..."

A ``[ci]`` table names the fast subset CI runs (node ids or their
prefixes, within the chosen files). ``peer-expected.toml`` lists the
upstream tests the series fails on purpose, each with the patch that
changes the behaviour and why::

    [[expected]]
    test = "tests/...::test_x"
    patch = "v1/....patch"
    why = "..."

``lint`` holds both to the series: a file the series changes without a
table shows up as "no peer tests chosen" until someone decides.
``candidates`` derives what to review from upstream's tests: the files that
import the module, or are named after it.
"""

from __future__ import annotations

import json
import re
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from vpq.core.errors import VpqError
from vpq.source import series

PEER_FILE = "peer-tests.toml"
EXPECTED_FILE = "peer-expected.toml"
#: The part of the tree whose changes get peer tests: the shipped package.
PACKAGE = "vllm/"
_KEYS = ("test", "patch", "why")


class PeerListError(VpqError):
    """``peer-tests.toml`` or ``peer-expected.toml`` is malformed."""


@dataclass(frozen=True)
class Expected:
    """An upstream test the series fails on purpose."""

    test: str  # a node id, or a prefix of parametrised ones (see ``selects``)
    patch: str
    why: str


@dataclass(frozen=True)
class PeerList:
    """The reviewed choice: source file -> upstream test files."""

    chosen: dict[str, tuple[str, ...]]
    why_none: dict[str, str]
    ci: tuple[str, ...]

    def test_files(self) -> list[str]:
        """Every chosen test file, once, sorted."""
        return sorted({t for tests in self.chosen.values() for t in tests})

    def sources_of(self, test_file: str) -> list[str]:
        """The source files whose peers include ``test_file``."""
        return sorted(s for s, tests in self.chosen.items() if test_file in tests)


def _read(path: Path) -> dict[str, object]:
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise PeerListError(f"{path}: not found") from None
    except tomllib.TOMLDecodeError as exc:
        raise PeerListError(f"{path}: not valid TOML ({exc})") from None


def _strings(value: object, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise PeerListError(f"{where}: must be a list of strings")
    return tuple(value)


def load(root: Path) -> PeerList:
    """Parse ``peer-tests.toml``.

    Raises:
        PeerListError: the file is missing, not TOML, or a table is malformed
            (the message names it).
    """
    path = root / PEER_FILE
    data = _read(path)
    chosen: dict[str, tuple[str, ...]] = {}
    why_none: dict[str, str] = {}
    ci: tuple[str, ...] = ()
    for key, table in data.items():
        where = f"{path}: [{json.dumps(key)}]"
        if not isinstance(table, dict):
            raise PeerListError(f"{where}: must be a table")
        if key == "ci":
            ci = _strings(table.get("tests", []), f"{where} tests")
            continue
        chosen[key] = _strings(table.get("tests"), f"{where} tests")
        why = table.get("why")
        if why is not None:
            if not isinstance(why, str):
                raise PeerListError(f"{where}: why must be a string")
            why_none[key] = why
    return PeerList(chosen, why_none, ci)


def load_expected(root: Path) -> list[Expected]:
    """Parse ``peer-expected.toml`` (no file: nothing expected).

    Raises:
        PeerListError: an entry lacks ``test``, ``patch`` or ``why``.
    """
    path = root / EXPECTED_FILE
    if not path.is_file():
        return []
    entries = _read(path).get("expected", [])
    if not isinstance(entries, list):
        raise PeerListError(f"{path}: expected must be an array of tables ([[expected]])")
    out = []
    for i, raw in enumerate(entries, start=1):
        if not isinstance(raw, dict) or not all(isinstance(raw.get(k), str) for k in _KEYS):
            raise PeerListError(f"{path}: entry {i} needs test, patch and why (strings)")
        out.append(Expected(raw["test"], raw["patch"], raw["why"]))
    return out


def changed_sources(patches: Sequence[series.Patch]) -> list[str]:
    """The package files the series changes or adds (not those it deletes)."""
    deleted = {f for p in patches for f in p.deleted_files}
    files = {f for p in patches for f in (*p.files, *p.new_files)}
    return sorted(f for f in files - deleted if f.startswith(PACKAGE))


def selects(selector: str, node: str) -> bool:
    """Whether ``selector`` picks ``node``: itself, a parametrisation or a child."""
    if "[" in selector and not selector.endswith("]"):
        return node.startswith(selector)
    return node == selector or node.startswith((selector + "[", selector + "::"))


def _lint_tables(path: Path, pl: PeerList, sources: list[str]) -> list[str]:
    problems = [
        f"{path}: {s}: no peer tests chosen (add tests = [...], or tests = [] with a why; "
        "`python -m vpq peer-tests --candidates` lists upstream's)"
        for s in sources
        if s not in pl.chosen
    ]
    problems += [f"{path}: [{json.dumps(s)}]: the series does not change this file"
                 for s in pl.chosen if s not in sources]  # fmt: skip
    for s, tests in pl.chosen.items():
        if not tests and not pl.why_none.get(s, "").strip():
            problems.append(f"{path}: [{json.dumps(s)}]: tests = [] needs a why")
        problems += [
            f"{path}: [{json.dumps(s)}]: {t!r} is not a test file under tests/"
            for t in tests
            if not re.fullmatch(r"tests/[\w/.-]+\.py", t)
        ]
    files = set(pl.test_files())
    problems += [
        f"{path}: [ci]: {c!r} is in no chosen test file"
        for c in pl.ci
        if c.split("::", 1)[0] not in files
    ]
    return problems


def _lint_expected(root: Path, pl: PeerList, names: list[str]) -> list[str]:
    path = root / EXPECTED_FILE
    try:
        expected = load_expected(root)
    except PeerListError as exc:
        return [str(exc)]
    problems = []
    files = set(pl.test_files())
    for e in expected:
        if e.patch not in names:
            problems.append(f"{path}: {e.test}: patch {e.patch} is not in series")
        if e.test.split("::", 1)[0] not in files:
            problems.append(f"{path}: {e.test}: not in a chosen peer test file")
        if not e.why.strip():
            problems.append(f"{path}: {e.test}: needs a why")
    return problems


def lint(root: Path, patches: Sequence[series.Patch] | None = None) -> list[str]:
    """Problems with ``peer-tests.toml`` and ``peer-expected.toml`` against
    the series (``patches``, parsed; default: read from ``root``), one line
    each; empty when both hold."""
    try:
        pl = load(root)
        patches = series.load(root) if patches is None else patches
    except VpqError as exc:
        return [str(exc)]
    problems = _lint_tables(root / PEER_FILE, pl, changed_sources(patches))
    return problems + _lint_expected(root, pl, [p.name for p in patches])


def _module(source: str) -> str:
    """``vllm/a/b.py`` -> ``vllm.a.b``; a package's ``__init__.py`` -> the package."""
    return source.removesuffix(".py").removesuffix("/__init__").replace("/", ".")


def candidates(tests_root: Path, source: str) -> list[str]:
    """Upstream test files (``tests/...``, under ``tests_root``'s parent) that
    import ``source``'s module, or are named ``test_<module>*.py``."""
    mod = _module(source)
    parent, leaf = mod.rsplit(".", 1)
    imports = re.compile(
        rf"(?:\bimport {re.escape(mod)}\b|\bfrom {re.escape(mod)} import"
        rf"|\bfrom {re.escape(parent)} import [^\n]*\b{re.escape(leaf)}\b)"
    )
    out = []
    for f in sorted(tests_root.rglob("test_*.py")):
        named = f.name.startswith(f"test_{leaf}")
        if named or imports.search(f.read_text(encoding="utf-8", errors="replace")):
            out.append(f.relative_to(tests_root.parent).as_posix())
    return out
