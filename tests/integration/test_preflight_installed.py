"""The preflight asking the installed vLLM: the patched wheel and unpatched upstream.

The tiny heads of tests/support/heads.py against the tiny Kimi-K2.5 target, run by
``preflight_probe.py`` inside each CPU venv (one vLLM import per venv).
Each head has one expected outcome per wheel, fixed for the pinned release
(``PINNED``): the series serves every public head shape (the MLA heads of
both model types, ``eagle_config``-nested ids, EAGLE 3.1), unpatched 0.17.1
refuses each. The expectations are not computed with the preflight's own
calls; that the wheel really serves these shapes is proved independently by
the engine tier (tests/engine) and tests/semantics.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.support import heads
from tests.support.paths import REPO_ROOT

PROBE = Path(__file__).with_name("preflight_probe.py")
SCRIPT = REPO_ROOT / "scripts" / "verify_install.py"
LLAMA = ["llama-top-level-ids", "llama-no-ids"]
NESTED = ["llama-eagle-config-ids", "eagle3.1-fc_norm"]
MLA = ["mla-deepseek_v2", "mla-kimi_k2"]
TRAP = "mla-deepseek_v3-trap"
OUT_OF_RANGE = "llama-ids-out-of-range"
EAGLE31 = ["eagle3.1-fc_norm", "eagle3.1-mla"]
#: The release these outcomes were recorded on; a new pin re-records them.
PINNED = "0.17.1"
#: Whether ``SpeculativeConfig.hf_config_override`` rewrites a ``deepseek_v3``
#: drafter to MTP, by release and wheel: 0.17.1 does, and the series does not
#: change it (measured on both wheels, 2026-12-01).
MTP_TRAP_CONFIRMED = {PINNED: {"patched": True, "upstream": True}}


@pytest.fixture(scope="module", autouse=True)
def _pinned(pin) -> None:
    assert pin.version == PINNED, f"outcomes recorded for {PINNED}; record them for {pin.version}"


@pytest.fixture(scope="session")
def pair_dirs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    base = tmp_path_factory.mktemp("preflight")
    target = heads.write_target(base / "kimi-k25-tiny")
    hd = base / "heads"
    for name, build in heads.HEADS.items():
        heads.write_head(hd / name, build())
    cfg, tensors = heads.mla_deepseek_v2()
    cfg["model_type"] = "deepseek_v3"
    heads.write_head(hd / TRAP, (cfg, tensors))
    cfg, tensors = heads.llama_top_level()
    cfg["eagle_aux_hidden_state_layer_ids"] = [1, 4, 12]  # N = 8
    heads.write_head(hd / OUT_OF_RANGE, (cfg, tensors))
    return target, hd


def _probe(python: Path, dirs: tuple[Path, Path]) -> dict:
    proc = subprocess.run(
        [str(python), str(PROBE), str(REPO_ROOT / "scripts"), str(dirs[0]), str(dirs[1])],
        capture_output=True,
        text=True,
        timeout=900,
    )
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("PROBE ")]
    assert proc.returncode == 0 and lines, proc.stdout[-3000:] + proc.stderr[-3000:]
    return json.loads(lines[-1][len("PROBE ") :])


@pytest.fixture(scope="session")
def patched(patched_python, pair_dirs) -> dict:
    return _probe(patched_python, pair_dirs)


@pytest.fixture(scope="session")
def upstream(upstream_python, pair_dirs) -> dict:
    return _probe(upstream_python, pair_dirs)


def by_rule(result: dict, rule: str) -> list[dict]:
    return [f for f in result["findings"] if f["rule"] == rule]


def errors(result: dict) -> list[str]:
    return [f["rule"] for f in result["findings"] if f["severity"] == "error"]


def test_patched_wheel_is_named_and_serves_eagle3_for_the_target(patched) -> None:
    for name, res in patched["preflight"].items():
        (v,) = by_rule(res, "vllm")
        assert v["severity"] == "info" and "(patch-queue build)" in v["message"], name
        (t,) = by_rule(res, "target-eagle3")
        assert t["severity"] == "info" and "supports_eagle3 holds" in t["message"], name


@pytest.mark.parametrize("name", LLAMA)
def test_patched_wheel_accepts_the_llama_heads_with_the_ids_they_declare(patched, name) -> None:
    res = patched["preflight"][name]
    assert errors(res) == [] and res["exit"] == 0, res
    (d,) = by_rule(res, "drafter-class")
    assert d["message"].endswith("vllm.model_executor.models.llama_eagle3.Eagle3LlamaForCausalLM")
    (ids,) = by_rule(res, "layer-ids-wheel")
    want = heads.IDS if name == "llama-top-level-ids" else [2, 4, 5]
    assert ids["severity"] == "info" and ids["message"].startswith(
        f"this wheel will use ids {want}"
    )


@pytest.mark.parametrize("name", NESTED)
def test_patched_wheel_uses_the_ids_nested_under_eagle_config(patched, name) -> None:
    """The series reads ``eagle_config`` ids (gpu_model_runner-read-eagle3-
    layer-ids-under-eagle_config.patch) and serves EAGLE 3.1 (llama_eagle3-
    eagle3.1-fc_norm-norm_output.patch): the preflight says the head's own ids
    are used and, for EAGLE 3.1, that the wheel reads ``fc_norm``."""
    res = patched["preflight"][name]
    assert errors(res) == [] and res["exit"] == 0, res
    (ids,) = by_rule(res, "layer-ids-wheel")
    assert ids["severity"] == "info", ids
    assert ids["message"] == f"this wheel will use ids {heads.IDS} (from the drafter config)"
    assert ids["key"] == "eagle_config.eagle_aux_hidden_state_layer_ids"
    wheel31 = by_rule(res, "eagle31-wheel")
    if name == "eagle3.1-fc_norm":
        (w,) = wheel31
        assert w["severity"] == "info" and "reads fc_norm, norm_output" in w["message"], w
    else:
        assert wheel31 == []


@pytest.mark.parametrize("name", MLA)
def test_patched_wheel_serves_both_mla_heads(patched, name) -> None:
    """The series adds ``Eagle3DeepseekV2ForCausalLM`` and reads ``kimi_k2``
    heads as MLA: both model types pass."""
    res = patched["preflight"][name]
    (mla,) = by_rule(res, "mla")
    assert "kv_lora_rank 512" in mla["message"]
    assert errors(res) == [] and res["exit"] == 0, res
    (d,) = by_rule(res, "drafter-class")
    assert d["severity"] == "info", d
    assert d["message"].endswith("deepseek_eagle3.Eagle3DeepseekV2ForCausalLM"), d


@pytest.mark.parametrize("which", ["patched", "upstream"])
def test_the_deepseek_v3_mtp_trap_is_confirmed_by_the_wheel(which, request) -> None:
    """0.17.1 rewrites ``deepseek_v3`` drafters to MTP and the series keeps
    that (``MTP_TRAP_CONFIRMED``): the preflight confirms the trap on both."""
    assert MTP_TRAP_CONFIRMED[PINNED][which]
    res = request.getfixturevalue(which)["preflight"][TRAP]
    (trap,) = by_rule(res, "mtp-trap")
    assert trap["key"] == "model_type"
    assert trap["severity"] == "error"
    assert (
        "confirmed: this wheel rewrites it to deepseek_mtp ['DeepSeekMTPModel']" in trap["message"]
    )
    assert res["exit"] == 1


@pytest.mark.parametrize("name", [*LLAMA, *NESTED, *MLA])
def test_unpatched_upstream_refuses_every_head(upstream, name) -> None:
    res = upstream["preflight"][name]
    assert res["exit"] == 1
    (v,) = by_rule(res, "vllm")
    assert "no vpq_manifest.json: not a patch-queue build" in v["message"]
    (t,) = by_rule(res, "target-eagle3")
    assert t["severity"] == "error" and "does not implement SupportsEagle3" in t["message"]
    (s,) = by_rule(res, "speculative-config")
    assert s["severity"] == "error", s
    if name in MLA:
        (d,) = by_rule(res, "drafter-class")
        assert d["severity"] == "error" and "not in this wheel's model registry" in d["message"]
    else:
        assert "eagle3 is only supported for" in s["message"], s
    assert set(errors(res)) <= {"target-eagle3", "speculative-config", "drafter-class"}, res


def _script(python: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(python), str(SCRIPT), *args],
        capture_output=True,
        text=True,
        timeout=900,
        env={**os.environ, "VLLM_LOGGING_LEVEL": "INFO"},
    )


def test_the_copied_script_reports_json_on_stdout_in_the_patched_venv(
    patched_python, pair_dirs
) -> None:
    """vLLM's own log lines (INFO here) go to stderr; stdout stays one JSON object."""
    target, hd = pair_dirs
    proc = _script(
        patched_python,
        "--model",
        str(target),
        "--drafter",
        str(hd / "llama-top-level-ids"),
        "--json",
    )
    assert "Traceback" not in proc.stderr
    data = json.loads(proc.stdout)
    assert proc.returncode == data["exit_code"] == 0, proc.stdout + proc.stderr[-2000:]
    assert {f["rule"] for f in data["findings"]} >= {
        "target-eagle3",
        "speculative-config",
        "drafter-class",
        "layer-ids-wheel",
    }


@pytest.mark.outside_ci  # CI: a representative subset (docs/tests.md)
def test_the_copied_script_fails_on_upstream(upstream_python, pair_dirs) -> None:
    target, hd = pair_dirs
    proc = _script(
        upstream_python, "--model", str(target), "--drafter", str(hd / "llama-top-level-ids")
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr[-2000:]
    assert "Traceback" not in proc.stdout + proc.stderr
    assert proc.stdout.splitlines()[-1].endswith(": FAILED")


@pytest.mark.parametrize("name", EAGLE31)
def test_patched_wheel_serves_eagle31_heads_in_the_module_list_layout(patched, name) -> None:
    """EAGLE 3.1 heads with ``fc_norm.0.weight`` ... as real checkpoints store
    them: the series (0.17.1 + the EAGLE 3.1 backports) serves them."""
    res = patched["preflight"][name]
    assert errors(res) == [] and res["exit"] == 0, res
    (e,) = [f for f in by_rule(res, "eagle31") if f["key"] == "fc_norm"]
    assert e["message"] == (
        "EAGLE 3.1: fc_norm set, fc_norm.0.weight ... fc_norm.2.weight, [256] each present"
    )


def test_patched_wheel_refuses_out_of_range_ids_and_the_preflight_says_so(patched) -> None:
    """Ids [1, 4, 12] on the 8-layer target: the wheel's DeepSeek model
    raises ValueError at load; the report gives that refusal, not the ids as used."""
    res = patched["preflight"][OUT_OF_RANGE]
    (ids,) = by_rule(res, "layer-ids-wheel")
    assert ids["severity"] == "error", ids
    assert ids["message"].startswith(
        "this wheel's runner reads ids [1, 4, 12] (from the drafter config) and its target "
        "model refuses them at load: ValueError: EAGLE-3 aux hidden state layer ids [12] are "
        "out of range for DeepseekV3ForCausalLM: valid ids are 0..8"
    ), ids
    assert "will use" not in ids["message"]
    assert set(errors(res)) == {"layer-id-range", "layer-ids-wheel"} and res["exit"] == 1
