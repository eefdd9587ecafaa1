"""Image embeddings stay cached until the EAGLE drafter's look-ahead has
read them (backport of vllm PR #46315, first released in v0.24.0; patch
``scheduler-keep-encoder-cache-for-drafter-lookahead.patch``).

The drafter gathers multimodal embeddings one position ahead of the
target (``shift_computed_tokens=1``), but in 0.17.1 the scheduler frees
an image's encoder-cache entry as soon as the target's
``num_computed_tokens`` reaches the image's end, so EngineCore can die
with "Encoder cache miss". Upstream's rules (0.24.0): the scheduler's
``_free_encoder_inputs`` keeps an entry until ``num_computed_tokens``
passes its end by the look-ahead (1 with EAGLE); the runner's
``_gather_mm_embeddings`` skips a feature that starts at or after the
target's processed boundary (only the look-ahead reaches it) instead of
asserting.

The scheduler here is the real one, built from a tiny local Llama
target with an EAGLE-3 head; its encoder cache is sized by hand because a
text-only target has none (a multimodal target would need its
processor). ``GPUModelRunner`` needs CUDA to construct, so
``_gather_mm_embeddings`` runs on a stand-in runner. Each test fails on
unpatched 0.17.1 and on the series before this patch.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from tests.semantics import llama_head

IMAGE_OFFSET, IMAGE_LEN, PROMPT_LEN = 8, 16, 48


def _scheduler(tmp_path, chunk: int):  # type: ignore[no-untyped-def]
    """The real ``Scheduler`` with an encoder cache sized by hand (a
    text-only target has none)."""
    from vllm.v1.core.encoder_cache_manager import EncoderCacheManager

    sched = llama_head.scheduler(tmp_path, batched_tokens=chunk)
    sched.encoder_cache_manager = EncoderCacheManager(cache_size=64)
    sched.max_num_encoder_input_tokens = 64
    return sched


def _image_request():  # type: ignore[no-untyped-def]
    from vllm.multimodal.inputs import MultiModalFeatureSpec, MultiModalKwargsItem, PlaceholderRange
    from vllm.sampling_params import SamplingParams
    from vllm.v1.request import Request

    feature = MultiModalFeatureSpec(
        data=MultiModalKwargsItem.dummy(),
        modality="image",
        identifier="img0",
        mm_position=PlaceholderRange(offset=IMAGE_OFFSET, length=IMAGE_LEN),
    )
    return Request(
        request_id="r0",
        prompt_token_ids=[5] * PROMPT_LEN,
        sampling_params=SamplingParams(max_tokens=4),
        pooling_params=None,
        mm_features=[feature],
    )


def test_scheduler_keeps_the_image_cached_until_the_drafter_lookahead_passes_it(tmp_path) -> None:
    """A prefill chunk that ends exactly at the image's end: the target is
    done with it once the step has run, the drafter (one position ahead)
    reads it in that same step. Nothing may free the entry when that step
    is scheduled: 0.17.1 frees it there; the patch keeps it until
    ``num_computed_tokens`` passes the end by the look-ahead; 0.24.0 frees
    only after the step ran (``update_from_output``), with the look-ahead
    until 0.32.0 and without from 0.33.0. Once the request is well past the
    image, ``_free_encoder_inputs`` frees it in every release."""
    sched = _scheduler(tmp_path, chunk=IMAGE_OFFSET + IMAGE_LEN)
    req = _image_request()
    sched.add_request(req)

    first = sched.schedule()
    assert first.num_scheduled_tokens == {"r0": IMAGE_OFFSET + IMAGE_LEN}
    assert first.scheduled_encoder_inputs == {"r0": [0]}
    manager = sched.encoder_cache_manager
    assert manager.cached["img0"] == {"r0"} and "img0" not in manager.freeable  # still referenced

    req.num_computed_tokens = PROMPT_LEN
    sched._free_encoder_inputs(req)
    assert manager.cached["img0"] == set() and "img0" in manager.freeable


def test_drafter_gather_skips_an_image_only_its_lookahead_reaches(monkeypatch) -> None:
    """The target processed ``[0, 8)``; the drafter's window ``[1, 9)``
    touches an image starting at 8 that is not encoded yet. It keeps the
    token embedding there; a miss inside the target's range still raises."""
    from vllm.multimodal.inputs import MultiModalFeatureSpec, PlaceholderRange
    from vllm.v1.worker import gpu_model_runner
    from vllm.v1.worker.gpu_model_runner import GPUModelRunner

    # From 0.24.0 the mask is allocated pinned, which needs CUDA.
    monkeypatch.setattr(gpu_model_runner, "PIN_MEMORY", False, raising=False)
    feature = MultiModalFeatureSpec(
        data=None,
        modality="image",
        identifier="img0",
        mm_position=PlaceholderRange(offset=8, length=16),
    )
    mask = torch.zeros(64, dtype=torch.bool)
    buf = SimpleNamespace(cpu=mask, copy_to_gpu=lambda n: mask[:n])
    r = object.__new__(GPUModelRunner)
    r.is_mm_embed_idx = 0
    r.is_mm_embed_buffers = [buf, buf]
    r.input_batch = SimpleNamespace(req_ids=["r0"])
    r.requests = {"r0": SimpleNamespace(num_computed_tokens=0, mm_features=[feature])}
    r.encoder_cache = {}
    r.uses_mrope = False
    r.uses_xdrope_dim = 0
    r.is_multimodal_pruning_enabled = False
    r.device = torch.device("cpu")
    out = SimpleNamespace(total_num_scheduled_tokens=8, num_scheduled_tokens={"r0": 8})
    mm_embeds, is_mm_embed = r._gather_mm_embeddings(out, shift_computed_tokens=1)
    assert mm_embeds == [] and not is_mm_embed.any()
    r.requests["r0"].num_computed_tokens = 8  # now the target itself needs it
    with pytest.raises((RuntimeError, AssertionError), match="Encoder cache miss"):
        r._gather_mm_embeddings(out, shift_computed_tokens=1)
