"""Evaluate contract items on model classes. Standard library + vLLM only:
runs inside a venv with a vLLM wheel installed, reading
``{"items": [...], "archs": {arch: {"model_type", "text_model_type",
"checkpoint"}}}`` as JSON on stdin and printing ``CONTRACT <json>``: for each
item, ``{arch: verdict}``. A config item is read on the config class made
with ``checkpoint``, the top-level keys of the architecture's config.json. Drafter
items (``side="drafter"``) are checked on the EAGLE-3 head architectures in
``drafter_archs`` instead (``drafter_verdict``).

Verdicts: ``ok``; ``missing``; ``stub`` (found only as a ``Protocol`` method
whose body is a docstring and/or ``...``, which returns ``None``); ``n/a``
(the item's branch does not apply to the architecture).
"""

from __future__ import annotations

import ast
import importlib
import inspect
import json
import logging
import sys
import textwrap
from typing import Any


def model_class(arch: str) -> type:
    """The vLLM model class registered for ``arch``."""
    from vllm.model_executor.models.registry import _VLLM_MODELS

    module, name = _VLLM_MODELS[arch]
    cls: type = getattr(importlib.import_module(f"vllm.model_executor.models.{module}"), name)
    return cls


def drafter_class(arch: str) -> type | None:
    """The class registered for an EAGLE-3 head, or None where ``arch`` is
    not registered (or its module does not import)."""
    try:
        return model_class(arch)
    except (KeyError, ImportError, AttributeError):
        return None


def qualified_class(name: str) -> type | None:
    """``vllm.x.y.Class`` imported, or None."""
    module, _, cls = name.rpartition(".")
    try:
        found: type = getattr(importlib.import_module(module), cls)
    except (ImportError, AttributeError, ValueError):
        return None
    return found


def is_one_of(cls: type, names: list[str]) -> bool | None:
    """Whether ``cls`` is a subclass of a class ``names`` qualifies; None
    when none of them imports."""
    found = [c for c in map(qualified_class, names) if isinstance(c, type)]
    return any(issubclass(cls, c) for c in found) if found else None


def config_class(model_type: str) -> type:
    """The HF config class vLLM uses for ``model_type``, or None."""
    from vllm.transformers_utils.config import _CONFIG_REGISTRY

    if model_type in _CONFIG_REGISTRY:
        registered: type = _CONFIG_REGISTRY[model_type]
        return registered
    from transformers import AutoConfig

    return type(AutoConfig.for_model(model_type))


def make_config(arch: dict[str, Any]) -> object:
    """The config for ``arch`` (``{"model_type", "checkpoint"?}``), made
    with the checkpoint's top-level keys as loading its config.json would."""
    return config_class(arch["model_type"])(**arch.get("checkpoint", {}))


def is_stub(func: object) -> bool:
    """Whether ``fn`` is only a ``Protocol`` stub (a body of ``...``/docstring/``return None``)."""
    try:
        src = textwrap.dedent(inspect.getsource(func))  # type: ignore[arg-type]
    except (OSError, TypeError):
        return False
    fn = ast.parse(src).body[0]
    body = getattr(fn, "body", [])
    return all(
        isinstance(s, ast.Pass) or (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))
        for s in body
    )


def guard_holds(guard: dict[str, Any], cls: type) -> bool | None:
    """Whether a branch condition leads to ``cls``; None when it cannot tell."""
    kind = guard["kind"]
    if kind == "method_in":  # the proposer's speculative method
        return bool(("eagle3" in guard["names"]) == guard["expect"])
    if kind == "drafter_isinstance":
        value = is_one_of(cls, guard["names"])
        return None if value is None else value == guard["expect"]
    if kind == "interface":
        from vllm.model_executor.models import interfaces

        fn = getattr(interfaces, guard["name"], None)
        value = bool(fn(cls)) if fn else None
    elif kind == "arch_in":
        value = cls.__name__ in guard["names"]
    else:
        value = None
    return None if value is None else value == guard["expect"]


def verdict(item: dict[str, Any], cls: type, arch: dict[str, Any]) -> str:
    """ok | missing | stub | n/a for one item on one architecture."""
    if any(guard_holds(g, cls) is False for g in item["guards"]):
        return "n/a"
    kind, name = item["kind"], item["name"]
    if kind == "gate":  # vLLM's rule: a listed name is a substring of the type
        return "ok" if any(v in arch["text_model_type"] for v in item["values"]) else "missing"
    if kind == "interface":
        from vllm.model_executor.models import interfaces

        fn = getattr(interfaces, name, None)
        return "ok" if fn is not None and fn(cls) else "missing"
    if kind == "method":
        owner = next((c for c in cls.__mro__ if name in vars(c)), None)
        if owner is None:
            return "missing"
        return "stub" if is_stub(vars(owner)[name]) else "ok"
    return "ok" if has_attr(make_config(arch), name) else "missing"


def has_attr(obj: object, name: str) -> bool:
    """Whether the dotted ``name`` resolves on ``obj``."""
    for part in name.split("."):
        if not hasattr(obj, part):
            return False
        obj = getattr(obj, part)
    return True


def drafter_verdict(item: dict[str, Any], cls: type | None, arch: str, info: dict[str, Any]) -> str:
    """ok | missing | stub | n/a for one drafter item on one EAGLE-3 head.
    A head that is not registered is ``missing`` in the registry row and
    ``n/a`` elsewhere (there is no class to check)."""
    kind = item["kind"]
    if kind == "drafter_registry":
        return "ok" if cls is not None and arch in item["values"] else "missing"
    if cls is None or any(guard_holds(g, cls) is False for g in item["guards"]):
        return "n/a"
    if kind == "drafter_type":
        return "ok" if is_one_of(cls, item["values"]) else "missing"
    if kind == "drafter_method":
        got = verdict({**item, "kind": "method", "guards": []}, cls, info)
    else:
        got = "ok" if has_attr(make_config(info), item["name"]) else "missing"
    return "n/a" if got == "missing" and item.get("optional") else got


def main() -> None:
    """Read the items from stdin, print ``CONTRACT <json verdicts>``."""
    logging.disable(logging.WARNING)
    data = json.load(sys.stdin)
    sys.path[:0] = data.get("sys_path", [])
    classes = {arch: model_class(arch) for arch in data["archs"]}
    drafters = {arch: drafter_class(arch) for arch in data.get("drafter_archs", {})}
    out = [
        {
            arch: drafter_verdict(item, drafters[arch], arch, info)
            for arch, info in data["drafter_archs"].items()
        }
        if item.get("side") == "drafter"
        else {arch: verdict(item, classes[arch], info) for arch, info in data["archs"].items()}
        for item in data["items"]
    ]
    print("CONTRACT " + json.dumps(out))


if __name__ == "__main__":
    main()
