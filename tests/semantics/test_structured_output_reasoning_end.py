"""The grammar stays in step when ``</think>`` lands inside a speculative step.

``structured_output-keep-the-grammar-in-step-when-reasoning-ends-inside-a-step.patch``
(vllm PRs #42452, #44297, #44993; upstream's 0.27.0 form). With a reasoning
parser, structured output and speculative decoding, 0.17.1 left every row of
the step that holds the marker unconstrained, and never fed the tokens after
the marker to the grammar. The engine tier's
``test_structured_output_after_reasoning_is_lossless`` shows the effect on a
real engine, and ``structured_output-check-drafts-after-a-reasoning-end-
inside-the.patch`` (vllm PR #48200, 0.32.0) checks the drafts after an
in-window marker against the grammar. Here the manager and the scheduler
are driven directly, with a reasoner that ends at token ``END`` and a
grammar that records what it is asked.
"""

from __future__ import annotations

from types import SimpleNamespace

import torch

END, OPEN, CLOSE = 981, 126, 128  # </think>, "{", "}" in the fixture tokenizer


class EndsAtMarker:
    """A reasoning parser whose reasoning ends at ``END``."""

    def is_reasoning_end(self, ids: list[int]) -> bool:
        return END in ids

    def is_reasoning_end_streaming(self, ids: list[int], delta: object) -> bool:
        return END in list(delta)  # type: ignore[call-overload]


class RecordingGrammar:
    """Accepts ``{`` then ``}``; records constrained rows and accepted tokens."""

    def __init__(self) -> None:
        self.accepted: list[int] = []
        self.constrained_rows: list[int] = []

    def accept_tokens(self, request_id: str, tokens: list[int]) -> bool:
        want = [OPEN, CLOSE][len(self.accepted) : len(self.accepted) + len(tokens)]
        if tokens != want:
            return False
        self.accepted += tokens
        return True

    def validate_tokens(self, tokens: list[int]) -> list[int]:
        want = [OPEN, CLOSE][len(self.accepted) :]
        n = 0
        while n < min(len(tokens), len(want)) and tokens[n] == want[n]:
            n += 1
        return tokens[:n]

    def rollback(self, n: int) -> None:
        del self.accepted[len(self.accepted) - n :]

    def is_terminated(self) -> bool:
        return False

    def fill_bitmask(self, bitmask: torch.Tensor, index: int) -> None:
        self.constrained_rows.append(index)


def _manager() -> object:
    from vllm.v1.structured_output import StructuredOutputManager

    m = StructuredOutputManager.__new__(StructuredOutputManager)
    m.reasoner = EndsAtMarker()  # 0.17.1: one parser for the manager
    m.reasoner_cls = EndsAtMarker  # 0.27.0 on: one per request (below)
    m.enable_in_reasoning = False
    m.fill_bitmask_parallel_threshold = 128
    m._full_mask = torch.tensor(-1, dtype=torch.int32)
    m._grammar_bitmask = torch.zeros((8, 4), dtype=torch.int32)
    m.vllm_config = SimpleNamespace(
        speculative_config=SimpleNamespace(num_speculative_tokens=3),
        scheduler_config=SimpleNamespace(max_num_seqs=2),
        model_config=SimpleNamespace(is_diffusion=False),
        num_speculative_tokens=3,
    )
    return m


def _request(output: list[int], grammar: RecordingGrammar) -> SimpleNamespace:
    from vllm.v1.structured_output.request import StructuredOutputRequest

    so = StructuredOutputRequest.__new__(StructuredOutputRequest)
    so._grammar, so.reasoning_ended = grammar, False
    so.reasoning_end_token_index = None
    so.reasoning_parser_kwargs, so.reasoner = None, EndsAtMarker()  # fields of 0.27.0 on
    so.masked_reasoning_end_ids = ()  # 0.33.0
    prompt = [40, 41, 980]  # ends with <think>
    return SimpleNamespace(
        structured_output_request=so, use_structured_output=True,
        prompt_token_ids=prompt, all_token_ids=prompt + output,
        num_tokens=len(prompt) + len(output),
        num_computed_tokens=len(prompt), num_output_placeholders=0,
    )  # fmt: skip


def test_rows_after_the_marker_in_the_drafted_window_are_constrained() -> None:
    grammar = RecordingGrammar()
    request = _request([659], grammar)  # reasoned "ok"; drafts: </think> { }
    _manager().grammar_bitmask({"r": request}, ["r"], {"r": [END, OPEN, CLOSE]})
    # Rows: 0 (before </think>), 1 (after it: "{"), 2 ("}"), 3 (bonus).
    assert grammar.constrained_rows == [1, 2, 3]
    assert grammar.accepted == []  # every advance was rolled back


def _advance_step(manager: object, request: SimpleNamespace, step: list[int]) -> None:
    """Feed one step's new tokens to the grammar as the release's scheduler
    does: 0.17.1 asks ``should_advance(request)`` and passes the whole step;
    from 0.22.0 it trims the reasoning off what it passes, and the 0.27.0
    form (the patch) also gives ``should_advance`` the step's tokens; from
    0.28.0 the manager's ``accept_tokens`` does all of it."""
    import inspect

    grammar = request.structured_output_request._grammar
    if not hasattr(manager, "should_advance"):
        manager.accept_tokens(request, step)  # type: ignore[attr-defined]
        return
    takes_step = "new_token_ids" in inspect.signature(manager.should_advance).parameters  # type: ignore[attr-defined]
    kw = {"new_token_ids": step} if takes_step else {}
    if manager.should_advance(request, **kw):  # type: ignore[attr-defined]
        trim = getattr(manager, "trim_reasoning_for_advance", lambda _r, ids: ids)
        grammar.accept_tokens("r", trim(request, step))


def test_tokens_after_the_marker_in_the_same_step_advance_the_grammar() -> None:
    """Under async scheduling the request's counters already include the next
    step's optimistic tokens (two placeholders outstanding), so a window
    derived from them starts past ``</think>`` (vllm #43388): the step's own
    tokens must decide."""
    grammar = RecordingGrammar()
    step = [659, END, OPEN]  # one step: "ok", </think>, "{"
    request = _request(step, grammar)
    request.request_id = "r"
    request.num_computed_tokens = len(request.all_token_ids) + 2
    request.num_output_placeholders = 2
    _advance_step(_manager(), request, step)
    assert grammar.accepted == [OPEN], "the step's tokens after </think> did not reach the grammar"
    assert request.structured_output_request.reasoning_ended


def _drafts_kept(request: SimpleNamespace, drafts: list[int]) -> list[int]:
    """The drafts the scheduler keeps for ``request`` (``update_draft_token_ids``,
    the synchronous path; the asynchronous one pads the cut drafts with -1)."""
    from vllm.v1.core.sched.scheduler import Scheduler

    request.is_finished = lambda: False
    request.is_prefill_chunk = False
    request.spec_token_ids = []
    scheduler = SimpleNamespace(requests={"r": request}, structured_output_manager=_manager())
    Scheduler.update_draft_token_ids(  # type: ignore[arg-type]
        scheduler, SimpleNamespace(req_ids=["r"], draft_token_ids=[list(drafts)])
    )
    return list(request.spec_token_ids)


def test_drafts_after_the_marker_in_the_window_are_checked_against_the_grammar() -> None:
    """Drafts ``</think> { {``: the second ``{`` breaks the grammar. 0.17.1
    (and the 0.27.0 form) kept all three, so grammar_bitmask met a draft the
    grammar rejects and xgrammar logged "Failed to advance FSM"; the drafts
    after the marker must be cut at the first invalid one. Reasoning drafts
    are not grammar content: with no marker in the window all of them stay
    (as on 0.17.1; one test, so that it fails unpatched)."""
    grammar = RecordingGrammar()
    request = _request([659], grammar)  # reasoned "ok"
    assert _drafts_kept(request, [END, OPEN, OPEN]) == [END, OPEN]
    assert _drafts_kept(request, [659, END, CLOSE]) == [659, END]
    assert _drafts_kept(request, [659, 659, 659]) == [659, 659, 659]
    assert grammar.accepted == []  # checking did not advance the grammar
