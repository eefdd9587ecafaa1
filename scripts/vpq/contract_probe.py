"""Evaluate contract items on model classes. Standard library + vLLM only:
runs inside a venv with a vLLM wheel installed, reading
``{"items": [...], "archs": {arch: model_type}}`` as JSON on stdin and
printing ``CONTRACT <json>``: for each item, ``{arch: verdict}``.

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


def model_class(arch: str) -> type:
    """The vLLM model class registered for ``arch``."""
    from vllm.model_executor.models.registry import _VLLM_MODELS

    module, name = _VLLM_MODELS[arch]
    return getattr(importlib.import_module(f"vllm.model_executor.models.{module}"), name)


def config_class(model_type: str) -> type:
    """The HF config class vLLM uses for ``model_type``, or None."""
    from vllm.transformers_utils.config import _CONFIG_REGISTRY

    if model_type in _CONFIG_REGISTRY:
        return _CONFIG_REGISTRY[model_type]
    from transformers import AutoConfig

    return type(AutoConfig.for_model(model_type))


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


def guard_holds(guard: dict, cls: type) -> bool | None:
    """Whether a branch condition leads to ``cls``; None when it cannot tell."""
    kind = guard["kind"]
    if kind == "interface":
        from vllm.model_executor.models import interfaces

        fn = getattr(interfaces, guard["name"], None)
        value = bool(fn(cls)) if fn else None
    elif kind == "arch_in":
        value = cls.__name__ in guard["names"]
    else:
        value = None
    return None if value is None else value == guard["expect"]


def verdict(item: dict, cls: type, arch: dict) -> str:
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
    obj: object = config_class(arch["model_type"])()
    for part in name.split("."):
        if not hasattr(obj, part):
            return "missing"
        obj = getattr(obj, part)
    return "ok"


def main() -> None:
    """Read the items from stdin, print ``CONTRACT <json verdicts>``."""
    logging.disable(logging.WARNING)
    data = json.load(sys.stdin)
    sys.path[:0] = data.get("sys_path", [])
    classes = {arch: model_class(arch) for arch in data["archs"]}
    out = [
        {arch: verdict(item, classes[arch], info) for arch, info in data["archs"].items()}
        for item in data["items"]
    ]
    print("CONTRACT " + json.dumps(out))


if __name__ == "__main__":
    main()
