"""Hidden-state extraction for EAGLE-3 training data: the engine arguments,
a reader for the files vLLM's ``ExampleHiddenStatesConnector`` writes, and an
independent reference for the scripted target's aux hidden states.

The engine side is upstream vLLM 0.17.1's: ``speculative_config`` with
``method="extract_hidden_states"`` (``vllm/v1/spec_decode/extract_hidden_states.py``)
and ``kv_transfer_config`` naming ``ExampleHiddenStatesConnector``
(``vllm/distributed/kv_transfer/kv_connector/v1/example_hidden_states_connector.py``),
which writes one ``<request id>.safetensors`` per request: ``hidden_states``
``[prompt_len, len(layer_ids), hidden_size]`` in the model's dtype and
``token_ids`` ``[prompt_len]`` int64, the prompt's states only.

The reference (``scripted_aux_states``) does not run vLLM: it reads the
scripted checkpoint's safetensors and applies the target's decoder layers in
float32 with numpy, on the premises ``vpq.checkpoints.scripted`` builds in
(attention and routed experts write nothing, so every position is
independent of the others); it refuses a checkpoint where they do not hold.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

#: The connector this extraction uses (vLLM 0.17.1; no other hidden-states
#: connector ships in that release).
CONNECTOR = "ExampleHiddenStatesConnector"


def extraction_args(layer_ids: list[int], storage: Path) -> dict[str, Any]:
    """The ``LLM(...)`` keyword arguments (as ``vllm serve``'s
    ``--speculative-config`` / ``--kv-transfer-config`` JSON) that make the
    engine write the aux hidden states of ``layer_ids`` for every prompt
    under ``storage``."""
    return {
        "speculative_config": {
            "method": "extract_hidden_states",
            "num_speculative_tokens": 1,
            "draft_model_config": {"hf_config": {"eagle_aux_hidden_state_layer_ids": layer_ids}},
        },
        "kv_transfer_config": {
            "kv_connector": CONNECTOR,
            "kv_role": "kv_producer",
            "kv_connector_extra_config": {"shared_storage_path": str(storage)},
        },
    }


class SafetensorsError(ValueError):
    """A file is not the safetensors layout this reader takes."""


@dataclass(frozen=True)
class Tensor:
    """One tensor of a safetensors file: its declared dtype and shape, and
    its values (bfloat16 and float16 widened to float32, integers as int64)."""

    dtype: str
    shape: tuple[int, ...]
    values: np.ndarray


_DTYPES = {"F32": "<f4", "F16": "<f2", "I64": "<i8", "I32": "<i4"}


def read_safetensors(path: Path) -> dict[str, Tensor]:
    """Every tensor of ``path``, read with the standard library and numpy
    (the format: an 8-byte little-endian header length, a JSON header of
    ``{name: {dtype, shape, data_offsets}}``, the data), so bfloat16 reads
    without torch."""
    raw = path.read_bytes()
    if len(raw) < 8:
        raise SafetensorsError(f"{path}: {len(raw)} bytes, no header")
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + n])
    data = raw[8 + n :]
    out = {}
    for name, meta in header.items():
        if name == "__metadata__":
            continue
        begin, end = meta["data_offsets"]
        buf, shape = data[begin:end], tuple(int(d) for d in meta["shape"])
        if meta["dtype"] == "BF16":
            bits = np.frombuffer(buf, dtype="<u2").astype(np.uint32) << 16
            values = bits.view(np.float32)
        elif meta["dtype"] in _DTYPES:
            values = np.frombuffer(buf, dtype=_DTYPES[meta["dtype"]])
        else:
            raise SafetensorsError(f"{path}: {name} has dtype {meta['dtype']}")
        out[name] = Tensor(meta["dtype"], shape, values.reshape(shape).astype(values.dtype))
    return out


class ScriptedReferenceError(ValueError):
    """The checkpoint breaks a premise of the scripted reference."""


def _weights(checkpoint: Path) -> dict[str, np.ndarray]:
    from safetensors.numpy import load_file

    out: dict[str, np.ndarray] = {}
    for f in sorted(checkpoint.glob("*.safetensors")):
        out |= {k: v.astype(np.float32) for k, v in load_file(str(f)).items()}
    return out


def _rms(x: np.ndarray, weight: np.ndarray, eps: float) -> np.ndarray:
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * weight


def _mlp(w: dict[str, np.ndarray], prefix: str, h: np.ndarray) -> np.ndarray:
    gate, up = h @ w[f"{prefix}.gate_proj.weight"].T, h @ w[f"{prefix}.up_proj.weight"].T
    silu = gate / (1.0 + np.exp(-gate))
    return (silu * up) @ w[f"{prefix}.down_proj.weight"].T


def _must_be_zero(w: dict[str, np.ndarray], name: str) -> None:
    if np.any(w[name]):
        raise ScriptedReferenceError(f"{name} is not zero: the reference assumes it writes nothing")


@dataclass(frozen=True)
class ScriptedTarget:
    """The scripted Kimi-K2.5 target's language model, as numpy weights."""

    weights: dict[str, np.ndarray]
    num_layers: int
    first_dense: int
    eps: float

    @classmethod
    def load(cls, checkpoint: Path) -> ScriptedTarget:
        text = json.loads((checkpoint / "config.json").read_text())["text_config"]
        return cls(
            _weights(checkpoint),
            int(text["num_hidden_layers"]),
            int(text["first_k_dense_replace"]),
            float(text["rms_norm_eps"]),
        )

    def embed(self, token_ids: list[int]) -> np.ndarray:
        """The embedding rows of ``token_ids``: ``[len(token_ids), hidden_size]``."""
        return self.weights["language_model.model.embed_tokens.weight"][token_ids]

    def aux_states(self, inputs: np.ndarray, layer_ids: list[int]) -> np.ndarray:
        """The aux hidden states of ``layer_ids`` for residual-stream rows
        ``inputs`` (``[num_tokens, hidden_size]``, the embedding output):
        ``[num_tokens, len(layer_ids), hidden_size]``, id ``i < N`` the stream
        entering decoder layer ``i``, id ``N`` the stream after the last
        layer before the final norm (the series' ``set_aux_hidden_state_layers``)."""
        w, p = self.weights, "language_model.model.layers"
        x, states = inputs.astype(np.float32), {}
        for i in range(self.num_layers):
            states[i] = x
            _must_be_zero(w, f"{p}.{i}.self_attn.o_proj.weight")
            h = _rms(x, w[f"{p}.{i}.post_attention_layernorm.weight"], self.eps)
            if i < self.first_dense:
                x = x + _mlp(w, f"{p}.{i}.mlp", h)
                continue
            experts = {k.split(".")[6] for k in w if k.startswith(f"{p}.{i}.mlp.experts.")}
            for e in experts:
                _must_be_zero(w, f"{p}.{i}.mlp.experts.{e}.down_proj.weight")
            x = x + _mlp(w, f"{p}.{i}.mlp.shared_experts", h)
        states[self.num_layers] = x
        return np.stack([states[i] for i in layer_ids], axis=1)
