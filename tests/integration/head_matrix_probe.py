"""Run inside a venv that has a vLLM wheel installed; prints one JSON object.

Usage: python head_matrix_probe.py [--past-target-gate] TARGET_DIR HEAD_DIR [HEAD_DIR ...]

For each EAGLE-3 head directory (config only, written by
``vpq.checkpoints.fixture.write_eagle3_head``) it records what a new user would meet:
whether ``SpeculativeConfig(method="eagle3")`` accepts the head on the
Kimi-K2.5 target, the drafter class the registry resolves, whether the
draft model uses MLA, and what both model runners' aux-layer lookups return
(called unbound, on CPU) together with the warnings they log. Every probe
records its result or the error it raised, so the same script shows what
the patched wheel and unpatched upstream do.

``--past-target-gate`` is for unpatched upstream only: 0.17.1 refuses EAGLE-3
on any DeepSeek-family target before it looks at the head (the allowlist
the series' first patches fix). The probe records that refusal
(``accepted_plain``), then, to show what upstream does with each *head*,
labels the target's text model type ``llama`` for that check and goes on.
It changes nothing the head-side code reads.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import types
from pathlib import Path

# INFO whatever the parent set: the cases read the warnings and info lines
os.environ["VLLM_LOGGING_LEVEL"] = "INFO"


def probe(fn):  # type: ignore[no-untyped-def]
    try:
        return {"ok": True, "value": fn()}
    except Exception as exc:  # noqa: BLE001 - we report whatever it raised
        return {"ok": False, "error": f"{type(exc).__name__}: {exc}"}


class Capture(logging.Handler):
    """Collects (level, message) from one vLLM logger."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[tuple[str, str]] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append((record.levelname, record.getMessage()))


def lookup(fn, logger_name: str):  # type: ignore[no-untyped-def]
    """``fn()``'s result (ids as a list, or None) and the logs it wrote."""
    cap = Capture()
    log = logging.getLogger(logger_name)
    log.addHandler(cap)
    try:
        res = probe(lambda: None if (v := fn()) is None else list(v))
    finally:
        log.removeHandler(cap)
    res["logs"] = cap.records
    return res


def head(target: str, head_dir: str, past_target_gate: bool) -> dict[str, object]:
    from vllm.config import ModelConfig, ParallelConfig, SpeculativeConfig

    out: dict[str, object] = {}
    mc = ModelConfig(model=target, skip_tokenizer_init=True)

    def spec():  # type: ignore[no-untyped-def]
        return SpeculativeConfig(
            target_model_config=mc,
            target_parallel_config=ParallelConfig(),
            method="eagle3",
            model=head_dir,
            num_speculative_tokens=2,
        )

    if past_target_gate:
        plain = probe(spec)
        out["accepted_plain"] = {k: v for k, v in plain.items() if k != "value"}
        mc.hf_text_config.model_type = "llama"
    built = probe(spec)
    out["accepted"] = {k: v for k, v in built.items() if k != "value"}
    if not built["ok"]:
        return out
    sc = built["value"]
    dmc = sc.draft_model_config
    out["architecture"] = dmc.architectures[0]
    out["model_type"] = getattr(dmc.hf_config.model, "model_type", None)

    def resolve() -> str:
        from vllm.model_executor.model_loader.utils import get_model_architecture

        cls, _ = get_model_architecture(dmc)
        return f"{cls.__module__}.{cls.__name__}"

    out["draft_class"] = probe(resolve)
    out["use_mla"] = probe(lambda: bool(dmc.use_mla))

    def runner_lookup():  # type: ignore[no-untyped-def]
        from vllm.v1.worker.gpu_model_runner import GPUModelRunner

        return GPUModelRunner._get_eagle3_aux_layers_from_config(
            types.SimpleNamespace(speculative_config=sc)
        )

    def v2_lookup():  # type: ignore[no-untyped-def]
        from vllm.v1.worker.gpu.spec_decode.eagle import eagle3_utils

        return eagle3_utils.get_eagle3_aux_layers_from_config(sc)

    out["runner"] = lookup(runner_lookup, "vllm.v1.worker.gpu_model_runner")
    out["runner_v2"] = lookup(v2_lookup, "vllm.v1.worker.gpu.spec_decode.eagle.eagle3_utils")
    return out


def main() -> None:
    args = sys.argv[1:]
    past = args[0] == "--past-target-gate"
    target, heads = args[past:][0], args[past:][1:]
    import vllm

    result = {
        "version": vllm.__version__,
        "heads": {Path(h).name: head(target, h, past) for h in heads},
    }
    print("PROBE " + json.dumps(result))


if __name__ == "__main__":
    main()
