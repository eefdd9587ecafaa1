"""The EAGLE-3 contract: what vLLM's runner and proposer use on the target
model, discovered from the source, and checked on the model classes.

Discovery is pure ``ast`` over two files of a vLLM tree:

- ``vllm/v1/worker/gpu_model_runner.py``: inside every ``if`` whose test
  mentions the aux-hidden-state / EAGLE-3 switch (e.g.
  ``self.use_aux_hidden_state_outputs``), each ``supports_*(...)`` interface
  check and each ``self.model.<name>(...)`` / ``self.get_model().<name>(...)``
  call;
- ``vllm/config/speculative.py``: the allowlist of target text model types
  that the EAGLE-3 gate checks (a list of strings used in an ``if`` that
  tests for ``"eagle3"``);
- ``vllm/v1/spec_decode/eagle.py``: in every ``load_model(self,
  target_model)``, each ``target_model.config.<attr>`` read and each method
  called on ``target_model`` (``cast(..., target_model).get_language_model()``
  included), together with the branch conditions that lead to it:
  ``supports_*(target_model)`` and ``self.get_model_name(target_model) ==
  "..."`` / ``in [...]`` are recorded as predicates, so the check follows
  the branch that really applies to each architecture.

Nothing is hard-coded about *which* calls exist: a newer runner that calls
something new on the model shows up as a new row.

Checking needs the classes, so it runs inside a venv with the wheel
installed: ``contract_probe.py`` (standard library + vLLM only) evaluates each
item for each claimed architecture as ``ok``, ``missing``, ``stub`` (a
``Protocol`` method whose body is only ``...``/docstring) or ``n/a`` (its
branch does not apply).
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from vpq import contract_drafter
from vpq.contract_items import (
    CLAIMED,
    CLAIMS,
    PROPOSER,
    REGISTRY,
    RUNNER,
    RUNNER_V2,
    SPECULATIVE,
    TEXT_MODEL_TYPES,
    Claim,
    ContractError,
    Item,
    imported_functions,
)
from vpq.errors import VpqError
from vpq.proc import tagged_json

__all__ = [
    "CLAIMED",
    "CLAIMS",
    "PROPOSER",
    "REGISTRY",
    "RUNNER",
    "RUNNER_V2",
    "SPECULATIVE",
    "TEXT_MODEL_TYPES",
    "Claim",
    "ContractError",
    "Item",
]

PROBE = Path(__file__).with_name("contract_probe.py")
#: Seconds the contract probe may take (it imports vLLM in a CPU venv).
PROBE_TIMEOUT_S = 900
_MARKERS = ("aux_hidden_state", "eagle3")


def _mentions(node: ast.AST) -> bool:
    for sub in ast.walk(node):
        text = (
            sub.id
            if isinstance(sub, ast.Name)
            else sub.attr
            if isinstance(sub, ast.Attribute)
            else ""
        )
        if any(m in text.lower() for m in _MARKERS):
            return True
    return False


def _is_self_model(node: ast.AST) -> bool:
    """``self.model`` or ``self.get_model()``."""
    if isinstance(node, ast.Attribute) and node.attr == "model":
        return isinstance(node.value, ast.Name) and node.value.id == "self"
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        return (
            node.func.attr == "get_model"
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id == "self"
        )
    return False


def _model_ref(node: ast.AST, names: set[str]) -> bool:
    """The target model: ``self.model``, ``self.get_model()``, a name bound
    to it in this function (a parameter or an alias), or ``cast(T, <those>)``."""
    if _is_self_model(node):
        return True
    if isinstance(node, ast.Name):
        return node.id in names
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "cast":
        return len(node.args) == 2 and _model_ref(node.args[1], names)
    return False


def _eagle3_check(test: ast.expr, names: set[str]) -> ast.Call | None:
    """The ``supports_*(model)`` call in an EAGLE-3 ``if`` test, or None."""
    if not _mentions(test):
        return None
    for sub in ast.walk(test):
        if (
            isinstance(sub, ast.Call)
            and isinstance(sub.func, ast.Name)
            and sub.func.id.startswith("supports_")
            and sub.args
            and _model_ref(sub.args[0], names)
        ):
            return sub
    return None


def _child_blocks(stmt: ast.stmt) -> list[list[ast.stmt]]:
    blocks = [
        getattr(stmt, f)
        for f in ("body", "orelse", "finalbody")
        if isinstance(getattr(stmt, f, None), list)
    ]
    return blocks + [h.body for h in getattr(stmt, "handlers", [])]


class _RunnerDiscovery:
    """Follows the EAGLE-3 path of a model runner: ``supports_*`` checks on
    the target model and the calls they guard (the ``if`` body, or, for a
    guard clause ``if not supports_x(m): raise``, the statements after it),
    through helper functions in other modules that receive the model."""

    def __init__(self, read: Callable[[str], str] | None) -> None:
        self.read = read
        self.items: list[Item] = []
        self.followed: list[str] = []  # "path:function" of every function scanned

    def module(self, source: str, path: str) -> None:
        """Scan every function of a runner module (the model is ``self.model``)."""
        tree = ast.parse(source)
        imports = imported_functions(tree)
        for fn in ast.walk(tree):
            if isinstance(fn, ast.FunctionDef):
                self.function(fn, path, set(), imports)

    def function(
        self, fn: ast.FunctionDef, path: str, names: set[str], imports: dict[str, str]
    ) -> None:
        """Scan one function with ``names`` bound to the model."""
        self.followed.append(f"{path}:{fn.name}")
        names = names | _aliases(fn, names)
        self.block(fn.body, path, names, imports)
        for call in ast.walk(fn):
            if (
                isinstance(call, ast.Call)
                and isinstance(call.func, ast.Name)
                and call.func.id in imports
            ):
                index = next((k for k, a in enumerate(call.args) if _model_ref(a, names)), None)
                if index is not None:
                    self.helper(imports[call.func.id], call.func.id, index)

    def helper(self, module: str, name: str, index: int) -> None:
        """Follow a call that hands the model to ``name`` in ``module``."""
        path = module.replace(".", "/") + ".py"
        if self.read is None or f"{path}:{name}" in self.followed:
            return
        try:
            tree = ast.parse(self.read(path))
        except (OSError, KeyError, VpqError, SyntaxError):
            return
        for fn in tree.body:
            if isinstance(fn, ast.FunctionDef) and fn.name == name and index < len(fn.args.args):
                self.function(fn, path, {fn.args.args[index].arg}, imported_functions(tree))

    def block(
        self, stmts: list[ast.stmt], path: str, names: set[str], imports: dict[str, str]
    ) -> None:
        """Find EAGLE-3 checks in a statement list and the calls they guard."""
        for k, stmt in enumerate(stmts):
            if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                continue  # scanned on its own
            check = _eagle3_check(stmt.test, names) if isinstance(stmt, ast.If) else None
            if check is None:
                for child in _child_blocks(stmt):
                    self.block(child, path, names, imports)
                continue
            assert isinstance(check.func, ast.Name) and isinstance(stmt, ast.If)
            self.items.append(Item("interface", check.func.id, f"{path}:{check.lineno}"))
            guard = isinstance(stmt.test, ast.UnaryOp) and isinstance(stmt.test.op, ast.Not)
            self.items += _model_calls(stmts[k + 1 :] if guard else stmt.body, path, names)
            if guard:
                return


def _aliases(fn: ast.FunctionDef, names: set[str]) -> set[str]:
    """Names assigned the model in ``fn`` (``m = cast(P, model)``, ``m = model``)."""
    return {
        t.id
        for node in ast.walk(fn)
        if isinstance(node, ast.Assign) and _model_ref(node.value, names)
        for t in node.targets
        if isinstance(t, ast.Name)
    }


def _model_calls(stmts: list[ast.stmt], path: str, names: set[str]) -> list[Item]:
    """``<model>.<method>(...)`` calls in ``stmts``, in source order."""
    calls = [
        sub
        for stmt in stmts
        for sub in ast.walk(stmt)
        if isinstance(sub, ast.Call)
        and isinstance(sub.func, ast.Attribute)
        and _model_ref(sub.func.value, names)
        and sub.func.attr != "get_model"
    ]
    calls.sort(key=lambda c: (c.lineno, c.col_offset))
    return [Item("method", c.func.attr, f"{path}:{c.lineno}") for c in calls]  # type: ignore[attr-defined]


def discover_runner(
    source: str,
    path: str = RUNNER,
    read: Callable[[str], str] | None = None,
    *,
    required: bool = True,
) -> list[Item]:
    """Interface checks and model calls on a runner's EAGLE-3 code paths,
    following helpers in other modules (read with ``read``) that receive
    the model. With ``required=False`` (the opt-in runner, which before
    0.17 sets no EAGLE-3 layers at all) a runner without a check gives no
    items instead of an error.

    Raises:
        ContractError: the runner mentions the EAGLE-3 path but no
            ``supports_*`` check was found on it; the message names the
            functions that mention it, where discovery lost the path.
    """
    d = _RunnerDiscovery(read)
    d.module(source, path)
    if required and not any(i.kind == "interface" for i in d.items):
        tree = ast.parse(source)
        lost = [
            f"{fn.name} ({path}:{fn.lineno})"
            for fn in ast.walk(tree)
            if isinstance(fn, ast.FunctionDef) and _mentions(fn)
        ]
        helpers = sorted({f for f in d.followed if not f.startswith(path + ":")})
        raise ContractError(
            f"{path}: found no supports_*() check on an EAGLE-3 code path. Discovery lost the "
            f"path in {', '.join(lost) or 'every function (none mentions the EAGLE-3 markers)'}"
            + (f"; helpers followed: {', '.join(helpers)}" if helpers else "")
            + ". The runner changed shape there and the contract discovery needs a look."
        )
    return d.items


def _refers_to_target(node: ast.AST, target: str) -> bool:
    """``target`` itself, or ``cast(T, target)``."""
    if isinstance(node, ast.Name):
        return node.id == target
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "cast":
        return len(node.args) == 2 and _refers_to_target(node.args[1], target)
    return False


def _predicate(test: ast.expr, target: str) -> dict[str, object]:
    if (
        isinstance(test, ast.Call)
        and isinstance(test.func, ast.Name)
        and test.func.id.startswith("supports_")
        and test.args
        and _refers_to_target(test.args[0], target)
    ):
        return {"kind": "interface", "name": test.func.id}
    if isinstance(test, ast.Compare) and len(test.ops) == 1:
        left, op, right = test.left, test.ops[0], test.comparators[0]
        is_name_of_target = (
            isinstance(left, ast.Call)
            and isinstance(left.func, ast.Attribute)
            and left.func.attr == "get_model_name"
            and left.args
            and _refers_to_target(left.args[0], target)
        )
        if is_name_of_target:
            if (
                isinstance(op, ast.Eq)
                and isinstance(right, ast.Constant)
                and isinstance(right.value, str)
            ):
                return {"kind": "arch_in", "names": [right.value]}
            if isinstance(op, ast.In) and isinstance(right, ast.List | ast.Tuple | ast.Set):
                names = [
                    e.value
                    for e in right.elts
                    if isinstance(e, ast.Constant) and isinstance(e.value, str)
                ]
                if len(names) == len(right.elts):
                    return {"kind": "arch_in", "names": names}
    return {"kind": "unknown", "text": ast.unparse(test)}


class _ProposerVisitor(ast.NodeVisitor):
    def __init__(self, path: str, target: str) -> None:
        self.path, self.target = path, target
        self.guards: list[dict[str, object]] = []
        self.items: list[Item] = []

    def visit_If(self, node: ast.If) -> None:  # noqa: N802
        """Visit both branches under the architecture guard the test implies."""
        self.visit(node.test)
        pred = _predicate(node.test, self.target)
        for branch, value in ((node.body, True), (node.orelse, False)):
            self.guards.append({**pred, "expect": value})
            for stmt in branch:
                self.visit(stmt)
            self.guards.pop()

    def _add(self, kind: str, name: str, node: ast.AST) -> None:
        self.items.append(
            Item(kind, name, f"{self.path}:{getattr(node, 'lineno', 0)}", list(self.guards))
        )

    def visit_Attribute(self, node: ast.Attribute) -> None:  # noqa: N802
        """Record a ``<target>.config.<attr>`` read under the current guards."""
        chain: list[str] = []
        cur: ast.AST = node
        while isinstance(cur, ast.Attribute):
            chain.append(cur.attr)
            cur = cur.value
        chain.reverse()
        if _refers_to_target(cur, self.target) and len(chain) >= 2 and chain[0] == "config":
            self._add("config_attr", ".".join(chain[1:]), node)
            return
        self.generic_visit(node)

    def visit_Assign(self, node: ast.Assign) -> None:  # noqa: N802
        """Visit the value only: assignment targets are not reads."""
        self.visit(node.value)

    def visit_Call(self, node: ast.Call) -> None:  # noqa: N802
        """Record a method call on the target model under the current guards."""
        f = node.func
        if isinstance(f, ast.Attribute) and _refers_to_target(f.value, self.target):
            self._add("method", f.attr, node)
        self.generic_visit(node)


def _load_model_items(tree: ast.Module, path: str) -> list[Item]:
    """Config reads and calls on ``target_model`` in the ``load_model``
    methods defined in ``tree``."""
    items: list[Item] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == "load_model":
            args = [a.arg for a in node.args.args]
            if len(args) >= 2 and args[0] == "self":
                v = _ProposerVisitor(path, args[1])
                for stmt in node.body:
                    v.visit(stmt)
                items += v.items
    return items


def _base_modules(tree: ast.Module) -> list[str]:
    """Source paths of the vLLM modules the classes in ``tree`` inherit
    from (``from vllm.v1.spec_decode.llm_base_proposer import Base``)."""
    imported = imported_functions(tree)
    bases = [
        b.id
        for node in tree.body
        if isinstance(node, ast.ClassDef)
        for b in node.bases
        if isinstance(b, ast.Name) and b.id in imported
    ]
    return sorted({imported[b].replace(".", "/") + ".py" for b in bases})


def discover_proposer(
    source: str, path: str = PROPOSER, read: Callable[[str], str] | None = None
) -> list[Item]:
    """Config reads and calls on ``target_model`` in ``load_model``: in the
    proposer's module, or, where it defines none that reads anything (0.20.0
    moved it into ``SpecDecodeBaseProposer``), in the modules its classes
    inherit from (with ``read``)."""
    tree = ast.parse(source)
    items = _load_model_items(tree, path)
    if items or read is None:
        return items
    for module in _base_modules(tree):
        items += _load_model_items(ast.parse(read(module)), module)
    return items


def _has_eagle3_constant(node: ast.AST) -> bool:
    return any(isinstance(c, ast.Constant) and c.value == "eagle3" for c in ast.walk(node))


def discover_gate(source: str, path: str = SPECULATIVE) -> list[Item]:
    """The allowlist the EAGLE-3 config gate checks target model types against."""
    items: list[Item] = []
    for fn in ast.walk(ast.parse(source)):
        if not isinstance(fn, ast.FunctionDef):
            continue
        gated = {
            n.id
            for node in ast.walk(fn)
            if isinstance(node, ast.If) and _has_eagle3_constant(node.test)
            for n in ast.walk(node.test)
            if isinstance(n, ast.Name)
        }
        for node in ast.walk(fn):
            if (
                isinstance(node, ast.Assign)
                and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name)
                and node.targets[0].id in gated
                and isinstance(node.value, ast.List)
                and node.value.elts
                and all(
                    isinstance(e, ast.Constant) and isinstance(e.value, str)
                    for e in node.value.elts
                )
            ):
                values = [e.value for e in node.value.elts]  # type: ignore[attr-defined]
                items.append(
                    Item("gate", node.targets[0].id, f"{path}:{node.lineno}", values=values)
                )
    return items


def model_modules(registry_source: str) -> dict[str, str]:
    """Architecture -> module path, from the registry's ``"Arch": ("mod", "Cls")`` entries."""
    out: dict[str, str] = {}
    for node in ast.walk(ast.parse(registry_source)):
        if isinstance(node, ast.Dict):
            for k, v in zip(node.keys, node.values, strict=True):
                if (
                    isinstance(k, ast.Constant)
                    and isinstance(v, ast.Tuple)
                    and len(v.elts) == 2
                    and isinstance(v.elts[0], ast.Constant)
                ):
                    out[str(k.value)] = f"vllm/model_executor/models/{v.elts[0].value}.py"
    return out


def discover(read: Callable[[str], str]) -> list[Item]:
    """All contract items of a tree; ``read(path)`` returns a file's text.

    Both model runners are covered (the default one and, where the release
    has it, the opt-in ``v1/worker/gpu/`` one), following their helpers;
    then the drafter side (``vpq.contract_drafter``: the proposer and its
    bases, the speculative-decoding registry).

    Raises:
        ContractError: a file is missing, or a runner's EAGLE-3 path was not
            found (the message names the functions where discovery lost it).
    """
    try:
        runner, proposer, speculative = read(RUNNER), read(PROPOSER), read(SPECULATIVE)
    except (OSError, KeyError, VpqError) as exc:
        raise ContractError(
            f"cannot read the runner, proposer or speculative config source: {exc}"
        ) from None
    items = discover_runner(runner, RUNNER, read)
    try:
        v2 = read(RUNNER_V2)
    except (OSError, KeyError, VpqError):
        v2 = None  # releases before the opt-in runner
    if v2 is not None:
        items += discover_runner(v2, RUNNER_V2, read, required=False)
    items += discover_gate(speculative) + discover_proposer(proposer, PROPOSER, read)
    # The drafter side imports Item and ContractError from this module.

    return items + contract_drafter.discover(read)


@dataclass(frozen=True)
class Table:
    """item label -> architecture -> ok | missing | stub | n/a.

    ``files`` says, for each (item label, architecture), which source files
    are responsible for that cell holding: the architecture's model module
    for interfaces and methods, the file doing the read for config reads and
    the gate.
    """

    rows: dict[str, dict[str, str]]
    where: dict[str, str]
    files: dict[tuple[str, str], set[str]] = field(default_factory=dict)

    def holds_for(self, paths: list[str]) -> bool:
        """Whether the part of the contract ``paths`` are responsible for
        holds: each path owns at least one cell, at least one is ``ok`` and
        none is ``missing`` or ``stub``."""
        for path in paths:
            cells = [self.rows[item][arch] for (item, arch), fs in self.files.items() if path in fs]
            if not cells or "ok" not in cells or {"missing", "stub"} & set(cells):
                return False
        return bool(paths)

    @property
    def gaps(self) -> list[tuple[str, str, str]]:
        """(item, architecture, verdict) for every ``missing`` or ``stub`` cell."""
        return [
            (item, arch, v)
            for item, row in self.rows.items()
            for arch, v in row.items()
            if v in ("missing", "stub")
        ]

    def gap_message(self, what: str) -> str | None:
        """One sentence naming every gap, e.g. ``the EAGLE-3 contract does not
        hold for the patched wheel: model.x() is missing on DeepseekV2ForCausalLM``,
        or None when there is none."""
        if not self.gaps:
            return None
        gaps = "; ".join(f"{item} is {v} on {arch}" for item, arch, v in self.gaps)
        return f"the EAGLE-3 contract does not hold for {what}: {gaps}"

    def without(self, archs: set[str]) -> Table:
        """The table without the columns for ``archs`` (a rebase leaves out
        the EAGLE-3 heads the series did not serve before the move)."""
        rows = {
            item: {a: v for a, v in row.items() if a not in archs}
            for item, row in self.rows.items()
        }
        rows = {item: row for item, row in rows.items() if row}
        files = {k: fs for k, fs in self.files.items() if k[1] not in archs and k[0] in rows}
        return Table(rows, {k: self.where[k] for k in rows}, files)

    def to_json(self) -> dict[str, object]:
        """The table as JSON-able data (``from_json`` reads it back)."""
        return {
            "rows": self.rows,
            "where": self.where,
            "files": [[item, arch, sorted(fs)] for (item, arch), fs in self.files.items()],
        }

    @classmethod
    def from_json(cls, d: dict[str, object]) -> Table:
        """The table ``to_json`` wrote."""
        files = {(item, arch): set(fs) for item, arch, fs in d["files"]}  # type: ignore[union-attr, misc]
        return cls(d["rows"], d["where"], files)  # type: ignore[arg-type]

    def render(self) -> str:
        """The table as printed: items down, architectures across, then the
        source line; the target's rows first, then the drafter's (one column
        per EAGLE-3 head architecture) under a heading of their own."""
        sections = []
        for title, archs in (("item", list(CLAIMED)), ("drafter item", _drafter_archs())):
            rows = {k: r for k, r in self.rows.items() if set(r) <= set(archs)}
            if not rows:
                continue
            w = max(len(title), *(len(k) for k in rows))
            short = {a: _short(a) for a in archs}
            width = max(10, *(len(v) for v in short.values()))
            lines = [
                f"{title:<{w}}  " + "  ".join(f"{short[a]:<{width}}" for a in archs) + "  source"
            ]
            for item, row in rows.items():
                cells = "  ".join(f"{row.get(a, 'n/a'):<{width}}" for a in archs)
                lines.append(f"{item:<{w}}  {cells}  {self.where[item]}")
            sections.append("\n".join(lines))
        return "\n\n".join(sections)


def _drafter_archs() -> list[str]:
    """The EAGLE-3 head architectures the drafter rows have a column for."""

    return list(contract_drafter.DRAFTERS)


def _short(arch: str) -> str:
    """A column heading: the architecture without ``ForCausalLM`` and the like."""
    return arch.replace("ForConditionalGeneration", "").replace("ForCausalLM", "")


def _table(items: list[Item], results: list[dict[str, str]], modules: dict[str, str]) -> Table:
    """The probe's per-item verdicts as a table: one row per item label (an
    item found on several paths keeps its worst verdict), each cell's
    responsible files."""
    rows: dict[str, dict[str, str]] = {}
    where: dict[str, str] = {}
    files: dict[tuple[str, str], set[str]] = {}
    rank = {"n/a": 0, "ok": 1, "stub": 2, "missing": 3}
    for item, res in zip(items, results, strict=True):
        archs = _drafter_archs() if item.side == "drafter" else list(CLAIMED)
        row = rows.setdefault(item.label, {a: "n/a" for a in archs})
        where.setdefault(item.label, item.where)
        for arch, v in res.items():
            if rank[v] > rank[row[arch]]:
                row[arch] = v
            if v != "n/a":
                owners = _owners(item, modules.get(arch))
                files.setdefault((item.label, arch), set()).update(owners)
    return Table(rows, where, files)


def _owners(item: Item, arch_module: str | None) -> set[str]:
    """The files responsible for ``item`` holding on an architecture whose
    model module is ``arch_module``: that module for what the class must
    provide (and, for a drafter type check, also the file doing the check),
    the registry for a registry entry, the reading file otherwise."""
    model = {arch_module} if arch_module else set()
    if item.kind in ("interface", "method", "drafter_method"):
        return model
    if item.kind == "drafter_type":
        return model | {item.file}
    return {REGISTRY if item.kind == "drafter_registry" else item.file}


def check(
    python: Path,
    items: list[Item],
    *,
    sys_path: Path | None = None,
    modules: dict[str, str] | None = None,
) -> Table:
    """Evaluate ``items`` on the claimed architectures with ``python``, an
    interpreter that imports the vLLM under test (or, with ``sys_path``, one
    whose packages let vLLM import from that source tree).

    ``modules`` (architecture -> model module path, see ``model_modules``)
    fills ``Table.files``.

    Raises:
        ContractError: the probe failed to run.
    """
    from vpq.fixture import KIMI_K25_TOP_LEVEL

    # A config item is read on the config class made with the checkpoint's
    # top-level keys, as loading a real config.json would make it.
    checkpoint = {"KimiK25ForConditionalGeneration": KIMI_K25_TOP_LEVEL}
    archs = {
        a: {
            "model_type": mt,
            "text_model_type": TEXT_MODEL_TYPES[a],
            "checkpoint": checkpoint.get(a, {}),
        }
        for a, mt in CLAIMED.items()
    }
    drafters = {a: {"model_type": mt} for a, mt in contract_drafter.DRAFTERS.items()}
    payload = json.dumps(
        {
            "items": [asdict(i) for i in items],
            "archs": archs,
            "drafter_archs": drafters,
            "sys_path": [str(sys_path)] if sys_path else [],
        }
    )
    # -I -c: run the probe's text isolated, so the modules beside it in
    # scripts/vpq (queue, venv, wheel, ...) cannot shadow the stdlib or pip's.
    try:
        proc = subprocess.run(
            [str(python), "-I", "-c", PROBE.read_text()],
            input=payload,
            capture_output=True,
            text=True,
            timeout=PROBE_TIMEOUT_S,
            env={**os.environ, "VLLM_LOGGING_LEVEL": "ERROR"},
        )
    except subprocess.TimeoutExpired:
        raise ContractError(
            f"contract probe under {python} did not finish in {PROBE_TIMEOUT_S} s "
            "(importing vLLM hung?); run it again, or delete that venv to have it made anew"
        ) from None
    results = tagged_json(proc.stdout, "CONTRACT")
    if proc.returncode != 0 or not isinstance(results, list):
        raise ContractError(f"contract probe failed under {python}: {proc.stderr.strip()[-1500:]}")
    return _table(items, results, modules or {})
