"""The reasons advisories.toml gives for ``not-affected`` hold in the code of
the pinned upstream release (read from its hash-checked sdist): each test is
an entry's ``check``, so lint holds the ledger to a test that can fail when
a new pin brings the code path in."""

from __future__ import annotations

import ast
import tarfile

import pytest
from vpq.source import fetch, lock
from vpq.wheels import advisories

from tests.support.paths import REPO_ROOT

MODELS = "vllm/model_executor/models"
#: The model files the series serves as targets (Kimi-K2.5 wraps DeepSeek-V3).
TARGETS = ("kimi_k25.py", "deepseek_v2.py")


@pytest.fixture(scope="module")
def sources() -> dict[str, str]:
    """``vllm/...`` path -> text of every Python file in the pinned sdist."""
    pin = lock.load(REPO_ROOT)
    sdist = fetch.fetch(pin.name, pin.sdist.filename, pin.sdist.sha256)
    prefix = f"vllm-{pin.version}/"
    out = {}
    with tarfile.open(sdist) as tar:
        for m in tar.getmembers():
            if m.isfile() and m.name.startswith(prefix + "vllm/") and m.name.endswith(".py"):
                f = tar.extractfile(m)
                assert f is not None
                out[m.name.removeprefix(prefix)] = f.read().decode()
    assert f"{MODELS}/kimi_k25.py" in out, "the sdist has no Kimi-K2.5 model"
    return out


#: The ledger's entries whose reason is code the pin does not have.
ABSENT = [a for a in advisories.load(REPO_ROOT) if a.absent]


@pytest.mark.parametrize("entry", ABSENT, ids=[a.id for a in ABSENT])
def test_the_code_an_advisory_names_is_absent_from_the_pin(
    sources: dict[str, str], entry: advisories.Advisory
) -> None:
    """Each ``absent`` marker of a ``code_not_present`` entry: the file is not
    in the pinned sdist, or (``file::text``) the file is there without the
    text. A marker whose file is missing too says nothing, and fails."""
    for marker in entry.absent:
        path, _, text = marker.partition("::")
        if not text:
            assert path not in sources, f"{entry.id}: the pin has {path}"
            continue
        assert path in sources, f"{entry.id}: {path} is not in the pin: the marker checks nothing"
        assert text not in sources[path], f"{entry.id}: {path} has {text!r}"


def _class_bases_and_methods(text: str) -> dict[str, tuple[set[str], set[str]]]:
    """Class name -> (base names, method names) of a module."""
    out = {}
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.ClassDef):
            bases = {ast.unparse(b).split(".")[-1] for b in node.bases}
            methods = {n.name for n in node.body if isinstance(n, ast.FunctionDef)}
            out[node.name] = (bases, methods)
    return out


def test_kimi_k25_and_deepseek_have_no_mrope_positions(sources) -> None:
    """GHSA-hpv8-x276-m59f: the crash is in M-RoPE input positions. No class
    in the target model files is ``SupportsMRoPE`` or computes M-RoPE
    positions (while upstream's Qwen2-VL, where the advisory's crash is,
    does: the check can see it)."""
    qwen = _class_bases_and_methods(sources[f"{MODELS}/qwen2_vl.py"])
    assert any("SupportsMRoPE" in b for b, _ in qwen.values()), "the check cannot see M-RoPE"
    for name in TARGETS:
        for cls, (bases, methods) in _class_bases_and_methods(sources[f"{MODELS}/{name}"]).items():
            assert "SupportsMRoPE" not in bases, f"{name}: {cls} is SupportsMRoPE"
            assert "get_mrope_input_positions" not in methods, f"{name}: {cls}"


def test_the_activation_assert_is_reached_only_from_pooling_layers(sources) -> None:
    """GHSA-q8gq-377p-jq3r: ``get_cross_encoder_act_fn`` (the assert) is
    called only from the pooling layers, and the target model files use
    nothing of the pooler."""
    callers = {
        path
        for path, text in sources.items()
        if "get_cross_encoder_act_fn" in text or "resolve_classifier_act_fn" in text
    }
    assert "vllm/model_executor/layers/pooler/activations.py" in callers
    outside = {p for p in callers if not p.startswith("vllm/model_executor/layers/pooler/")}
    assert outside == set(), f"reached from outside the pooling path: {sorted(outside)}"
    for name in TARGETS:
        assert "pooler" not in sources[f"{MODELS}/{name}"], f"{name} imports the pooler"
