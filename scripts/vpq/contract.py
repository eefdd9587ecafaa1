"""The EAGLE-3 contract: what vLLM's runner and proposer use on the target
model, discovered from the source, and checked on the model classes.

Discovery is pure ``ast`` over two files of a vLLM tree:

- ``vllm/v1/worker/gpu_model_runner.py``: inside every ``if`` whose test
  mentions the aux-hidden-state / EAGLE-3 switch (e.g.
  ``self.use_aux_hidden_state_outputs``), each ``supports_*(...)`` interface
  check and each ``self.model.<name>(...)`` / ``self.get_model().<name>(...)``
  call;
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
from dataclasses import asdict, dataclass, field
from pathlib import Path

from vpq.errors import VpqError

RUNNER = "vllm/v1/worker/gpu_model_runner.py"
PROPOSER = "vllm/v1/spec_decode/eagle.py"
PROBE = Path(__file__).with_name("contract_probe.py")

#: The architectures the series claims, and the HF model_type whose config
#: class each one reads (for ``target_model.config.<attr>`` items).
CLAIMED = {
    "KimiK25ForConditionalGeneration": "kimi_k25",
    "DeepseekV3ForCausalLM": "deepseek_v3",
    "DeepseekV2ForCausalLM": "deepseek_v2",
}
_MARKERS = ("aux_hidden_state", "eagle3")


class ContractError(VpqError):
    """The contract does not hold, or could not be checked."""


@dataclass(frozen=True)
class Item:
    """One thing vLLM uses on the target model."""

    kind: str  # "interface" | "method" | "config_attr"
    name: str  # e.g. "supports_eagle3", "set_aux_hidden_state_layers", "vision_config.image_token_id"
    where: str  # "vllm/...py:LINE"
    guards: list[dict[str, object]] = field(default_factory=list)

    @property
    def label(self) -> str:
        return {
            "interface": f"{self.name}(model)",
            "method": f"model.{self.name}()",
            "config_attr": f"config.{self.name}",
        }[self.kind]


def _mentions(node: ast.AST) -> bool:
    for sub in ast.walk(node):
        text = sub.id if isinstance(sub, ast.Name) else sub.attr if isinstance(sub, ast.Attribute) else ""
        if any(m in text.lower() for m in _MARKERS):
            return True
    return False


def _is_self_model(node: ast.AST) -> bool:
    """``self.model`` or ``self.get_model()``."""
    if isinstance(node, ast.Attribute) and node.attr == "model":
        return isinstance(node.value, ast.Name) and node.value.id == "self"
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        return node.func.attr == "get_model" and isinstance(node.func.value, ast.Name) and node.func.value.id == "self"
    return False


def discover_runner(source: str, path: str = RUNNER) -> list[Item]:
    """Interface checks and model calls in the runner's EAGLE-3 code paths."""
    items: list[Item] = []
    for node in ast.walk(ast.parse(source)):
        if not (isinstance(node, ast.If) and _mentions(node.test)):
            continue
        for stmt in node.body:
            for sub in ast.walk(stmt):
                if not isinstance(sub, ast.Call):
                    continue
                f = sub.func
                if isinstance(f, ast.Name) and f.id.startswith("supports_") and sub.args and _is_self_model(sub.args[0]):
                    items.append(Item("interface", f.id, f"{path}:{sub.lineno}"))
                elif isinstance(f, ast.Attribute) and _is_self_model(f.value) and f.attr != "get_model":
                    items.append(Item("method", f.attr, f"{path}:{sub.lineno}"))
    return items


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
            if isinstance(op, ast.Eq) and isinstance(right, ast.Constant) and isinstance(right.value, str):
                return {"kind": "arch_in", "names": [right.value]}
            if isinstance(op, ast.In) and isinstance(right, ast.List | ast.Tuple | ast.Set):
                names = [e.value for e in right.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
                if len(names) == len(right.elts):
                    return {"kind": "arch_in", "names": names}
    return {"kind": "unknown", "text": ast.unparse(test)}


class _ProposerVisitor(ast.NodeVisitor):
    def __init__(self, path: str, target: str) -> None:
        self.path, self.target = path, target
        self.guards: list[dict[str, object]] = []
        self.items: list[Item] = []

    def visit_If(self, node: ast.If) -> None:  # noqa: N802
        self.visit(node.test)
        pred = _predicate(node.test, self.target)
        for branch, value in ((node.body, True), (node.orelse, False)):
            self.guards.append({**pred, "expect": value})
            for stmt in branch:
                self.visit(stmt)
            self.guards.pop()

    def _add(self, kind: str, name: str, node: ast.AST) -> None:
        self.items.append(Item(kind, name, f"{self.path}:{getattr(node, 'lineno', 0)}", list(self.guards)))

    def visit_Attribute(self, node: ast.Attribute) -> None:  # noqa: N802
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
        # Only reads count: skip assignment targets, visit the value.
        self.visit(node.value)

    def visit_Call(self, node: ast.Call) -> None:  # noqa: N802
        f = node.func
        if isinstance(f, ast.Attribute) and _refers_to_target(f.value, self.target):
            self._add("method", f.attr, node)
        self.generic_visit(node)


def discover_proposer(source: str, path: str = PROPOSER) -> list[Item]:
    """Config reads and calls on ``target_model`` in ``load_model``."""
    items: list[Item] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef) and node.name == "load_model":
            args = [a.arg for a in node.args.args]
            if len(args) >= 2 and args[0] == "self":
                v = _ProposerVisitor(path, args[1])
                for stmt in node.body:
                    v.visit(stmt)
                items += v.items
    return items


def discover(read: callable[[str], str]) -> list[Item]:  # type: ignore[valid-type]
    """All contract items of a tree; ``read(path)`` returns a file's text.

    Raises:
        ContractError: a file is missing, or nothing was discovered (the
            runner's EAGLE-3 path was not found: the discovery needs updating).
    """
    try:
        runner, proposer = read(RUNNER), read(PROPOSER)
    except (OSError, KeyError) as exc:
        raise ContractError(f"cannot read the runner or proposer source: {exc}") from None
    items = discover_runner(runner) + discover_proposer(proposer)
    if not any(i.kind == "interface" for i in items):
        raise ContractError(
            f"{RUNNER}: found no supports_*() check on an EAGLE-3 code path; the "
            "runner changed shape and the contract discovery needs a look"
        )
    return items


@dataclass(frozen=True)
class Table:
    """item label -> architecture -> ok | missing | stub | n/a."""

    rows: dict[str, dict[str, str]]
    where: dict[str, str]

    @property
    def gaps(self) -> list[tuple[str, str, str]]:
        return [(item, arch, v) for item, row in self.rows.items() for arch, v in row.items() if v in ("missing", "stub")]

    def render(self) -> str:
        archs = list(CLAIMED)
        short = {a: a.replace("ForConditionalGeneration", "").replace("ForCausalLM", "") for a in archs}
        w = max(len(k) for k in self.rows) if self.rows else 10
        lines = [f"{'item':<{w}}  " + "  ".join(f"{short[a]:<10}" for a in archs) + "  source"]
        for item, row in self.rows.items():
            lines.append(f"{item:<{w}}  " + "  ".join(f"{row[a]:<10}" for a in archs) + f"  {self.where[item]}")
        return "\n".join(lines)


def check(python: Path, items: list[Item]) -> Table:
    """Evaluate ``items`` on the claimed architectures with ``python``, an
    interpreter that imports the vLLM under test.

    Raises:
        ContractError: the probe failed to run.
    """
    payload = json.dumps({"items": [asdict(i) for i in items], "archs": CLAIMED})
    # -I -c: run the probe's text isolated, so the modules beside it in
    # scripts/vpq (queue, venv, wheel, ...) cannot shadow the stdlib or pip's.
    proc = subprocess.run(
        [str(python), "-I", "-c", PROBE.read_text()], input=payload, capture_output=True,
        text=True, timeout=900, env={**os.environ, "VLLM_LOGGING_LEVEL": "ERROR"},
    )
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("CONTRACT ")]
    if proc.returncode != 0 or not lines:
        raise ContractError(f"contract probe failed under {python}: {proc.stderr.strip()[-1500:]}")
    results: list[dict[str, str]] = json.loads(lines[-1][len("CONTRACT "):])
    rows: dict[str, dict[str, str]] = {}
    where: dict[str, str] = {}
    rank = {"n/a": 0, "ok": 1, "stub": 2, "missing": 3}
    for item, res in zip(items, results, strict=True):
        row = rows.setdefault(item.label, {a: "n/a" for a in CLAIMED})
        where.setdefault(item.label, item.where)
        for arch, v in res.items():
            # An item found on several paths: the worst applicable verdict wins.
            if rank[v] > rank[row[arch]]:
                row[arch] = v
    return Table(rows, where)
