"""The speculative config accepts EAGLE-3 on a DeepSeek-V3 and a Kimi-K2.5
target (the probe of the allowlist patch).

Upstream lists the target model types EAGLE-3 may run on in 0.17.1 through
0.20.x (DeepSeek and Kimi from 0.18.0) and drops the list in 0.22.0; this
asks ``SpeculativeConfig`` itself, so it holds wherever the gate went.
Config directories only (the tiny fixture's Kimi-K2.5 and Llama-shaped
EAGLE-3 head): no weights, no GPU.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.semantics import stubs, unpatched

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
from vpq.checkpoints import fixture  # noqa: E402


def _target(kind: str, dest: Path) -> Path:
    if kind == "kimi_k25":
        return fixture.write_tiny_kimi_k25(dest)
    return stubs.write_text_config(dest, 4)


@unpatched.fails_unpatched_with(
    raises="ValidationError",
    match="eagle3 is only supported for",
    reason="the refusal the patch lifts",
)
@pytest.mark.parametrize("kind", ["deepseek_v3", "kimi_k25"])
def test_speculative_config_accepts_eagle3_on_the_target(tmp_path: Path, kind: str) -> None:
    from vllm.config import ModelConfig, ParallelConfig, SpeculativeConfig

    target = ModelConfig(model=str(_target(kind, tmp_path / kind)), skip_tokenizer_init=True)
    head = fixture.write_tiny_eagle3_drafter(tmp_path / "head")
    sc = SpeculativeConfig(
        target_model_config=target,
        target_parallel_config=ParallelConfig(),
        method="eagle3",
        model=str(head),
        num_speculative_tokens=2,
    )
    # Accepted as EAGLE-3 with the head as its drafter: not refused, and not
    # rewritten (a deepseek_v3-typed drafter would become MTP).
    assert (sc.method, sc.draft_model_config.model) == ("eagle3", str(head))
    assert sc.draft_model_config.hf_config.architectures == ["LlamaForCausalLMEagle3"]
