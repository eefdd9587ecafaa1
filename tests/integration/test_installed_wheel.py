"""The x86_64 wheel installed into a fresh CPU venv, and the same checks on
the unpatched upstream wheel, which must fail them."""

from __future__ import annotations

import os
import subprocess

import pytest
from vpq.contract import items as contract_items

from tests.support.paths import REPO_ROOT

ARCHS = ["KimiK25ForConditionalGeneration", "DeepseekV3ForCausalLM", "DeepseekV2ForCausalLM"]


def test_installed_version_carries_the_series_label(patched_probe, built) -> None:
    version = built["x86_64"].wheel.version
    assert patched_probe["version"] == version == patched_probe["dist_version"]
    assert "+eagle3." in version


def test_manifest_is_readable_with_importlib_metadata(patched_probe, pin) -> None:
    man = patched_probe["manifest"]
    assert man["ok"], man
    assert man["value"]["upstream"]["version"] == pin.version
    assert man["value"]["eagle3_architectures"] == list(contract_items.CLAIMS)
    assert man["value"]["eagle3_claims"] == contract_items.manifest_claims()["eagle3_claims"]


def test_claimed_architectures_support_eagle3(patched_probe) -> None:
    res = patched_probe["supports_eagle3"]
    assert res["ok"], res
    assert res["value"] == {a: True for a in ARCHS}


def test_speculative_config_accepts_tiny_kimi_k25_with_eagle3_drafter(patched_probe) -> None:
    res = patched_probe["speculative_config"]
    assert res == {"ok": True, "value": "eagle3:LlamaForCausalLMEagle3"}, res


@pytest.mark.outside_ci  # CI: a representative subset (docs/tests.md)
def test_unpatched_upstream_fails_the_same_checks(upstream_probe) -> None:
    assert upstream_probe["version"] == "0.17.1"
    assert upstream_probe["manifest"]["value"] is None
    assert upstream_probe["supports_eagle3"]["value"] == {a: False for a in ARCHS}
    spec = upstream_probe["speculative_config"]
    assert not spec["ok"]
    assert "eagle3 is only supported for" in spec["error"] and "deepseek_v3" in spec["error"]


def _verify(python) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(python), str(REPO_ROOT / "scripts" / "verify_install.py")],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "VLLM_LOGGING_LEVEL": "ERROR"},
    )


def test_verify_install_passes_on_the_patched_wheel(patched_python, built) -> None:
    proc = _verify(patched_python)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"vllm {built['x86_64'].wheel.version}" in proc.stdout
    assert "supports_eagle3(KimiK25ForConditionalGeneration) = True" in proc.stdout
    assert "verify_install: OK" in proc.stdout


def test_verify_install_fails_with_one_line_on_unpatched_upstream(upstream_python) -> None:
    proc = _verify(upstream_python)
    assert proc.returncode == 1
    reason = [ln for ln in proc.stderr.splitlines() if ln.startswith("verify_install:")]
    assert reason == [
        "verify_install: FAILED: vllm 0.17.1 has no vpq_manifest.json: "
        "this is not a patch-queue build"
    ]
