"""A stale ``-1`` draft placeholder never reaches the target's embedding
(backport of vllm PR #47029, first released in v0.25.0; patch
``v1/worker/gpu_model_runner-clamp-stale-draft-placeholders-to-valid-ids.patch``).

With async scheduling and EAGLE, the scheduler books ``[-1] * k`` drafts for
every decode request and the worker writes the real drafts over them from the
previous step (``_prepare_input_ids``), but only for requests that were in
the previous step's batch. A request the token budget left out of a step
drops out of the persistent batch; scheduled again, its stale placeholders
are copied into ``input_ids`` as they are. 0.17.1 then looks ``-1`` up in
the target's embedding: a zero row with the vocabulary split over tensor
parallelism, a device-side assert (here an ``IndexError``) with an unsplit
one. From 0.25.0, ``GPUModelRunner._preprocess`` clamps the ids to 0 when
speculating; the rejection sampler still sees ``-1`` (it reads the drafts
before the clamp) and rejects them.

``GPUModelRunner`` needs CUDA to construct, so the shipped ``_preprocess``
runs on a stand-in runner whose buffers are CPU tensors and whose model is
one unsplit ``nn.Embedding`` (the tensor-parallel-1 case), with
``input_ids`` as ``_prepare_input_ids`` leaves them for such a step (its
signature and bookkeeping change across releases; the engine tier's case
watches the live one leave ``-1`` there). The test fails on unpatched 0.17.1
and on the series before this patch.
"""

from __future__ import annotations

import contextlib
from types import SimpleNamespace

import torch

from tests.semantics.unpatched import fails_unpatched_with

VOCAB = 16
K = 3
#: Request ``a`` was in the previous step (its next token is on the device);
#: ``c`` was left out of it by the token budget and is scheduled again with
#: its stale placeholders.
SAMPLED_A = 7
TOKEN_C = 5
NUM_TOKENS = 2 + K  # a: 1 token; c: 1 token + K drafts


class Positions:
    """The runner's positions: a ``CpuGpuBuffer`` (``.gpu``) in 0.17.1, a
    tensor indexed directly in later releases; this answers both."""

    def __init__(self, n: int) -> None:
        self.gpu = torch.arange(n)

    def __getitem__(self, key: object) -> torch.Tensor:
        return self.gpu[key]  # type: ignore[index]


class EmbeddingOnly(torch.nn.Module):
    """The target's text embedding, unsplit (tensor parallel 1): a lookup
    outside ``0..VOCAB-1`` raises, as the device kernel asserts."""

    requires_raw_input_tokens = False

    def __init__(self) -> None:
        super().__init__()
        self.embed = torch.nn.Embedding(VOCAB, 4)
        self.seen: list[list[int]] = []

    def embed_input_ids(self, input_ids, multimodal_embeddings=None, is_multimodal=None):  # type: ignore[no-untyped-def]
        self.seen.append(input_ids.tolist())
        return self.embed(input_ids)


def _runner():  # type: ignore[no-untyped-def]
    from vllm.v1.worker.gpu_model_runner import GPUModelRunner

    r = object.__new__(GPUModelRunner)
    # What _prepare_input_ids leaves: a's token from the device, c's row as
    # the CPU holds it, its drafts still the scheduler's placeholders.
    ids = torch.tensor([SAMPLED_A, TOKEN_C, *([-1] * K), 0, 0, 0], dtype=torch.int32)
    r.input_ids = SimpleNamespace(gpu=ids, cpu=ids.clone())
    r.inputs_embeds = SimpleNamespace(gpu=torch.zeros(8, 4))
    r.positions = Positions(8)
    r.enable_prompt_embeds = False
    r.device = torch.device("cpu")
    r.input_batch = SimpleNamespace(req_prompt_embeds={})
    r.speculative_config = SimpleNamespace(num_speculative_tokens=K)
    r.model_config = SimpleNamespace(is_encoder_decoder=False)
    r.supports_mm_inputs = True  # Kimi-K2.5: text goes through embed_input_ids
    r.model = EmbeddingOnly()
    r.encoder_cache = {}
    r.maybe_get_ec_connector_output = lambda *a, **kw: contextlib.nullcontext(None)
    r._execute_mm_encoder = lambda *a, **kw: None
    r._gather_mm_embeddings = lambda *a, **kw: ([], None)
    r._init_model_kwargs = lambda *a, **kw: {}
    r._extract_mm_kwargs = lambda *a, **kw: {}
    r.uses_mrope = False
    r.uses_xdrope_dim = 0
    return r


@fails_unpatched_with(
    raises="IndexError",
    match="index out of range",
    reason="0.17.1 looks the -1 placeholder up in the unsplit embedding",
)
def test_stale_placeholder_drafts_reach_the_embedding_as_valid_ids(monkeypatch) -> None:
    """The step that schedules ``c`` again, after ``_prepare_input_ids``
    took ``a``'s token from the device and copied ``c``'s row as the CPU
    holds it (its drafts still ``-1``): ``_preprocess`` must hand the
    embedding ids inside the vocabulary, the real tokens unchanged."""
    from vllm.v1.worker import gpu_model_runner as gmr

    monkeypatch.setattr(gmr, "get_pp_group", lambda: SimpleNamespace(is_first_rank=True))
    r = _runner()
    so = SimpleNamespace(
        total_num_scheduled_tokens=NUM_TOKENS,
        scheduled_spec_decode_tokens={"c": [-1] * K},
        scheduled_encoder_inputs={},
    )
    r._preprocess(so, NUM_TOKENS)
    (ids,) = r.model.seen
    assert min(ids) >= 0, ids
    assert ids[:2] == [SAMPLED_A, TOKEN_C], ids
