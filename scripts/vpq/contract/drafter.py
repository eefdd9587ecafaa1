"""The drafter side of the EAGLE-3 contract: what vLLM's proposer requires
of the draft model (the EAGLE-3 head), discovered from the source.

Discovery is pure ``ast``, like the target side (``vpq.contract.target``):

- the proposer: ``EagleProposer`` in ``vllm/v1/spec_decode/eagle.py`` and
  every base class it names, followed into the module it is imported from
  (0.22.0 moved the body to ``llm_base_proposer.py``). In every method it
  records, with the branch conditions that lead there (``self.method ==
  "eagle3"`` / ``in (...)``, ``isinstance(<drafter>, ...)``, guard clauses
  that return early):
  - ``isinstance(<drafter>, (A, B))`` checks whose classes are model
    classes (``vllm.model_executor.models.*``, resolved through the
    module's imports): the head's class must be one of them;
  - ``<drafter>.<name>(...)`` and ``<drafter>(...)`` (``forward``) calls;
  - reads of the draft config (``self.draft_model_config.hf_config``,
    ``self.speculative_config.draft_model_config.hf_config``,
    ``<drafter>.config``, or a name bound to one of them): ``cfg.<attr>``
    and ``getattr(cfg, "<attr>"[, default])``.
  The drafter is ``self.model`` or a name bound to it. A name the proposer
  also tests with ``hasattr(<drafter or cfg>, "<name>")``, or reads with a
  ``getattr`` default, is optional: the proposer copes without it.
- ``vllm/model_executor/models/registry.py``: the speculative-decoding
  registry's EAGLE-3 heads (a dict assigned to a name containing
  ``SPECULATIVE`` whose key or class name contains ``eagle3``).

The items are ``vpq.contract.items.Item`` with ``side="drafter"``; the probe
checks them on each head architecture in ``vpq.contract.items.DRAFTERS``.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass, field

from vpq.contract.items import (
    PROPOSER,
    REGISTRY,
    ContractError,
    Item,
    is_self_attr,
    proposer_classes,
)
from vpq.core.errors import VpqError

_MODELS = "vllm.model_executor.models."


@dataclass
class _Scope:
    """Names bound to the drafter and to its config in one method."""

    drafter: set[str] = field(default_factory=set)
    config: set[str] = field(default_factory=set)

    def is_drafter(self, node: ast.AST) -> bool:
        """``self.model`` or a name bound to it."""
        return is_self_attr(node, "model") or (
            isinstance(node, ast.Name) and node.id in self.drafter
        )

    def is_config(self, node: ast.AST) -> bool:
        """The draft model's HF config, or a name bound to it."""
        if isinstance(node, ast.Name):
            return node.id in self.config
        return (
            is_self_attr(node, "draft_model_config", "hf_config")
            or is_self_attr(node, "speculative_config", "draft_model_config", "hf_config")
            or (
                isinstance(node, ast.Attribute)
                and node.attr == "config"
                and self.is_drafter(node.value)
            )
        )


def _scope(fn: ast.FunctionDef) -> _Scope:
    """The method's aliases: ``m = self.model``, ``cfg = self.draft_model_config.hf_config``
    (repeated until stable, so an alias of an alias counts)."""
    scope = _Scope()
    assigns = [
        (t.id, node.value)
        for node in ast.walk(fn)
        if isinstance(node, ast.Assign)
        for t in node.targets
        if isinstance(t, ast.Name)
    ]
    while True:
        before = (len(scope.drafter), len(scope.config))
        for name, value in assigns:
            if scope.is_drafter(value):
                scope.drafter.add(name)
            elif scope.is_config(value):
                scope.config.add(name)
        if (len(scope.drafter), len(scope.config)) == before:
            return scope


def _method_predicate(test: ast.expr) -> dict[str, object] | None:
    """``self.method == "x"`` / ``!=`` / ``in (...)`` / ``not in`` as a guard
    on the speculative method, or None."""
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1):
        return None
    if not is_self_attr(test.left, "method"):
        return None
    op, right = test.ops[0], test.comparators[0]
    if isinstance(right, ast.Constant) and isinstance(right.value, str):
        names = [right.value]
    elif isinstance(right, ast.List | ast.Tuple | ast.Set) and all(
        isinstance(e, ast.Constant) and isinstance(e.value, str) for e in right.elts
    ):
        names = [e.value for e in right.elts]  # type: ignore[attr-defined]
    else:
        return None
    if isinstance(op, ast.Eq | ast.In):
        return {"kind": "method_in", "names": names, "expect": True}
    if isinstance(op, ast.NotEq | ast.NotIn):
        return {"kind": "method_in", "names": names, "expect": False}
    return None


class _ProposerScan(ast.NodeVisitor):
    """Records drafter items in one proposer method under its guards."""

    def __init__(self, path: str, fn: ast.FunctionDef, imports: dict[str, str]) -> None:
        self.path, self.fn, self.imports = path, fn, imports
        self.scope = _scope(fn)
        self.guards: list[dict[str, object]] = []
        self.items: list[Item] = []

    def _add(self, kind: str, name: str, node: ast.AST, **extra: object) -> None:
        self.items.append(
            Item(
                kind,
                name,
                f"{self.path}:{getattr(node, 'lineno', 0)}",
                list(self.guards),
                side="drafter",
                **extra,  # type: ignore[arg-type]
            )
        )

    def _model_classes(self, node: ast.expr) -> list[str]:
        """The qualified model classes an ``isinstance`` second argument names."""
        elts = node.elts if isinstance(node, ast.Tuple) else [node]
        return [
            f"{self.imports[e.id]}.{e.id}"
            for e in elts
            if isinstance(e, ast.Name) and e.id in self.imports
        ]

    def _predicate(self, test: ast.expr) -> dict[str, object]:
        pred = _method_predicate(test)
        if pred is not None:
            return pred
        if (
            isinstance(test, ast.Call)
            and isinstance(test.func, ast.Name)
            and test.func.id == "isinstance"
            and len(test.args) == 2
            and self.scope.is_drafter(test.args[0])
        ):
            return {
                "kind": "drafter_isinstance",
                "names": self._model_classes(test.args[1]),
                "expect": True,
            }
        return {"kind": "unknown", "text": ast.unparse(test)}

    def block(self, stmts: list[ast.stmt]) -> None:
        """Visit a statement list; a guard clause (``if <pred>: return``)
        puts the statements after it under the negated guard."""
        pushed = 0
        for stmt in stmts:
            self.visit(stmt)
            if (
                isinstance(stmt, ast.If)
                and not stmt.orelse
                and stmt.body
                and isinstance(stmt.body[-1], ast.Return | ast.Raise)
            ):
                pred = self._predicate(stmt.test)
                if pred["kind"] != "unknown":
                    self.guards.append({**pred, "expect": not pred["expect"]})
                    pushed += 1
        del self.guards[len(self.guards) - pushed :]

    def visit_If(self, node: ast.If) -> None:  # noqa: N802
        """Both branches, each under the guard the test implies."""
        self.visit(node.test)
        pred = self._predicate(node.test)
        for branch, value in ((node.body, True), (node.orelse, False)):
            self.guards.append({**pred, "expect": value if pred["kind"] != "unknown" else True})
            self.block(branch)
            self.guards.pop()

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:  # noqa: N802
        """Nested functions are scanned as part of their method."""
        self.block(node.body)

    def visit_Call(self, node: ast.Call) -> None:  # noqa: N802
        """Type checks, calls on the drafter, ``getattr`` reads of its config."""
        f = node.func
        if isinstance(f, ast.Name) and f.id == "isinstance" and len(node.args) == 2:
            if self.scope.is_drafter(node.args[0]):
                classes = [c for c in self._model_classes(node.args[1]) if c.startswith(_MODELS)]
                if classes:
                    self._add("drafter_type", "isinstance", node, values=classes)
        elif isinstance(f, ast.Name) and f.id == "getattr" and len(node.args) >= 2:
            obj, name = node.args[0], node.args[1]
            if (
                self.scope.is_config(obj)
                and isinstance(name, ast.Constant)
                and isinstance(name.value, str)
            ):
                self._add("drafter_config_attr", name.value, node, optional=len(node.args) > 2)
        elif self.scope.is_drafter(f):
            self._add("drafter_method", "forward", node)
        elif isinstance(f, ast.Attribute) and self.scope.is_drafter(f.value):
            self._add("drafter_method", f.attr, node)
        self.generic_visit(node)

    def visit_Attribute(self, node: ast.Attribute) -> None:  # noqa: N802
        """A read ``<cfg>.<attr>`` of the draft config."""
        if isinstance(node.ctx, ast.Load) and self.scope.is_config(node.value):
            self._add("drafter_config_attr", node.attr, node)
        self.generic_visit(node)


def _optional_names(classes: list[tuple[str, ast.ClassDef, dict[str, str]]]) -> set[str]:
    """Names the proposer tests with ``hasattr(<drafter or its config>, "<name>")``
    or reads with a default, ``getattr(<drafter or its config>, "<name>", default)``."""
    out: set[str] = set()
    for _, cls, _ in classes:
        for fn in cls.body:
            if not isinstance(fn, ast.FunctionDef):
                continue
            scope = _scope(fn)
            for node in ast.walk(fn):
                if (
                    isinstance(node, ast.Call)
                    and isinstance(node.func, ast.Name)
                    and (
                        (node.func.id == "hasattr" and len(node.args) == 2)
                        or (node.func.id == "getattr" and len(node.args) == 3)
                    )
                    and (scope.is_drafter(node.args[0]) or scope.is_config(node.args[0]))
                    and isinstance(node.args[1], ast.Constant)
                ):
                    out.add(str(node.args[1].value))
    return out


def discover_proposer(read: Callable[[str], str], path: str = PROPOSER) -> list[Item]:
    """What the proposer requires of the drafter: type checks, calls and
    draft-config reads in every method of the proposer and its bases.

    Raises:
        ContractError: the proposer class is missing, or no call on the
            drafter was found in it (the message names the methods scanned).
    """
    classes = proposer_classes(read, path)
    optional = _optional_names(classes)
    items: list[Item] = []
    for where, cls, imports in classes:
        for fn in cls.body:
            if isinstance(fn, ast.FunctionDef):
                scan = _ProposerScan(where, fn, imports)
                scan.block(fn.body)
                items += scan.items
    items = [
        Item(**{**i.__dict__, "optional": True})
        if i.kind in ("drafter_method", "drafter_config_attr") and i.name in optional
        else i
        for i in items
    ]
    if not any(i.kind == "drafter_method" for i in items):
        scanned = ", ".join(f"{cls.name} ({where}:{cls.lineno})" for where, cls, _ in classes)
        raise ContractError(
            f"{path}: found no call on the draft model (self.model) in {scanned}. "
            "Discovery of the drafter side lost the path there; the proposer changed "
            "shape and the contract discovery needs a look."
        )
    return items


def eagle3_heads(registry_source: str) -> dict[str, tuple[str, str]]:
    """EAGLE-3 head architecture -> (module, class) from the speculative-decoding registry."""
    heads: dict[str, tuple[str, str]] = {}
    for node in ast.walk(ast.parse(registry_source)):
        if not (
            isinstance(node, ast.Assign | ast.AnnAssign)
            and isinstance(node.value, ast.Dict)
            and any(
                isinstance(t, ast.Name) and "SPECULATIVE" in t.id
                for t in (node.targets if isinstance(node, ast.Assign) else [node.target])
            )
        ):
            continue
        for k, v in zip(node.value.keys, node.value.values, strict=True):
            if (
                isinstance(k, ast.Constant)
                and isinstance(v, ast.Tuple)
                and len(v.elts) == 2
                and all(isinstance(e, ast.Constant) for e in v.elts)
            ):
                module, cls = (str(e.value) for e in v.elts)  # type: ignore[attr-defined]
                if "eagle3" in str(k.value).lower() or "eagle3" in cls.lower():
                    heads[str(k.value)] = (module, cls)
    return heads


def discover_registry(registry_source: str, path: str = REGISTRY) -> list[Item]:
    """The registry item: the head architecture must be an EAGLE-3 head there.

    Raises:
        ContractError: the registry names no EAGLE-3 head.
    """
    heads = eagle3_heads(registry_source)
    if not heads:
        raise ContractError(
            f"{path}: found no EAGLE-3 head in a speculative-decoding registry dict "
            "(a dict assigned to a name containing SPECULATIVE, with an 'eagle3' key "
            "or class). The registry changed shape and the contract discovery needs a look."
        )
    line = next(
        n.lineno
        for n in ast.walk(ast.parse(registry_source))
        if isinstance(n, ast.Constant) and n.value in heads
    )
    return [
        Item("drafter_registry", "eagle3_heads", f"{path}:{line}", side="drafter",
             values=sorted(heads))
    ]  # fmt: skip


def discover(read: Callable[[str], str]) -> list[Item]:
    """The drafter side of the contract of a tree; ``read(path)`` returns a file's text.

    Raises:
        ContractError: a file is missing, or discovery lost the path (the
            message names the file and the functions or classes scanned).
    """
    try:
        registry = read(REGISTRY)
    except (OSError, KeyError, VpqError) as exc:
        raise ContractError(f"cannot read the model registry source: {exc}") from None
    return discover_registry(registry) + discover_proposer(read)
