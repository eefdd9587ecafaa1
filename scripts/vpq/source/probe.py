"""Absorption probes: each patch's behaviour, checked on an unpatched upstream.

The textual signals of a rebase (the patch became *empty*, it
*reverse-applies*) and the EAGLE-3 contract say nothing about most of what
the series carries: a parser rewrite or a drafter class conflicts textually
on a release that already behaves the same, and lands on a person. A probe
is the patch's behaviour as tests (pytest node ids from this repository's
``tests/semantics`` and ``tests/parsers``, which run inside an interpreter
that imports the vLLM under test) and/or as EAGLE-3 contract items (labels
of ``vpq.contract.table``, e.g. ``config.media_placeholder_token_id``,
wherever upstream moved the code that reads them). When every test a
patch's probe selects passes and every item it names holds on the
*unpatched* target release, upstream has the behaviour and the patch is
absorbed, whatever the textual result.

``probes.toml`` (beside ``series``) names one probe per patch::

    ["model_executor/models/deepseek_eagle3-keep-rope_theta.patch"]
    tests = ["tests/semantics/test_mla_drafter.py::test_mla_drafter_keeps_rope_theta"]
    exclude = []          # optional: node ids (or their prefixes) left out
    contract = []         # optional: contract item labels that must hold

or says why the existing signals cover it::

    ["model_executor/models/deepseek_v2-import-SupportsEagle3.patch"]
    covered-by = "contract"
    why = "..."

A selector matches the node id itself, its parametrisations (``id[...]``)
and, for a file or class, everything under it (``id::...``); one with an
open bracket (``id[case-``) matches the parametrisations starting so.
"""

from __future__ import annotations

import ast
import json
import tomllib
from dataclasses import dataclass
from pathlib import Path

from vpq.core.errors import VpqError

PROBES_FILE = "probes.toml"
#: What ``covered-by`` may name: signals the rebase evaluates anyway.
COVERED_BY = ("contract",)
#: What a verdict says when some of its tests skipped: they test nothing there.
NOT_PROBING = "not probing"


class ProbeError(VpqError):
    """``probes.toml`` is malformed, or the probe run could not report."""


@dataclass(frozen=True)
class Probe:
    """One patch's probe: the tests it selects, or the signal covering it."""

    patch: str
    tests: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    contract: tuple[str, ...] = ()
    covered_by: str | None = None
    why: str = ""


def _entry(path: Path, name: str, raw: object) -> Probe:
    """One table of ``probes.toml`` as a ``Probe``.

    Raises:
        ProbeError: naming the file, the patch and the key that is wrong.
    """
    where = f"{path}: [{json.dumps(name)}]"
    if not isinstance(raw, dict):
        raise ProbeError(f"{where} is not a table")
    unknown = sorted(set(raw) - {"tests", "exclude", "contract", "covered-by", "why"})
    if unknown:
        raise ProbeError(f"{where}: unknown key(s) {', '.join(unknown)}")
    lists = {k: raw.get(k, []) for k in ("tests", "exclude", "contract")}
    for key, value in lists.items():
        if not (isinstance(value, list) and all(isinstance(v, str) and v for v in value)):
            raise ProbeError(f"{where}: {key} must be a list of non-empty strings")
    covered, why = raw.get("covered-by"), raw.get("why", "")
    if bool(lists["tests"] or lists["contract"]) == bool(covered):
        raise ProbeError(
            f"{where}: give tests = [...] and/or contract = [...], or covered-by = ... "
            "(not both, not neither)"
        )
    if covered is not None and (covered not in COVERED_BY or not str(why).strip()):
        raise ProbeError(
            f"{where}: covered-by must be one of {', '.join(COVERED_BY)}, with a why = "
            "saying how that signal shows the patch's behaviour"
        )
    return Probe(
        name,
        tuple(lists["tests"]),
        tuple(lists["exclude"]),
        tuple(lists["contract"]),
        covered,
        str(why),
    )


def load(root: Path) -> dict[str, Probe]:
    """``<root>/probes.toml`` by patch name; empty when the file is absent.

    Raises:
        ProbeError: the file is not TOML or an entry is malformed.
    """
    path = root / PROBES_FILE
    if not path.is_file():
        return {}
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ProbeError(f"{path}: not valid TOML: {exc}") from None
    return {name: _entry(path, name, raw) for name, raw in data.items()}


def _defined(root: Path, node: str) -> bool:
    """Whether ``node`` (``file.py[::Class]::func``, parameters dropped)
    names a file of the repository and a function or class defined in it."""
    parts = node.split("[", 1)[0].split("::")
    path = root / parts[0]
    if not path.is_file():
        return False
    body: list[ast.stmt] = ast.parse(path.read_text()).body
    for name in parts[1:]:
        found = [
            n
            for n in body
            if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
            and n.name == name
        ]
        if not found:
            return False
        body = found[0].body if isinstance(found[0], ast.ClassDef) else []
    return True


def lint(root: Path, patch_names: list[str]) -> list[str]:
    """Problems with ``probes.toml`` against the series, one line each.

    Every patch needs a probe (or a ``covered-by``), no probe may name a
    patch outside the series, and every selector must name a test that is
    defined in this repository.
    """
    path = root / PROBES_FILE
    try:
        probes = load(root)
    except ProbeError as exc:
        return [str(exc)]
    problems = [
        f"{path}: patches/{n} has no probe (add tests = [...] or covered-by = ... with a why)"
        for n in patch_names
        if n not in probes
    ]
    problems += [
        f"{path}: [{json.dumps(n)}] names a patch that is not in series" for n in probes
        if n not in patch_names
    ]  # fmt: skip
    for p in probes.values():
        problems += [
            f"{path}: [{json.dumps(p.patch)}] names {t!r}, which is not a test defined in "
            "this repository"
            for t in p.tests + p.exclude
            if not _defined(root, t)
        ]
    return problems


def _selects(selector: str, node: str) -> bool:
    """Whether ``selector`` picks ``node``: itself, a parametrisation, or a
    child; a selector with an open ``[`` (``test_x[case-``) picks the
    parametrisations whose ids start so."""
    if "[" in selector and not selector.endswith("]"):
        return node.startswith(selector)
    return node == selector or node.startswith((selector + "[", selector + "::"))


def selects(probe: Probe, node: str) -> bool:
    """Whether ``probe`` picks the test ``node``: one of its selectors does
    and none of its excludes."""
    return any(_selects(s, node) for s in probe.tests) and not any(
        _selects(s, node) for s in probe.exclude
    )


def verdict(probe: Probe, outcomes: dict[str, str]) -> tuple[bool, str]:
    """``(absorbed, what the probe saw)`` from one run's outcomes (node id ->
    passed | failed | skipped | error). Absorbed only when the probe selected
    at least one test and every selected test passed; a selected test that
    skipped is reported as ``NOT_PROBING`` (``vpq.move.staircase.probe_flags`` flags
    it)."""
    picked = {n: o for n, o in outcomes.items() if selects(probe, n)}
    broken = sorted(n for n, o in outcomes.items() if o == "error" and "::" not in n)
    for node in broken:  # a file that did not collect
        if any(s.startswith(node + "::") or s == node for s in probe.tests):
            return False, f"probe: {node} did not collect"
    if not picked:
        return False, "probe ran no test"
    bad = sorted(n for n, o in picked.items() if o != "passed")
    if not bad:
        return True, f"probe: {len(picked)} of {len(picked)} passed"
    skipped = sorted(n for n, o in picked.items() if o == "skipped")
    text = f"probe: {len(bad)} of {len(picked)} not passed (first: {bad[0]})"
    if skipped:  # a skip decides nothing: the probe does not probe there
        text += f"; {NOT_PROBING}: {len(skipped)} skipped (first: {skipped[0]})"
    return False, text


HEADER = """\
# Absorption probes, one per patch in series (see scripts/vpq/source/probe.py).
# tests: pytest node ids that pass on an upstream release that already has
# the patch's behaviour (run unpatched there by nox -s rebase_upstream);
# covered-by: the existing signal that shows it, with why.
"""


def _table(p: Probe) -> dict[str, object]:
    """The ``probes.toml`` table of one probe (keys as ``_entry`` reads them)."""
    if p.covered_by:
        return {"covered-by": p.covered_by, "why": p.why}
    keys = {"tests": p.tests, "exclude": p.exclude, "contract": p.contract}
    return {k: list(v) for k, v in keys.items() if v}


def dumps(probes: list[Probe]) -> bytes:
    """``probes.toml``'s bytes for ``probes``, in the order given."""
    import tomli_w  # the tool's own dependency; the probe plugin side never imports this

    return (HEADER + "\n" + tomli_w.dumps({p.patch: _table(p) for p in probes})).encode()


def keep_only(root: Path, names: list[str]) -> bytes | None:
    """``probes.toml``'s new bytes after a rebase that kept the patches
    ``names`` (in series order), or None when there is no such file."""
    if not (root / PROBES_FILE).is_file():
        return None
    probes = load(root)
    kept = _kept_text((root / PROBES_FILE).read_text(encoding="utf-8"), set(names))
    if set(tomllib.loads(kept)) == set(probes) & set(names):
        return kept.encode()
    return dumps([probes[n] for n in names if n in probes])


def _kept_text(text: str, names: set[str]) -> str:
    """``text`` (a ``probes.toml``) without the tables of patches outside
    ``names``; everything else, comments and layout included, keeps its
    bytes, so a rebase that drops nothing rewrites nothing."""
    blocks: list[tuple[str | None, list[str]]] = [(None, [])]
    for line in text.splitlines(keepends=True):
        if line.startswith('["') and line.rstrip().endswith('"]'):
            blocks.append((line.strip()[2:-2], []))
        blocks[-1][1].append(line)
    return "".join("".join(lines) for name, lines in blocks if name is None or name in names)
