"""The x86_64 wheel installed into a fresh CPU venv, and the same checks on
the unpatched upstream wheel, which must fail them."""

from __future__ import annotations

from vpq import build

ARCHS = ["KimiK25ForConditionalGeneration", "DeepseekV3ForCausalLM", "DeepseekV2ForCausalLM"]


def test_installed_version_carries_the_series_label(patched_probe, built) -> None:
    version = built["x86_64"].wheel.version
    assert patched_probe["version"] == version == patched_probe["dist_version"]
    assert "+eagle3." in version


def test_manifest_is_readable_with_importlib_metadata(patched_probe, pin) -> None:
    man = patched_probe["manifest"]
    assert man["ok"], man
    assert man["value"]["upstream"]["version"] == pin.version
    assert man["value"]["eagle3_architectures"] == list(build.CLAIMED_ARCHITECTURES)


def test_claimed_architectures_support_eagle3(patched_probe) -> None:
    res = patched_probe["supports_eagle3"]
    assert res["ok"], res
    assert res["value"] == {a: True for a in ARCHS}


def test_speculative_config_accepts_tiny_kimi_k25_with_eagle3_drafter(patched_probe) -> None:
    res = patched_probe["speculative_config"]
    assert res == {"ok": True, "value": "eagle3:LlamaForCausalLMEagle3"}, res


def test_unpatched_upstream_fails_the_same_checks(upstream_probe) -> None:
    assert upstream_probe["version"] == "0.17.1"
    assert upstream_probe["manifest"]["value"] is None
    assert upstream_probe["supports_eagle3"]["value"] == {a: False for a in ARCHS}
    spec = upstream_probe["speculative_config"]
    assert not spec["ok"]
    assert "eagle3 is only supported for" in spec["error"] and "deepseek_v3" in spec["error"]
