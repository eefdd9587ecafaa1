"""What ``llm.apply_model`` reads on the live target model in each worker.

A module of its own: vLLM pickles the function by reference, so every
worker must be able to import it (``engine_probe.py`` puts this folder on
``PYTHONPATH``).
"""

from __future__ import annotations


def inspect_model(model):  # type: ignore[no-untyped-def]
    """Runs in each worker on the live target model (``llm.apply_model``)."""
    lm = getattr(model, "language_model", model)
    inner = getattr(lm, "model", None)
    aux = getattr(inner, "aux_hidden_state_layers", None)
    get_default = getattr(model, "get_eagle3_aux_hidden_state_layers", None)
    try:
        default = list(get_default()) if get_default is not None else None
    except Exception as exc:  # noqa: BLE001 - reported, e.g. a repeated default id
        default = f"{type(exc).__name__}: {exc}"
    return {
        "class": type(model).__name__,
        "language_model_class": type(lm).__name__,
        "aux_layers": None if aux is None else [int(i) for i in aux],
        "default_aux_layers": default,
        # The attention implementations the layers run (e.g. CpuMLAImpl: the
        # engine tier's MLA stand-in; CPUAttentionBackendImpl: MLA off).
        "attn_impls": sorted(
            {type(m.impl).__name__ for m in model.modules() if hasattr(m, "impl")}
        ),
    }
