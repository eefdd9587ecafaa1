"""``SpeculativeConfig(method="extract_hidden_states")`` on a Kimi-K2.5 target.

Hidden-state extraction (how EAGLE-3 training data is collected from the
served target) builds its drafter's config from the target's with
``ExtractHiddenStatesConfig``. Rule (upstream v0.20.0, vllm issue #39017):
a multimodal target keeps its text config a config object there, so the
config's own check finds ``num_attention_heads`` in it. Config only (the
tiny fixture's Kimi-K2.5): no weights, no GPU.
"""

from __future__ import annotations

import sys
from pathlib import Path

from tests.semantics import unpatched

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
from vpq.checkpoints import fixture  # noqa: E402


@unpatched.fails_unpatched_with(
    raises="ValidationError",
    match="does not have `num_attention_heads`",
    reason="the error the patch fixes: the flattened text_config is a dict",
)
def test_extract_hidden_states_keeps_kimi_k25_s_text_config(tmp_path: Path) -> None:
    from transformers import PretrainedConfig
    from vllm.config import ModelConfig, ParallelConfig, SpeculativeConfig

    target = fixture.write_tiny_kimi_k25(tmp_path / "kimi-k25")
    mc = ModelConfig(model=str(target), skip_tokenizer_init=True)
    sc = SpeculativeConfig(
        target_model_config=mc,
        target_parallel_config=ParallelConfig(),
        method="extract_hidden_states",
        num_speculative_tokens=1,
    )
    hf = sc.draft_model_config.hf_config
    assert hf.architectures == ["ExtractHiddenStatesModel"]
    assert isinstance(hf.text_config, PretrainedConfig)
    text = mc.hf_config.text_config
    assert (hf.text_config.num_attention_heads, hf.text_config.num_hidden_layers) == (
        text.num_attention_heads,
        text.num_hidden_layers,
    )
