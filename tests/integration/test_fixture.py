"""vLLM (the patched wheel, in a fresh CPU venv) accepts the tiny fixture.

``fixture_probe.py`` loads the generated directories the way the engine
would, offline and without ``skip_tokenizer_init``; the GPU tests
(tests/gpu) then only add the engine run. Expected numbers follow from
``vpq.checkpoints.fixture`` and the probe's 224 x 168 pixel image: 16 x 12 patches of
14 pixels, merged 2 x 2 into 8 x 6 = 48 placeholder tokens.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from vpq.checkpoints import fixture

from tests.integration.venv_runs import run_probe

PROBE = Path(__file__).with_name("fixture_probe.py")


@pytest.fixture(scope="module")
def probe(patched_python: Path, tiny_configs: tuple[Path, Path]) -> dict[str, dict]:
    return run_probe(patched_python, tiny_configs, PROBE, timeout=900)  # type: ignore[return-value]


def _ok(res: dict) -> dict:
    assert res["ok"], res["error"]
    return res["value"]


def test_model_config_accepts_the_target_with_its_tokenizer(probe) -> None:
    mc = _ok(probe["model_config"])
    assert mc["architectures"] == ["KimiK25ForConditionalGeneration"]
    assert (mc["model_type"], mc["text_model_type"]) == ("kimi_k25", "deepseek_v3")
    assert mc["is_multimodal"] and mc["use_mla"] and mc["mla_head_size"] == 576
    assert not mc["skip_tokenizer_init"]
    assert mc["media_placeholder_token_id"] == fixture.MEDIA_PLACEHOLDER
    assert mc["vocab_size"] == fixture.VOCAB and mc["num_hidden_layers"] == fixture.NUM_LAYERS


def test_speculative_config_accepts_the_eagle3_drafter(probe) -> None:
    sc = _ok(probe["speculative_config"])
    assert sc["method"] == "eagle3"
    assert sc["draft_architectures"] == ["LlamaForCausalLMEagle3"]
    assert sc["eagle_aux_hidden_state_layer_ids"] == list(fixture.AUX_LAYER_IDS)
    assert sc["target_hidden_size"] == fixture.HIDDEN
    assert sc["draft_vocab_size"] == fixture.VOCAB


def test_vllm_loads_the_tokenizer_without_remote_code(probe) -> None:
    tok = _ok(probe["tokenizer"])
    assert tok["is_fast"] and not tok["trust_remote_code"]
    assert tok["len"] == fixture.VOCAB
    assert all(tok["round_trips"])
    assert tok["media_pad"] == [fixture.MEDIA_PLACEHOLDER]
    assert tok["bos_eos_pad"] == [fixture.BOS_ID, fixture.EOS_ID, fixture.PAD_ID]
    assert (
        tok["chat"]
        == "<|im_user|>user<|im_middle|>hi<|im_end|><|im_assistant|>assistant<|im_middle|>"
    )


def test_vllm_loads_the_image_processor_as_kimi_k25_does(probe) -> None:
    ip = _ok(probe["image_processor"])
    assert ip["class"] == fixture.IMAGE_PROCESSOR_CLASS
    assert ip["num_frames_per_chunk"] == fixture.MEDIA_PROC_CFG["temporal_merge_kernel_size"]
    assert ip["grid_thws"] == [[1, 12, 16]]
    assert ip["pixel_values"] == [12 * 16, 3, 14, 14]
    assert ip["tokens"] == 6 * 8


def test_kimi_k25_multimodal_processor_expands_the_image_placeholder(probe) -> None:
    mm = _ok(probe["mm_processor"])
    assert mm["media_tokens"] == 48
    # One placeholder run, right after "<|im_user|>user<|media_begin|>image<|media_content|>".
    assert mm["placeholders"] == [[8, 48]]
    assert mm["grid_thws"] == [[1, 12, 16]] and mm["pixel_values"] == [192, 3, 14, 14]
    # The engine's profiling input: the processor's largest item, a 4-frame
    # video chunk capped at 16 x 16 patches (64 tokens, pooled over time).
    assert mm["dummy_grid_thws"] == [[4, 16, 16]]
    assert mm["dummy_media_tokens"] == 64
