"""The preflight's file rules (scripts/verify_install.py), without vLLM.

Each public head shape passes; each rule, broken in exactly one way, gives
exactly its finding and exit code. The checkpoints are tiny real ones: a
``config.json`` and safetensors written with the ``safetensors`` library.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import verify_install as vi

from tests.support import heads
from tests.support.paths import REPO_ROOT
from tests.unit.preflight_files import preflight, problems

SCRIPT = REPO_ROOT / "scripts" / "verify_install.py"


def script(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": ""},
        timeout=120,
    )


# --- every public head shape passes ---------------------------------------

EXPECTED_ON_GOOD_HEADS = {
    "llama-top-level-ids": [],
    "llama-no-ids": [(vi.WARNING, "layer-ids-absent")],
    "llama-eagle-config-ids": [],
    "mla-deepseek_v2": [],
    "mla-kimi_k2": [],
    "eagle3.1-fc_norm": [],
    "eagle3.1-mla": [],
}


@pytest.mark.parametrize("name", sorted(heads.HEADS))
def test_public_head_shape_passes(name: str, target: Path, tmp_path: Path) -> None:
    head = heads.write_head(tmp_path / name, heads.HEADS[name]())
    findings = preflight(target, head)
    assert problems(findings) == EXPECTED_ON_GOOD_HEADS[name], findings
    assert vi.exit_code(findings) == 0


def test_layer_ids_report_their_source_and_the_ids_used(target: Path, tmp_path: Path) -> None:
    sources = {}
    for name in ("llama-top-level-ids", "llama-no-ids", "llama-eagle-config-ids"):
        f = preflight(target, heads.write_head(tmp_path / name, heads.HEADS[name]()))
        (src,) = [x for x in f if x.rule == "layer-ids-source"]
        sources[name] = (src.message, src.key)
    assert sources == {
        "llama-top-level-ids": (
            "ids [1, 4, 6] (from the top-level eagle_aux_hidden_state_layer_ids)",
            "eagle_aux_hidden_state_layer_ids",
        ),
        "llama-no-ids": (
            "ids [2, 4, 5] (none declared: the target's default)",
            "eagle_aux_hidden_state_layer_ids",
        ),
        "llama-eagle-config-ids": (
            "ids [1, 4, 6] (from eagle_config.eagle_aux_hidden_state_layer_ids)",
            "eagle_config.eagle_aux_hidden_state_layer_ids",
        ),
    }


def test_target_facts_come_from_the_text_config(target: Path, tmp_path: Path) -> None:
    f = preflight(target, heads.write_head(tmp_path / "h", heads.llama_top_level()))
    (t,) = [x for x in f if x.rule == "target"]
    assert t.message == (
        "KimiK25ForConditionalGeneration, text model_type deepseek_v3, N = 8 layers, hidden 256"
    )


def test_a_sharded_head_is_read_through_its_index(target: Path, tmp_path: Path) -> None:
    head = heads.write_head(tmp_path / "sharded", heads.eagle31(), shards=3)
    assert not list(head.glob("model.safetensors"))
    findings = preflight(target, head)
    assert problems(findings) == [] and vi.exit_code(findings) == 0
    (e,) = [x for x in findings if x.rule == "eagle31" and x.key == "fc_norm"]
    assert e.message == (
        "EAGLE 3.1: fc_norm set, fc_norm.0.weight ... fc_norm.2.weight, [256] each present"
    )


# --- each rule, broken in exactly one way -----------------------------------

Mutate = Callable[[dict, dict], None]


def _set(**kw: object) -> Mutate:
    def m(cfg: dict, tensors: dict) -> None:
        cfg.update(kw)

    return m


def _ids(ids: object) -> Mutate:
    return _set(eagle_aux_hidden_state_layer_ids=ids)


def _tensor(name: str, shape: tuple[int, ...] | None, dtype: type = np.float16) -> Mutate:
    def m(cfg: dict, tensors: dict) -> None:
        if shape is None:
            del tensors[name]
        else:
            tensors[name] = np.zeros(shape, dtype)

    return m


def _both(*ms: Mutate) -> Mutate:
    def m(cfg: dict, tensors: dict) -> None:
        for x in ms:
            x(cfg, tensors)

    return m


def _del(key: str) -> Mutate:
    def m(cfg: dict, tensors: dict) -> None:
        del cfg[key]

    return m


H = heads.HIDDEN
# (case id, head builder, mutation, expected (severity, rule) list, exit code, exit code --strict)
BROKEN: list[tuple[str, Callable[[], heads.Head], Mutate, list[tuple[str, str]], int, int]] = [
    (
        "drafter-config",
        heads.llama_top_level,
        _del("architectures"),
        [("error", "drafter-config")],
        1,
        1,
    ),
    (
        "mtp-trap",
        heads.mla_deepseek_v2,
        _set(model_type="deepseek_v3"),
        [("error", "mtp-trap")],
        1,
        1,
    ),
    ("mla-without-kv_lora_rank", heads.mla_kimi_k2, _del("kv_lora_rank"), [("error", "mla")], 1, 1),
    (
        "norm_before_fc-without-input_norm",
        heads.llama_top_level,
        _set(norm_before_fc=True),
        [("error", "eagle31-weights")],
        1,
        1,
    ),
    (
        "input_norm-without-norm_before_fc",
        heads.llama_top_level,
        _tensor("input_norm.weight", (3 * H,)),
        [("warning", "eagle31-weights")],
        0,
        1,
    ),
    (
        "eagle31-norm_output-weight-missing",
        heads.eagle31,
        _tensor("norm.weight", None),
        [("error", "eagle31-weights")],
        1,
        1,
    ),
    (
        "eagle31-weight-without-flag",
        heads.eagle31,
        _set(fc_norm=False),
        [("warning", "eagle31-weights")],
        0,
        1,
    ),
    ("layer-ids-absent", heads.llama_no_ids, _set(), [("warning", "layer-ids-absent")], 0, 1),
    (
        "layer-ids-conflict",
        heads.llama_top_level,
        _set(eagle_config={"eagle_aux_hidden_state_layer_ids": [2, 4, 5]}),
        [("warning", "layer-ids-conflict")],
        0,
        1,
    ),
    ("layer-ids-type", heads.llama_top_level, _ids("1,4,6"), [("error", "layer-ids-type")], 1, 1),
    ("layer-ids-empty", heads.llama_top_level, _ids([]), [("error", "layer-ids-empty")], 1, 1),
    (
        "layer-ids-empty-nested",
        heads.llama_nested_ids,
        _set(eagle_config={"eagle_aux_hidden_state_layer_ids": []}),
        [("error", "layer-ids-empty")],
        1,
        1,
    ),
    (
        "layer-id-range-above-N",
        heads.llama_top_level,
        _ids([1, 4, 9]),
        [("error", "layer-id-range")],
        1,
        1,
    ),
    (
        "layer-id-range-negative",
        heads.llama_top_level,
        _ids([-1, 4, 6]),
        [("error", "layer-id-range")],
        1,
        1,
    ),
    (
        "layer-id-duplicate",
        heads.llama_top_level,
        _ids([4, 4, 6]),
        [("error", "layer-id-duplicate")],
        1,
        1,
    ),
    (
        "layer-id-count-too-few",
        heads.llama_top_level,
        _ids([1, 4]),
        [("error", "layer-id-count")],
        1,
        1,
    ),
    (
        "layer-id-count-too-many",
        heads.llama_top_level,
        _ids([1, 4, 6, 7]),
        [("error", "layer-id-count")],
        1,
        1,
    ),
    (
        "layer-ids-convention-includes-N",
        heads.llama_top_level,
        _ids([2, 4, 8]),
        [("note", "layer-ids-convention")],
        0,
        0,
    ),
    (
        "layer-ids-convention-default-plus-one",
        heads.llama_top_level,
        _ids([3, 5, 6]),
        [("note", "layer-ids-convention")],
        0,
        0,
    ),
    (
        "target-hidden-size",
        heads.llama_top_level,
        _both(_set(target_hidden_size=128), _tensor("fc.weight", (H, 3 * 128))),
        [("error", "target-hidden-size")],
        1,
        1,
    ),
    (
        "target-hidden-size-from-hidden_size",
        heads.llama_top_level,
        _both(
            _del("target_hidden_size"),
            _set(hidden_size=128),
            _tensor("fc.weight", (128, 3 * 128)),
            _tensor("lm_head.weight", (512, 128)),
        ),
        [("error", "target-hidden-size")],
        1,
        1,
    ),
    (
        "fc-width-not-a-multiple",
        heads.llama_top_level,
        _tensor("fc.weight", (H, 700)),
        [("error", "fc-width")],
        1,
        1,
    ),
    (
        "fc-width-rows",
        heads.llama_top_level,
        _tensor("fc.weight", (128, 3 * H)),
        [("error", "fc-width")],
        1,
        1,
    ),
    (
        "fc-missing",
        heads.llama_top_level,
        _tensor("fc.weight", None),
        [("error", "fc-width")],
        1,
        1,
    ),
    (
        "fc-states",
        heads.llama_top_level,
        _both(_ids([1, 3, 4, 6]), _tensor("fc.weight", (H, 4 * H))),
        [("warning", "fc-states")],
        0,
        1,
    ),
    (
        "draft-vocab-lm_head",
        heads.llama_top_level,
        _tensor("lm_head.weight", (500, H)),
        [("error", "draft-vocab")],
        1,
        1,
    ),
    (
        "draft-vocab-d2t",
        heads.llama_top_level,
        _tensor("d2t", (100,), np.int64),
        [("error", "draft-vocab")],
        1,
        1,
    ),
    (
        "draft-vocab-t2d",
        heads.llama_top_level,
        _tensor("t2d", (10,), bool),
        [("error", "draft-vocab")],
        1,
        1,
    ),
    (
        "draft-vocab-no-d2t",
        heads.llama_top_level,
        _tensor("d2t", None),
        [("error", "draft-vocab")],
        1,
        1,
    ),
    (
        "embeddings-shape",
        heads.llama_top_level,
        _tensor("embed_tokens.weight", (heads.VOCAB, 128)),
        [("error", "embeddings")],
        1,
        1,
    ),
    (
        "embeddings-shared-other-vocab",
        heads.llama_top_level,
        _both(_set(vocab_size=2048), _tensor("t2d", (2048,), bool)),
        [("error", "embeddings")],
        1,
        1,
    ),
    (
        "no-weights",
        heads.llama_top_level,
        lambda cfg, t: t.clear(),
        [("error", "no-weights")],
        1,
        1,
    ),
]


@pytest.mark.parametrize(
    ("case", "build", "mutate", "expected", "code", "strict_code"),
    BROKEN,
    ids=[b[0] for b in BROKEN],
)
def test_each_rule_gives_exactly_its_finding(
    case, build, mutate, expected, code, strict_code, target: Path, tmp_path: Path
) -> None:
    cfg, tensors = build()
    mutate(cfg, tensors)
    head = tmp_path / case
    if tensors:
        heads.write_head(head, (cfg, tensors))
    else:
        head.mkdir()
        (head / "config.json").write_text(json.dumps(cfg))
    findings = preflight(target, head)
    assert problems(findings) == expected, findings
    assert vi.exit_code(findings) == code
    assert vi.exit_code(findings, strict=True) == strict_code


FC_NORM_BROKEN: list[tuple[str, Callable[[], heads.Head], Mutate, str]] = [
    ("one-norm-missing", heads.eagle31, _tensor("fc_norm.1.weight", None), "no fc_norm.1.weight"),
    (
        "a-single-fc_norm-weight",
        heads.eagle31,
        _both(
            *(_tensor(f"fc_norm.{i}.weight", None) for i in range(3)),
            _tensor("fc_norm.weight", (3 * H,)),
        ),
        "the checkpoint has a single fc_norm.weight [768], but vLLM builds fc_norm as one "
        "RMSNorm per aux state",
    ),
    (
        "a-norm-of-the-wrong-width",
        heads.eagle31,
        _tensor("fc_norm.2.weight", (3 * H,)),
        "fc_norm.2.weight [768]",
    ),
    (
        "more-norms-than-states",
        heads.eagle31,
        _tensor("fc_norm.3.weight", (H,)),
        "fc_norm.3.weight for a state fc does not take",
    ),
    (
        "mla-norm-missing",
        heads.eagle31_mla,
        _tensor("fc_norm.0.weight", None),
        "no fc_norm.0.weight",
    ),
]


@pytest.mark.parametrize(
    ("case", "build", "mutate", "needle"), FC_NORM_BROKEN, ids=[b[0] for b in FC_NORM_BROKEN]
)
def test_fc_norm_in_the_module_list_layout_is_checked_norm_by_norm(
    case, build, mutate, needle, target: Path, tmp_path: Path
) -> None:
    """EAGLE 3.1's ``fc_norm`` weights as upstream's ``nn.ModuleList`` names
    them (``fc_norm.0.weight`` ...), one ``[target_hidden]`` norm per aux
    state; a broken one is one error saying what is wrong."""
    cfg, tensors = build()
    mutate(cfg, tensors)
    findings = preflight(target, heads.write_head(tmp_path / case, (cfg, tensors)))
    assert problems(findings) == [("error", "eagle31-weights")], findings
    (e,) = [f for f in findings if f.rule == "eagle31-weights"]
    assert e.key == "fc_norm" and needle in e.message, e.message


def test_target_without_num_hidden_layers_is_an_error(target: Path, tmp_path: Path) -> None:
    cfg = json.loads((target / "config.json").read_text())
    del cfg["text_config"]["num_hidden_layers"]
    bad = tmp_path / "target"
    bad.mkdir()
    (bad / "config.json").write_text(json.dumps(cfg))
    findings = preflight(bad, heads.write_head(tmp_path / "h", heads.llama_top_level()))
    assert problems(findings) == [("error", "target-config")]
    assert findings[0].key == "text_config.num_hidden_layers"


def test_embeddings_present_and_right_are_reported(target: Path, tmp_path: Path) -> None:
    cfg, tensors = heads.llama_top_level()
    tensors["embed_tokens.weight"] = np.zeros((heads.VOCAB, H), np.float16)
    findings = preflight(target, heads.write_head(tmp_path / "h", (cfg, tensors)))
    assert problems(findings) == []
    (e,) = [x for x in findings if x.rule == "embeddings"]
    assert e.message == "own embed_tokens.weight [1024, 256]"


def test_model_prefixed_tensor_names_are_understood(target: Path, tmp_path: Path) -> None:
    cfg, tensors = heads.llama_top_level()
    tensors = {("model." + n if n.startswith("fc") else n): t for n, t in tensors.items()}
    assert problems(preflight(target, heads.write_head(tmp_path / "h", (cfg, tensors)))) == []


# --- bad input: one line naming the file, no traceback -----------------------


def _head(tmp_path: Path) -> Path:
    return heads.write_head(tmp_path / "head", heads.llama_top_level())


BAD_INPUTS: list[tuple[str, Callable[[Path, Path], Path], str]] = [
    ("missing-directory", lambda t, h: h.parent / "nope", "nope: drafter directory does not exist"),
    (
        "bad-json",
        lambda t, h: (h / "config.json").write_text("{ nope") and h,
        "config.json: not valid JSON",
    ),
    (
        "truncated-header",
        lambda t, h: (
            (h / "model.safetensors").write_bytes((h / "model.safetensors").read_bytes()[:40]) and h
        ),
        "model.safetensors: truncated safetensors header",
    ),
    (
        "short-file",
        lambda t, h: (h / "model.safetensors").write_bytes(b"\x01\x02") and h,
        "model.safetensors: truncated safetensors header",
    ),
    (
        "header-not-json",
        lambda t, h: (
            (h / "model.safetensors").write_bytes((8).to_bytes(8, "little") + b"not json") and h
        ),
        "model.safetensors: safetensors header is not valid JSON",
    ),
    (
        "missing-shard",
        lambda t, h: (
            (h / "model.safetensors.index.json").write_text(
                json.dumps({"weight_map": {"fc.weight": "model-00002-of-00002.safetensors"}})
            )
            and h
        ),
        "model-00002-of-00002.safetensors: no such file",
    ),
    ("missing-config", lambda t, h: (h / "config.json").unlink() or h, "config.json: no such file"),
]


@pytest.mark.parametrize(("case", "breakit", "needle"), BAD_INPUTS, ids=[b[0] for b in BAD_INPUTS])
def test_bad_input_is_one_line_naming_the_file(
    case, breakit, needle, target: Path, tmp_path: Path
) -> None:
    head = breakit(target, _head(tmp_path))
    proc = script("--model", str(target), "--drafter", str(head), "--no-vllm")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr
    errors = [ln for ln in proc.stdout.splitlines() if ln.strip().startswith("error")]
    assert len(errors) == 1 and needle in errors[0], proc.stdout
    assert str(head.parent) in errors[0]


# --- the command line ---------------------------------------------------------


def test_script_passes_a_good_pair_and_prints_a_summary(target: Path, tmp_path: Path) -> None:
    proc = script("--model", str(target), "--drafter", str(_head(tmp_path)), "--no-vllm")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.splitlines()[-1] == (
        "preflight: 0 error(s), 0 warning(s), 0 note(s): OK (file rules only: vLLM not asked)"
    )


def test_strict_turns_a_warning_into_exit_1(target: Path, tmp_path: Path) -> None:
    head = heads.write_head(tmp_path / "head", heads.llama_no_ids())
    args = ["--model", str(target), "--drafter", str(head), "--no-vllm"]
    assert script(*args).returncode == 0
    proc = script(*args, "--strict")
    assert proc.returncode == 1 and proc.stdout.splitlines()[-1].endswith("(--strict): FAILED")


def test_json_gives_the_same_findings(target: Path, tmp_path: Path) -> None:
    head = heads.write_head(tmp_path / "head", heads.llama_no_ids())
    proc = script("--model", str(target), "--drafter", str(head), "--no-vllm", "--json")
    data = json.loads(proc.stdout)
    assert proc.returncode == data["exit_code"] == 0
    infos = sum(f["severity"] == "info" for f in data["findings"])
    assert infos > 0
    assert data["counts"] == {"error": 0, "warning": 1, "note": 0, "info": infos}
    assert [f["rule"] for f in data["findings"]] == [
        f.rule for f in vi.preflight(target, head, use_vllm=False)
    ]
    (w,) = [f for f in data["findings"] if f["severity"] == "warning"]
    assert w == {
        **w,
        "rule": "layer-ids-absent",
        "file": str(head / "config.json"),
        "key": "eagle_aux_hidden_state_layer_ids",
    }


@pytest.mark.parametrize(
    "args",
    [
        ["--bogus"],
        ["--model", "x"],
        ["--drafter", "x"],
        ["--json"],
        ["--model", "x", "--drafter", "y", "--frobnicate"],
    ],
)
def test_usage_errors_exit_2(args: list[str]) -> None:
    proc = script(*args)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "usage:" in proc.stderr and "Traceback" not in proc.stderr


def test_without_vllm_it_fails_and_says_only_the_file_rules_ran(
    target: Path, tmp_path: Path
) -> None:
    """In the test venv vLLM is not installed: the rules still run, and an
    error (not a full OK) says the wheel's verdicts are unknown."""
    try:
        import vllm  # noqa: F401

        pytest.skip("vLLM is installed here")
    except ImportError:
        pass
    findings = vi.preflight(target, _head(tmp_path), use_vllm=True)
    assert problems(findings) == [("error", "vllm")]
    assert "vLLM does not import in this Python" in findings[-1].message
    assert "only the file rules ran" in findings[-1].message
    assert vi.exit_code(findings) == 1
    proc = script("--model", str(target), "--drafter", str(_head(tmp_path / "again")))
    assert proc.returncode == 1 and proc.stdout.splitlines()[-1].endswith(": FAILED")


def test_vpq_preflight_uses_the_same_rules(target: Path, tmp_path: Path, capsys) -> None:
    from vpq import cli

    head = heads.write_head(tmp_path / "head", heads.llama_no_ids())
    code = cli.main(
        ["preflight", "--model", str(target), "--drafter", str(head), "--no-vllm", "--json"]
    )
    data = json.loads(capsys.readouterr().out)
    assert code == data["exit_code"] == 0
    assert [f["rule"] for f in data["findings"]] == [
        f.rule for f in vi.preflight(target, head, use_vllm=False)
    ]
    assert (
        cli.main(
            ["preflight", "--model", str(target), "--drafter", str(head), "--no-vllm", "--strict"]
        )
        == 1
    )
    assert cli.main(["preflight", "--model", str(target)]) == 2
    with pytest.raises(SystemExit) as exc:
        cli.main(["preflight", "--bogus"])
    assert exc.value.code == 2


@pytest.mark.parametrize("name", ["mla-deepseek_v2", "mla-kimi_k2"])
def test_mla_heads_are_recognised(name: str, target: Path, tmp_path: Path) -> None:
    findings = preflight(target, heads.write_head(tmp_path / name, heads.HEADS[name]()))
    (mla,) = [f for f in findings if f.rule == "mla"]
    assert mla.severity == "info" and mla.message.startswith("MLA head (kv_lora_rank 512")
