"""The drafter's backup token is the request's last committed token.

``eagle-read-the-backup-token-at-the-last-committed-token.patch`` (vllm issue #38098,
upstream from 0.19.0): for a request whose next token was not sampled this
step (a discarded row, e.g. a partial prefill), ``prepare_next_token_ids_padded``
feeds the drafter a backup token. 0.17.1 read it at ``seq_lens_cpu``, which
under async scheduling counts unaccepted draft placeholders: past the end
of the request's tokens, ``get_token_id`` gives -1 and the drafter runs on a
wrong token (bad drafter KV, lower acceptance). The backup is now read at
``num_tokens_no_spec - 1``. The Triton kernel after it is replaced by a
recorder here (no Triton in this venv); the cases follow upstream's
``tests/v1/spec_decode/test_backup_token_async_spec.py`` of 0.19.0.
"""

from __future__ import annotations

import inspect
import sys
from types import SimpleNamespace

import numpy as np
import pytest
import torch


class _Request:
    def __init__(self, prompt: list[int], output: list[int]) -> None:
        self.tokens = prompt + output

    def get_token_id(self, idx: int) -> int:
        return self.tokens[idx] if idx < len(self.tokens) else -1


class _Recorder:
    """Stands in for the Triton kernel: ``kernel[grid](*args)`` (or, from
    0.33.0, a plain wrapper ``fn(*args)``) records the arguments."""

    def __init__(self) -> None:
        self.args: tuple = ()

    def __call__(self, *args: object, **kw: object) -> None:
        self.args = args

    def __getitem__(self, grid: object) -> object:
        return self


def _backup_tokens(monkeypatch: pytest.MonkeyPatch, seq_lens: list[int]) -> list[int]:
    """The backup tokens the proposer hands its kernel for three requests
    with 5 committed tokens each, under the ``seq_lens`` the runner passes."""
    import vllm.v1.utils as v1_utils
    from vllm.v1.spec_decode.eagle import EagleProposer
    from vllm.v1.utils import CpuGpuBuffer

    # No pinned memory on a CPU-only host (0.33.0 copies through it).
    monkeypatch.setattr(v1_utils, "PIN_MEMORY", False, raising=False)
    # The module that defines the method (0.20.0 moved it into a base class),
    # and the kernel it launches (renamed over the releases).
    method = EagleProposer.prepare_next_token_ids_padded
    home = sys.modules[method.__module__]
    (kernel,) = [n for n in method.__code__.co_names if "prepare_next_token_padded" in n]
    recorder = _Recorder()
    monkeypatch.setattr(home, kernel, recorder)
    # vLLM's placeholder for a missing Triton lacks the helper 0.17.1 calls
    # (later releases call their own next_power_of_2).
    pow2 = lambda n: 1 << (n - 1).bit_length()  # noqa: E731
    if hasattr(home, "triton"):
        monkeypatch.setattr(home.triton, "next_power_of_2", pow2, raising=False)
    proposer = object.__new__(EagleProposer)
    proposer.backup_next_token_ids = CpuGpuBuffer(
        8, dtype=torch.int32, pin_memory=False, device=torch.device("cpu"), with_numpy=True
    )
    requests = {"r0": _Request([0, 1], [100, 101, 102]), "r1": _Request([0, 1, 2, 3], [200]),
                "r2": _Request([0], [300, 301, 302, 303])}  # fmt: skip
    batch = SimpleNamespace(req_ids=list(requests), num_reqs=3, vocab_size=1000,
                            num_tokens_no_spec=np.array([5, 5, 5]))  # fmt: skip
    cm = SimpleNamespace(seq_lens_cpu=torch.tensor(seq_lens))
    sampled = torch.zeros(3, 4, dtype=torch.int32)
    discard = torch.zeros(3, dtype=torch.bool)
    # 0.19.0 dropped the first argument, which only carried seq_lens_cpu.
    params = inspect.signature(EagleProposer.prepare_next_token_ids_padded).parameters
    first = (cm,) if "common_attn_metadata" in params else ()
    proposer.prepare_next_token_ids_padded(*first, sampled, requests, batch, discard)
    return recorder.args[2][:3].tolist()


def test_backup_is_the_last_committed_token_when_seq_lens_count_placeholders(monkeypatch) -> None:
    """Async scheduling: seq_lens 7, 9, 5 include unaccepted draft slots."""
    assert _backup_tokens(monkeypatch, [7, 9, 5]) == [102, 200, 303]


def test_backup_is_the_last_committed_token_without_placeholders(monkeypatch) -> None:
    assert _backup_tokens(monkeypatch, [5, 5, 5]) == [102, 200, 303]
