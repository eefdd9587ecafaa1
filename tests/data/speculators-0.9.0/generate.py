"""How the files beside this one were made: speculators 0.9.0's own
classes writing three tiny EAGLE-3 heads (``config.json`` as written, and
each ``model.safetensors``' tensor names and shapes), the reference for
``vpq.checkpoints.fixture.speculators_eagle3_config`` and ``tests/support/heads.py``'s
``speculators_head`` (tests/unit/test_preflight_speculators.py compares).

Run once, by hand, on 2026-12-02: ``pip install --no-deps
speculators==0.9.0`` into a venv over torch 2.13.0+cpu and transformers
5.24.0 (the library's other dependencies, data sets and serving, stubbed:
the config and model classes do not use them), then
``python generate.py OUTDIR``. Not run by the test suite: the library
needs transformers 5, which vLLM 0.17.1's venvs do not have.
"""

import json
import struct
import sys
from pathlib import Path

from speculators.config import SpeculatorsConfig, VerifierConfig
from speculators.models.eagle3 import Eagle3SpeculatorConfig
from speculators.models.eagle3.core import Eagle3DraftModel
from speculators.proposals.greedy import GreedyTokenProposalConfig
from transformers import LlamaConfig
from transformers.models.qwen3.configuration_qwen3 import Qwen3Config

out = Path(sys.argv[1])
out.mkdir(parents=True, exist_ok=True)
kw = dict(
    vocab_size=1024,
    hidden_size=256,
    intermediate_size=512,
    num_hidden_layers=1,
    num_attention_heads=4,
    num_key_value_heads=4,
    head_dim=64,
    max_position_embeddings=2048,
    rms_norm_eps=1e-6,
    tie_word_embeddings=False,
    bos_token_id=1,
    eos_token_id=2,
    rope_parameters={"rope_theta": 50000.0, "rope_type": "default"},
)
sc = SpeculatorsConfig(
    algorithm="eagle3",
    proposal_methods=[GreedyTokenProposalConfig(speculative_tokens=3)],
    default_proposal_method="greedy",
    verifier=VerifierConfig(
        name_or_path="moonshotai/Kimi-K2.5", architectures=["KimiK25ForConditionalGeneration"]
    ),
)
cases = {
    "eagle3-default-recipe": dict(
        tl=LlamaConfig(**kw), norm_before_fc=True, norm_output=True, ids=[1, 2, 3]
    ),
    "eagle3-fc_norm": dict(tl=LlamaConfig(**kw), fc_norm=True, norm_output=True, ids=[1, 2, 3]),
    "eagle3-qwen3-layer-no-ids": dict(
        tl=Qwen3Config(**kw), norm_before_fc=True, norm_output=True, ids=None
    ),
}
for name, c in cases.items():
    cfg = Eagle3SpeculatorConfig(
        transformer_layer_config=c["tl"],
        draft_vocab_size=1024,
        norm_before_residual=True,
        norm_before_fc=c.get("norm_before_fc", False),
        fc_norm=c.get("fc_norm", False),
        norm_output=c.get("norm_output", False),
        eagle_aux_hidden_state_layer_ids=c["ids"],
        speculators_config=sc,
    )
    d = out / name
    m = Eagle3DraftModel(config=cfg)
    m.save_pretrained(d)
    b = (d / "model.safetensors").read_bytes()
    n = struct.unpack("<Q", b[:8])[0]
    h = json.loads(b[8 : 8 + n])
    tensors = {k: v["shape"] for k, v in sorted(h.items()) if k != "__metadata__"}
    (out / f"{name}.config.json").write_text((d / "config.json").read_text())
    (out / f"{name}.tensors.json").write_text(json.dumps(tensors, indent=2, sort_keys=True) + "\n")
    print(name, sorted(tensors))
