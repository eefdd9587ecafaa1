"""The compile-cache key names the drafter (backport of vllm PR #47911,
first released in v0.26.0; patch
``speculative-drafter-identity-in-compile-cache-key.patch``).

``torch.compile`` artifacts are cached under a key built from
``VllmConfig.compute_hash``, to which ``SpeculativeConfig.compute_hash``
contributes. In 0.17.1 that part hashes only the method and the drafter's
``eagle_aux_hidden_state_layer_ids``, so swapping one EAGLE-3 drafter for
another with the same ids reuses the first one's compiled artifacts.
Upstream's rule (0.26.0): the drafter's ``ModelConfig.compute_hash`` (its
path, revision, dtype, quantization, ...) is a factor. Fails on unpatched
0.17.1 and on the series before this patch.
"""

from __future__ import annotations

from tests.semantics import llama_head


def test_two_drafters_with_the_same_layer_ids_hash_differently(tmp_path) -> None:
    target = llama_head.write_target_config(tmp_path / "target")
    one = llama_head.speculative_config(
        target, llama_head.write_head_config(tmp_path / "drafter-a"), pp=1
    )
    other = llama_head.speculative_config(
        target, llama_head.write_head_config(tmp_path / "drafter-b"), pp=1
    )
    assert one.draft_model_config.hf_config.eagle_aux_hidden_state_layer_ids == [1, 2, 3]
    assert other.draft_model_config.hf_config.eagle_aux_hidden_state_layer_ids == [1, 2, 3]
    assert one.compute_hash() != other.compute_hash()


def test_the_same_drafter_hashes_the_same_and_different_ids_differ(tmp_path) -> None:
    """The key stays stable for one drafter (so the cache is reused) and
    still separates layer-id lists, as before."""
    import json

    target = llama_head.write_target_config(tmp_path / "target")
    drafter = llama_head.write_head_config(tmp_path / "drafter")
    first = llama_head.speculative_config(target, drafter, pp=1).compute_hash()
    assert llama_head.speculative_config(target, drafter, pp=1).compute_hash() == first
    cfg = json.loads((tmp_path / "drafter" / "config.json").read_text())
    cfg["eagle_aux_hidden_state_layer_ids"] = [0, 2, 3]
    (tmp_path / "drafter" / "config.json").write_text(json.dumps(cfg))
    assert llama_head.speculative_config(target, drafter, pp=1).compute_hash() != first
    other = llama_head.speculative_config(
        target, llama_head.write_head_config(tmp_path / "other"), pp=1
    ).compute_hash()
    assert other != first


def test_layer_ids_nested_under_eagle_config_are_in_the_key(tmp_path) -> None:
    """The runner reads ids under ``eagle_config`` when the top level has
    none (EAGLE 3.1 and SpecForge heads), so those ids shape the graph and
    must be in the key. ``SpeculativeConfig.compute_hash`` itself hashes the
    top-level key only (through 0.33.0), but the drafter's
    ``ModelConfig.compute_hash`` that this backport adds hashes the draft
    ``hf_config`` whole, nested ids included: rewriting only the nested ids
    of one drafter, in place, changes the key. (Measured: with the top-level
    lookup alone this still holds, so no patch of our own is needed.)"""
    import json

    target = llama_head.write_target_config(tmp_path / "target")
    drafter = llama_head.write_head_config(tmp_path / "drafter")
    path = tmp_path / "drafter" / "config.json"
    cfg = json.loads(path.read_text())
    ids = cfg.pop("eagle_aux_hidden_state_layer_ids")
    cfg["eagle_config"] = {"eagle_aux_hidden_state_layer_ids": ids}
    path.write_text(json.dumps(cfg))
    first = llama_head.speculative_config(target, drafter, pp=1).compute_hash()
    cfg["eagle_config"]["eagle_aux_hidden_state_layer_ids"] = [0, 2, 3]
    path.write_text(json.dumps(cfg))
    assert llama_head.speculative_config(target, drafter, pp=1).compute_hash() != first
