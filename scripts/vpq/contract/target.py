"""The target side of the EAGLE-3 contract: what vLLM's runner and proposer
use on the target model, discovered from the source.

Discovery is pure ``ast`` over three files of a vLLM tree:

- ``vllm/v1/worker/gpu_model_runner.py``: inside every ``if`` whose test
  mentions the aux-hidden-state / EAGLE-3 switch (e.g.
  ``self.use_aux_hidden_state_outputs``), each ``supports_*(...)`` interface
  check and each ``self.model.<name>(...)`` / ``self.get_model().<name>(...)``
  call;
- ``vllm/config/speculative.py``: the allowlist of target text model types
  that the EAGLE-3 gate checks (a list of strings used in an ``if`` that
  tests for ``"eagle3"``);
- ``vllm/v1/spec_decode/eagle.py``: in ``load_model(self, target_model)``
  of ``EagleProposer`` or, where it defines none that reads anything, of
  the first base class that does (``vpq.contract.items.proposer_classes``,
  the class chain the drafter side follows too), each
  ``target_model.config.<attr>`` read and each method
  called on ``target_model`` (``cast(..., target_model).get_language_model()``
  included), together with the branch conditions that lead to it:
  ``supports_*(target_model)`` and ``self.get_model_name(target_model) ==
  "..."`` / ``in [...]`` are recorded as predicates, so the check follows
  the branch that really applies to each architecture.

Nothing is hard-coded about *which* calls exist: a newer runner that calls
something new on the model shows up as a new row.

Checking needs the classes, so it runs inside a venv with the wheel
installed (``vpq.envs.contract_run``).
"""

from __future__ import annotations

import ast
from collections.abc import Callable

from vpq.contract.items import (
    PROPOSER,
    RUNNER,
    SPECULATIVE,
    ContractError,
    Item,
    imported_functions,
    is_self_model,
    proposer_classes,
    read_tree,
)

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


def _model_ref(node: ast.AST, names: set[str]) -> bool:
    """The target model: ``self.model``, ``self.get_model()``, a name bound
    to it in this function (a parameter or an alias), or ``cast(T, <those>)``."""
    if is_self_model(node):
        return True
    if isinstance(node, ast.Name):
        return node.id in names
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "cast":
        return len(node.args) == 2 and _model_ref(node.args[1], names)
    return False


def _supports_call(node: ast.AST) -> tuple[ast.Call, str] | None:
    """``node`` and its function's name if it is a ``supports_*(x, ...)``
    call, else None."""
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id.startswith("supports_")
        and node.args
    ):
        return node, node.func.id
    return None


def _eagle3_check(test: ast.expr, names: set[str]) -> ast.Call | None:
    """The ``supports_*(model)`` call in an EAGLE-3 ``if`` test, or None."""
    if not _mentions(test):
        return None
    for sub in ast.walk(test):
        hit = _supports_call(sub)
        if hit and _model_ref(hit[0].args[0], names):
            return hit[0]
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
        tree = read_tree(self.read, path)
        if tree is None:
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
    hit = _supports_call(test)
    if hit and _refers_to_target(hit[0].args[0], target):
        return {"kind": "interface", "name": hit[1]}
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


def _load_model_items(cls: ast.ClassDef, path: str) -> list[Item]:
    """Config reads and calls on ``target_model`` in ``cls``'s ``load_model``."""
    items: list[Item] = []
    for node in cls.body:
        if isinstance(node, ast.FunctionDef) and node.name == "load_model":
            args = [a.arg for a in node.args.args]
            if len(args) >= 2 and args[0] == "self":
                v = _ProposerVisitor(path, args[1])
                for stmt in node.body:
                    v.visit(stmt)
                items += v.items
    return items


def discover_proposer(read: Callable[[str], str], path: str = PROPOSER) -> list[Item]:
    """Config reads and calls on ``target_model`` in ``load_model``: the
    proposer's own or, where it defines none that reads anything (0.20.0
    moved it into ``SpecDecodeBaseProposer``), the first base class's that
    does (``proposer_classes``, followed into the modules they come from).

    Raises:
        ContractError: the proposer class is missing.
    """
    for where, cls, _ in proposer_classes(read, path):
        items = _load_model_items(cls, where)
        if items:
            return items
    return []


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
                    out[str(k.value)] = f"vllm/model_executor/models/{v.elts[0].value!s}.py"
    return out
