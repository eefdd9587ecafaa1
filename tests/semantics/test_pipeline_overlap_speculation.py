"""Pipeline stages overlap batches with a drafter: a request is scheduled
again only once its speculative step is back, and only drafts that follow
its last token are taken (patch
``v1/engine/core-overlap-pipeline-batches-with-speculative-decoding.patch``).

With pipeline parallelism the engine core keeps a batch per stage in
flight, so the scheduler runs again before the previous step's output is
processed. The scheduler here is the real one, built from a tiny local
Llama target with an EAGLE-3 head (2 speculative tokens), driven the way
the engine core's batch queue drives it: schedule a step, schedule again
with that step in flight, then process its output and its drafts. (It is
built for one stage, so that no other patch of the series is needed to
build it; what it schedules does not depend on the stage count.) On
unpatched 0.17.1 (and on the series before this patch) the second
``schedule`` books the in-flight request again, with a negative number of
tokens (the engine died with "IndexError: index -3 is out of bounds"), and
drafts that arrive for a request whose next step is already in flight are
taken. The engine tier (tests/engine/test_pipeline_parallel.py) shows two
batches in flight and lossless outputs on a real engine.
"""

from __future__ import annotations

from types import SimpleNamespace

from tests.semantics import llama_head
from tests.semantics.unpatched import fails_unpatched_with

K = 2
PROMPT = [5, 6, 7, 8, 9, 10, 11, 12]


def _scheduler(tmp_path):  # type: ignore[no-untyped-def]
    """The real ``Scheduler`` of an EAGLE-3 deployment, synchronous."""
    sched = llama_head.scheduler(tmp_path, batched_tokens=64, async_scheduling=False)
    assert sched.num_spec_tokens == K
    return sched


def _output(step, sampled: dict[str, list[int]]):  # type: ignore[no-untyped-def]
    """The last stage's output for ``step``: the tokens each request kept."""
    from vllm.v1.outputs import ModelRunnerOutput

    ids = list(step.num_scheduled_tokens)
    return ModelRunnerOutput(
        req_ids=ids,
        req_id_to_index={r: i for i, r in enumerate(ids)},
        sampled_token_ids=[sampled[r] for r in ids],
    )


def _drafts(req_id: str, tokens: list[int]):  # type: ignore[no-untyped-def]
    from vllm.v1.outputs import DraftTokenIds

    return DraftTokenIds([req_id], [tokens])


def _request(req_id: str):  # type: ignore[no-untyped-def]
    from vllm.sampling_params import SamplingParams
    from vllm.v1.request import Request

    return Request(
        request_id=req_id,
        prompt_token_ids=list(PROMPT),
        sampling_params=SamplingParams(max_tokens=16),
        pooling_params=None,
    )


def _decoding(tmp_path):  # type: ignore[no-untyped-def]
    """A scheduler whose request ``a`` was prefilled, got its first token
    and its drafts: the next step is a speculative one."""
    sched = _scheduler(tmp_path)
    sched.add_request(_request("a"))
    prefill = sched.schedule()
    assert prefill.num_scheduled_tokens == {"a": len(PROMPT)}
    sched.update_from_output(prefill, _output(prefill, {"a": [20]}))
    sched.update_draft_token_ids(_drafts("a", [21, 22]))
    return sched


def test_a_request_is_not_scheduled_while_its_speculative_step_is_in_flight(tmp_path) -> None:
    """Step 1 verifies ``a``'s token and its 2 drafts; with step 1 in
    flight the next ``schedule`` (the second pipeline batch) leaves ``a``
    out. Once step 1's output (1 draft accepted) and its drafts are in,
    ``a`` is scheduled with its new token and those drafts."""
    sched = _decoding(tmp_path)
    step1 = sched.schedule()
    assert step1.num_scheduled_tokens == {"a": 1 + K}
    assert step1.scheduled_spec_decode_tokens == {"a": [21, 22]}

    in_flight = sched.schedule()
    assert in_flight.num_scheduled_tokens == {}, "the in-flight request was scheduled again"
    assert in_flight.total_num_scheduled_tokens == 0

    sched.update_from_output(step1, _output(step1, {"a": [21, 30]}))
    sched.update_draft_token_ids(_drafts("a", [31, 32]))
    step2 = sched.schedule()
    assert step2.num_scheduled_tokens == {"a": 1 + K}
    assert step2.scheduled_spec_decode_tokens == {"a": [31, 32]}
    assert sched.requests["a"].all_token_ids[len(PROMPT) :] == [20, 21, 30]


def test_drafts_that_do_not_follow_the_last_token_are_dropped(tmp_path) -> None:
    """Drafts handed over while ``a``'s next step is in flight (what the
    engine core did when it took a step's drafts after scheduling the
    next) are not ``a``'s next input: the scheduler drops them."""
    sched = _decoding(tmp_path)
    sched.schedule()  # a's speculative step, in flight
    request = sched.requests["a"]
    sched.update_draft_token_ids(_drafts("a", [41, 42]))
    assert request.spec_token_ids == [], "drafts of an in-flight request were taken"


@fails_unpatched_with(
    raises="AttributeError",
    match="take_draft_token_ids_of_batch",
    reason="the executor call that hands over each batch's drafts is the patch's",
    dependency=True,
)
def test_only_an_executor_that_hands_over_each_batch_s_drafts_overlaps_batches() -> None:
    """The multiprocessing executor runs its calls on every worker in the
    order they were sent, so it can hand over each batch's drafts: two
    batches in flight over two stages. The base executor (Ray's among
    those that keep it) cannot: one batch, as before this patch."""
    from vllm.v1.engine import core
    from vllm.v1.executor.abstract import Executor
    from vllm.v1.executor.multiproc_executor import MultiprocExecutor

    assert Executor.take_draft_token_ids_of_batch(object()) is None  # type: ignore[arg-type]
    assert (
        MultiprocExecutor.take_draft_token_ids_of_batch
        is not Executor.take_draft_token_ids_of_batch
    )
    two_stages = SimpleNamespace(
        parallel_config=SimpleNamespace(pipeline_parallel_size=2), speculative_config=object()
    )
    assert core.batch_queue_size(two_stages, 2, True) == 2
    assert core.batch_queue_size(two_stages, 2, False) == 1
