"""Every public Kimi-K2.5 EAGLE-3 head shape, as a new user would meet it.

Config-only heads (``vpq.checkpoints.fixture.write_eagle3_head``) on an 8-layer tiny
Kimi-K2.5 target, through ``SpeculativeConfig(method="eagle3")``, the
model registry, ``ModelConfig.use_mla`` and both model runners' aux-layer
lookups (``tests/integration/head_matrix_probe.py``), in the patched wheel's
venv and in the unpatched upstream wheel's, where today's failures must
show.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from vpq.checkpoints import fixture

PROBE = Path(__file__).with_name("head_matrix_probe.py")
TARGET_LAYERS = 8
#: Not the target's default (2, N // 2, N - 3) = (2, 4, 5), so a lookup that
#: fell back to the default cannot pass.
IDS = [1, 3, 6]
LLAMA = "vllm.model_executor.models.llama_eagle3.Eagle3LlamaForCausalLM"
MLA = "vllm.model_executor.models.deepseek_eagle3.Eagle3DeepseekV2ForCausalLM"
KEY = "eagle_aux_hidden_state_layer_ids"
#: shape -> (draft class, use_mla, where the runner says the ids came from)
EXPECTED = {
    "llama-top": (LLAMA, False, KEY),
    "llama-absent": (LLAMA, False, None),
    "llama-nested": (LLAMA, False, f"eagle_config.{KEY}"),
    "mla-deepseek_v2": (MLA, True, KEY),
    "mla-kimi_k2": (MLA, True, KEY),
    "eagle3.1-llama": (LLAMA, False, f"eagle_config.{KEY}"),
    "eagle3.1-mla": (MLA, True, f"eagle_config.{KEY}"),
}
RUNNERS = ("runner", "runner_v2")


@pytest.fixture(scope="module")
def heads(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Path]]:
    base = tmp_path_factory.mktemp("heads")
    target = fixture.write_tiny_kimi_k25(base / "kimi-k25-8", num_layers=TARGET_LAYERS)
    return target, [fixture.write_eagle3_head(base / s, s, tuple(IDS)) for s in fixture.HEAD_SHAPES]


def _probe(python: Path, heads: tuple[Path, list[Path]], *flags: str) -> dict[str, dict]:
    target, dirs = heads
    proc = subprocess.run(
        [str(python), str(PROBE), *flags, str(target), *map(str, dirs)],
        capture_output=True,
        text=True,
        timeout=900,
    )
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("PROBE ")]
    assert proc.returncode == 0 and lines, proc.stdout[-3000:] + proc.stderr[-3000:]
    return json.loads(lines[-1][len("PROBE ") :])["heads"]


@pytest.fixture(scope="module")
def patched(patched_python, heads) -> dict[str, dict]:
    return _probe(patched_python, heads)


@pytest.fixture(scope="module")
def upstream(upstream_python, heads) -> dict[str, dict]:
    return _probe(upstream_python, heads, "--past-target-gate")


def _levels(res: dict, level: str) -> list[str]:
    return [msg for lvl, msg in res["logs"] if lvl == level]


@pytest.mark.parametrize("shape", list(EXPECTED))
def test_patched_wheel_serves_head_shape(patched, shape) -> None:
    cls, use_mla, source = EXPECTED[shape]
    res = patched[shape]
    assert res["accepted"] == {"ok": True}, res
    assert res["draft_class"] == {"ok": True, "value": cls}
    assert res["use_mla"] == {"ok": True, "value": use_mla}
    for runner in RUNNERS:
        got = res[runner]
        if source is None:
            assert got["ok"] and got["value"] is None, got
            (warning,) = _levels(got, "WARNING")
            assert KEY in warning and "default" in warning
        else:
            assert got["ok"] and got["value"] == IDS, got
            assert _levels(got, "WARNING") == []
            (info,) = [m for m in _levels(got, "INFO") if "aux hidden state layers" in m]
            assert info.endswith(f"from the draft config's {source}") and str(tuple(IDS)) in info


def test_mla_heads_keep_their_model_type(patched) -> None:
    """kimi_k2 stays kimi_k2 (not rewritten into the deepseek_v3 MTP path)."""
    assert patched["mla-kimi_k2"]["model_type"] == "kimi_k2"
    assert patched["mla-deepseek_v2"]["model_type"] == "deepseek_v2"


@pytest.mark.parametrize("runner", RUNNERS)
def test_explicit_empty_ids_are_refused_not_defaulted(patched, runner) -> None:
    got = patched["llama-empty"][runner]
    assert not got["ok"] and got["error"].startswith("ValueError: ")
    assert KEY in got["error"] and "[]" in got["error"]


@pytest.mark.outside_ci  # CI: a representative subset (docs/tests.md)
def test_unpatched_upstream_refuses_every_head_on_kimi_k25(upstream) -> None:
    """Llama heads hit the target allowlist; MLA heads fail earlier, on the head."""
    for shape, res in upstream.items():
        assert not res["accepted_plain"]["ok"], shape
        if fixture.HEAD_SHAPES[shape][0] == "LlamaForCausalLMEagle3":
            assert "eagle3 is only supported for" in res["accepted_plain"]["error"], shape


def test_unpatched_upstream_refuses_mla_heads(upstream) -> None:
    res = upstream["mla-deepseek_v2"]["accepted"]
    assert not res["ok"] and "['Eagle3DeepseekV2ForCausalLM'] are not supported" in res["error"], (
        res
    )
    for shape in ("mla-kimi_k2", "eagle3.1-mla"):
        res = upstream[shape]["accepted"]
        assert not res["ok"] and "model type `kimi_k2`" in res["error"], (shape, res)


@pytest.mark.parametrize("runner", RUNNERS)
def test_unpatched_upstream_silently_defaults_nested_and_absent_ids(upstream, runner) -> None:
    for shape in ("llama-nested", "eagle3.1-llama", "llama-absent", "llama-empty"):
        res = upstream[shape]
        assert res["accepted"] == {"ok": True}, (shape, res)
        got = res[runner]
        assert got["ok"] and got["value"] is None, (shape, got)
        assert _levels(got, "WARNING") == [], (shape, got)
    assert upstream["llama-top"][runner]["value"] == IDS
