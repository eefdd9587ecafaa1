"""EAGLE-3 aux hidden states across pipeline stages, on the shipped code.

Rules from ``deepseek_v2-carry-eagle3-aux-states-across-pipeline-stages.patch``
(our own fix; upstream did the same only for its V2 model runner, vllm PR
#50514): every stage collects the global ids in its slice and sends all
states collected so far to the next stage in its ``IntermediateTensors``,
one ``aux_hidden_states_<n>`` key per state, numbered in ascending id order
(0.17.1's patch numbers them by id, 0.33.0's relay by slot: the tests
judge the states, not the numbers); a stage's receive buffer
(``make_empty_intermediate_tensors``, after the runner's set-up) has one
such key for every id below its ``start_layer``; the last stage returns
``(hidden_states, aux)`` where ``aux`` equals a single-stage run's for the
same ids. Pipeline parallelism is refused at config time for targets that
cannot carry the states, and non-last runner stages set the aux ids
although they have no drafter.

The stages run one after the other in this process on one real
``DeepseekV3ForCausalLM`` (stub decoder layers: the real ones need CUDA),
placed on each stage in turn with a fake ``get_pp_group`` (the model's, and
vLLM's own, which 0.33.0's ``EagleModelMixin`` reads), the aux ids set and
the receive buffer prepared on each stage as that stage's runner does at
load; a real pipeline needs one process and GPU per stage. Every test fails on unpatched vLLM
0.17.1 and on the series before this patch (whose last stage returns only
its own slice's states).
"""

from __future__ import annotations

import contextlib
from types import SimpleNamespace

import pytest
import torch
from vllm.sequence import IntermediateTensors

from tests.semantics import llama_head, stubs, unpatched

pytestmark = [unpatched.AUX_INTERFACE]

IDS = torch.tensor([3, 1, 4, 1, 5])
POS = torch.arange(5)
N = 8
KEY = "aux_hidden_states_"
SPLITS = {2: [(0, 4), (4, N)], 3: [(0, 3), (3, 6), (6, N)]}
# Each set has an id on a stage before the last one in every split, so each
# case fails where only the last stage's own states reach the drafter.
ID_SETS = [(2, 4, 5), (0, 3, 6, 8), (1, 2), (3, 8), (0,)]


@pytest.fixture
def pp_stage(pp_rank, monkeypatch):  # type: ignore[no-untyped-def]
    """``pp_stage(model, start, end, first=..., last=...)``: ``pp_rank``, and
    vLLM's own ``get_pp_group`` (read by 0.33.0's ``EagleModelMixin`` and
    ``reserve_aux_intermediate_tensor_slots``) says the same."""
    from vllm.distributed import parallel_state

    def place(model: object, start: int, end: int, *, first: bool, last: bool) -> None:
        pp_rank(model, start, end, first=first, last=last)
        group = stubs.FakePPGroup(first, last, world_size=2)
        monkeypatch.setattr(parallel_state, "get_pp_group", lambda: group)

    return place


def load_stage(outer, layers) -> None:  # type: ignore[no-untyped-def]
    """What a stage's runner does at load: set the aux ids, then (where the
    release has it, 0.33.0's ``reserve_aux_intermediate_tensor_slots``)
    reserve the receive slots in ``make_empty_intermediate_tensors``."""
    outer.set_aux_hidden_state_layers(layers)
    try:
        from vllm.v1.worker.gpu.spec_decode.eagle import eagle3_utils
    except ImportError:
        return
    reserve = getattr(eagle3_utils, "reserve_aux_intermediate_tensor_slots", None)
    if reserve is not None:
        reserve(outer)


def aux_states(tensors: IntermediateTensors) -> list[torch.Tensor]:
    """The aux states in ``tensors``, in the order of their key numbers."""
    keys = sorted(
        (k for k in tensors.tensors if k.startswith(KEY)), key=lambda k: int(k[len(KEY) :])
    )
    return [tensors[k] for k in keys]


def run_pipeline(model, pp_stage, stages, layers, *, outer=None):  # type: ignore[no-untyped-def]
    """Run ``model`` as each stage in ``stages`` (``[(start, end), ...]``) in
    turn; return the last stage's output and every stage's sent tensors.
    Each stage receives into its own ``make_empty_intermediate_tensors``
    buffer, copied the way the runner's ``sync_and_slice_intermediate_tensors``
    copies (vllm/v1/worker/gpu_model_runner.py)."""
    outer = outer or model
    sent: list[IntermediateTensors] = []
    received = None
    for rank, (start, end) in enumerate(stages):
        pp_stage(model, start, end, first=rank == 0, last=rank == len(stages) - 1)
        load_stage(outer, layers)
        if received is not None:
            buf = outer.make_empty_intermediate_tensors(
                batch_size=16, dtype=torch.float64, device=torch.device("cpu")
            )
            assert set(buf.tensors) == set(received.tensors), (rank, sorted(buf.tensors))
            for k, v in received.items():
                buf[k][: len(IDS)].copy_(v)
            received = IntermediateTensors({k: v[: len(IDS)] for k, v in buf.items()})
        out = outer(IDS, POS, intermediate_tensors=received)
        if rank < len(stages) - 1:
            assert isinstance(out, IntermediateTensors), (rank, type(out).__name__)
            sent.append(out)
            received = out
    return out, sent


@pytest.mark.parametrize("num_stages", [2, 3])
@pytest.mark.parametrize("layers", ID_SETS)
def test_last_stage_aux_equals_a_single_stage_run(make_model, pp_stage, num_stages, layers) -> None:
    single = make_model(N)
    single.set_aux_hidden_state_layers(layers)
    hidden_1, aux_1 = single(IDS, POS)
    model = make_model(N)
    (hidden, aux), _ = run_pipeline(model, pp_stage, SPLITS[num_stages], layers)
    assert len(aux) == len(aux_1) == len(layers)
    for got, want in zip(aux, aux_1, strict=True):
        torch.testing.assert_close(got, want, rtol=0, atol=0)
    torch.testing.assert_close(hidden, hidden_1, rtol=0, atol=0)


def test_kimi_k25_wrapper_last_stage_aux_equals_the_oracle_over_three_stages(
    make_model, pp_stage
) -> None:
    lm = make_model(N)
    kimi = stubs.kimi_k25_wrapper(lm)
    # as KimiK25ForConditionalGeneration.__init__ binds it (the helper skips __init__)
    kimi.make_empty_intermediate_tensors = lm.make_empty_intermediate_tensors
    (_, aux), _ = run_pipeline(lm, pp_stage, SPLITS[3], (2, 4, 5), outer=kimi)
    streams = stubs.oracle_streams(IDS, N)
    assert len(aux) == 3, f"{len(aux)} aux states reached the last stage, not 3"
    for got, layer in zip(aux, (2, 4, 5), strict=True):
        torch.testing.assert_close(got, streams[layer], rtol=0, atol=0)


def test_each_stage_sends_every_state_collected_so_far_by_global_id(make_model, pp_stage) -> None:
    """Ids (0, 3, 6, 8) on stages [0,3) [3,6) [6,8): stage 0 sends id 0,
    stage 1 sends ids 0 and 3; id 6 and 8 stay on the last stage."""
    _, sent = run_pipeline(make_model(N), pp_stage, SPLITS[3], (0, 3, 6, 8))
    streams = stubs.oracle_streams(IDS, N)
    for out, ids in zip(sent, [(0,), (0, 3)], strict=True):
        assert set(out.tensors) - {"hidden_states", "residual"} == {
            k for k in out.tensors if k.startswith(KEY)
        }, sorted(out.tensors)
        states = aux_states(out)
        assert len(states) == len(ids), (ids, sorted(out.tensors))
        for state, i in zip(states, ids, strict=True):
            torch.testing.assert_close(state, streams[i], rtol=0, atol=0)
            assert tuple(state.shape) == (len(IDS), stubs.HIDDEN)


def test_receive_buffer_has_a_key_per_id_below_the_stage_start(make_model, pp_stage) -> None:
    """The buffer is made after the ids are set (the runner builds it lazily,
    after load_model), through the ``make_empty_intermediate_tensors`` the
    outer model captured at construction: ids 0 and 2 come from the stage
    before, 5 and 8 are this stage's own."""
    model = make_model(N)
    pp_stage(model, 4, N, first=False, last=True)
    load_stage(model, (8, 2, 5, 0))
    buf = model.make_empty_intermediate_tensors(
        batch_size=7, dtype=torch.float32, device=torch.device("cpu")
    )
    aux_keys = [k for k in buf.tensors if k.startswith(KEY)]
    assert set(buf.tensors) == {"hidden_states", "residual", *aux_keys}
    assert len(aux_keys) == 2, sorted(buf.tensors)
    for state in aux_states(buf):
        assert tuple(state.shape) == (7, stubs.HIDDEN)
        assert state.dtype == torch.float32


@unpatched.fails_unpatched_with(
    raises="AttributeError",
    match="_stage_forwards_eagle3_aux_states",
    reason="the rule is a GPUModelRunner method the patch adds; the test asks it directly",
)
def test_runner_sets_aux_ids_on_stages_without_the_drafter() -> None:
    """``GPUModelRunner`` needs CUDA to construct, so the method runs on a
    stand-in ``self``; the rule is the drafter's own
    (``use_aux_hidden_state`` in the head's ``eagle_config``)."""
    from vllm.v1.worker import gpu_model_runner as gmr

    method = gmr.GPUModelRunner._stage_forwards_eagle3_aux_states

    def runner(method_name, eagle_config=None):  # type: ignore[no-untyped-def]
        hf = (
            SimpleNamespace(eagle_config=eagle_config)
            if eagle_config is not None
            else SimpleNamespace()
        )
        spec = SimpleNamespace(method=method_name, draft_model_config=SimpleNamespace(hf_config=hf))
        return SimpleNamespace(speculative_config=spec)

    mp = pytest.MonkeyPatch()
    try:
        mp.setattr(gmr, "get_pp_group", lambda: stubs.FakePPGroup(True, False))
        assert method(runner("eagle3")) is True
        assert method(runner("extract_hidden_states")) is True
        assert method(runner("eagle3", {"use_aux_hidden_state": False})) is False
        assert method(runner("eagle")) is False
        assert method(SimpleNamespace(speculative_config=None)) is False
        mp.setattr(gmr, "get_pp_group", lambda: stubs.FakePPGroup(False, True))
        assert method(runner("eagle3")) is False  # the last stage has the drafter
    finally:
        mp.undo()


@unpatched.fails_unpatched_with(
    raises="NotImplementedError",
    match="Pipeline parallelism is not supported for this model",
    reason="the behaviour the patch changes: 0.17.1 refuses every EAGLE-3 head under "
    "pipeline parallel (the drafter is not SupportsPP), with a generic message",
)
def test_config_refuses_eagle3_over_pipeline_parallel_only_where_aux_cannot_travel(
    tmp_path,
) -> None:
    """One clear message at config time instead of a shape error in the
    drafter's ``fc`` at the first request (a Llama target here drops the
    earlier stages' states)."""
    with pytest.raises(
        ValueError,
        match=r"pipeline_parallel_size=2 is only supported for .*deepseek_v3.*model_type='llama'",
    ):
        llama_head.speculative_config(
            llama_head.write_target_config(tmp_path / "llama"),
            llama_head.write_head_config(tmp_path / "d"),
            pp=2,
        )
    # DeepSeek targets carry the states; a head that reads no aux states,
    # or a single stage, needs nothing carried.
    target = str(stubs.write_text_config(tmp_path / "ds", N))
    llama_head.speculative_config(
        target, llama_head.write_head_config(tmp_path / "d"), pp=2
    )  # accepted: no refusal raised
    llama_head.speculative_config(
        llama_head.write_target_config(tmp_path / "llama"),
        llama_head.write_head_config(tmp_path / "d2", {"use_aux_hidden_state": False}),
        pp=2,
    )
    llama_head.speculative_config(
        llama_head.write_target_config(tmp_path / "llama"),
        llama_head.write_head_config(tmp_path / "d3"),
        pp=1,
    )  # accepted


def test_drafter_layers_are_numbered_after_all_target_layers_on_the_last_stage(
    make_model, monkeypatch
) -> None:
    """Under pipeline parallelism the drafter is built on the last stage; its
    layer names must not repeat a target layer held there (0.17.1 used the
    per-stage count, so with 60 layers on two stages the head's layer was
    ``model.layers.30``, the last stage's first target layer). The real
    ``Eagle3LlamaForCausalLM.__init__`` runs on a 4-layer target whose last
    stage holds layers 2 and 3; its ``LlamaModel`` (CUDA attention) is a
    stand-in that records the ``start_layer_id`` it is given."""
    from vllm.model_executor.models import llama_eagle3

    starts: list[int] = []

    class RecordingLlamaModel(llama_head.StubLlamaModel):
        def __init__(self, *, vllm_config: object, prefix: str, start_layer_id: int) -> None:
            super().__init__(vllm_config=vllm_config, prefix=prefix, start_layer_id=start_layer_id)
            starts.append(start_layer_id)

    make_model(4)  # the single-process distributed state the head's lm_head needs
    monkeypatch.setattr(llama_eagle3, "LlamaModel", RecordingLlamaModel)
    monkeypatch.setattr(llama_eagle3, "get_draft_quant_config", lambda vllm_config: None)
    vc = llama_head.head_vllm_config()  # 4 target layers in all
    vc.model_config.get_num_layers = lambda parallel_config: 2  # this stage's slice: 2 and 3
    head = llama_head.build(llama_eagle3, vc)
    assert starts == [4], "the head's first layer id must follow every target layer"
    assert head.config.target_layer_count == 4


class _NoProfiler:
    """Stands in for ``DeviceMemoryProfiler`` (it asks the device's memory)."""

    consumed_memory = 0

    def __enter__(self) -> _NoProfiler:
        return self

    def __exit__(self, *exc: object) -> None:
        return None


def _first_stage_runner(monkeypatch, model, draft_hf):  # type: ignore[no-untyped-def]
    """A ``GPUModelRunner`` made without ``__init__`` (it needs CUDA), as the
    first of two pipeline stages: no drafter and so
    ``use_aux_hidden_state_outputs`` False (what ``__init__`` sets there), an
    EAGLE-3 speculative config with the head's ``draft_hf`` config, and a
    model loader that returns ``model``; no EPLB, LoRA, compilation or CUDA
    graphs."""
    from vllm.config import CompilationMode, CUDAGraphMode
    from vllm.v1.worker import gpu_model_runner as gmr

    monkeypatch.setattr(gmr, "get_pp_group", lambda: stubs.FakePPGroup(True, False))
    monkeypatch.setattr(
        gmr, "get_model_loader", lambda cfg: SimpleNamespace(load_model=lambda **kw: model)
    )
    monkeypatch.setattr(gmr, "DeviceMemoryProfiler", _NoProfiler)
    monkeypatch.setattr(gmr, "get_offloader", lambda: SimpleNamespace(post_init=lambda: None))
    runner = object.__new__(gmr.GPUModelRunner)
    runner.model_config = SimpleNamespace(model="target", multimodal_config=None)
    runner.parallel_config = SimpleNamespace(enable_eplb=False, use_ubatching=False)
    runner.load_config = SimpleNamespace(load_format="auto")
    runner.lora_config = None
    runner.vllm_config = SimpleNamespace(
        compilation_config=SimpleNamespace(mode=CompilationMode.NONE)
    )
    runner.compilation_config = SimpleNamespace(cudagraph_mode=CUDAGraphMode.NONE)
    runner.use_aux_hidden_state_outputs = False
    # later releases' load_model also reads these (0.33.0: JIT warmup providers)
    runner.jit_warmup_registry = SimpleNamespace(activate=contextlib.nullcontext)
    runner.speculative_config = SimpleNamespace(
        method="eagle3", draft_model_config=SimpleNamespace(hf_config=draft_hf)
    )
    return runner


def test_first_stage_loads_its_target_collecting_the_drafters_aux_ids(
    make_model, pp_rank, monkeypatch
) -> None:
    """The shipped ``GPUModelRunner.load_model`` on the first of two stages
    [0, 4) [4, 8), for a head with ids (1, 3, 6): the loaded target then
    sends the states of ids 1 and 3 (those in its slice) to the last stage,
    where the drafter is. Without the rule a stage without the drafter never
    sets the ids, sends none, and the drafter gets only the last stage's."""
    from vllm.v1.worker.gpu_model_runner import GPUModelRunner

    model = make_model(N)
    head = SimpleNamespace(eagle_aux_hidden_state_layer_ids=[1, 3, 6])
    runner = _first_stage_runner(monkeypatch, model, head)
    GPUModelRunner.load_model(runner, load_dummy_weights=True)
    assert runner.model is model
    pp_rank(model, 0, 4, first=True, last=False)
    sent = model(IDS, POS)
    assert isinstance(sent, IntermediateTensors), type(sent).__name__
    # judged by the states carried, not their key numbers (0.17.1's patches key
    # them by layer id, 0.33.0's relay by slot)
    carried = aux_states(sent)
    assert len(carried) == 2, sorted(sent.tensors)
    streams = stubs.oracle_streams(IDS, N)
    for got, layer in zip(carried, (1, 3), strict=True):
        torch.testing.assert_close(got, streams[layer], rtol=0, atol=0)
