"""Progress on long work: plain lines where output is not a terminal (CI
logs), a tqdm bar on one; quick steps say nothing."""

from __future__ import annotations

import io
import re
import time

import pytest
from vpq.core import progress


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_download_not_on_a_terminal_says_how_much_is_done_at_every_tenth() -> None:
    out = io.StringIO()
    with progress.download("vllm-0.17.1.tar.gz", 50_000_000, out) as d:
        for _ in range(50):
            d.update(1_000_000)
    lines = out.getvalue().splitlines()
    assert lines[0] == "downloading vllm-0.17.1.tar.gz: 0 B of 50.0 MB (0%)"
    assert lines[1] == "downloading vllm-0.17.1.tar.gz: 5.0 MB of 50.0 MB (10%)"
    assert lines[-1] == "downloading vllm-0.17.1.tar.gz: 50.0 MB of 50.0 MB (100%)"
    assert len(lines) == 11  # 0%, 10% ... 90%, then the end: no line twice


def test_a_download_of_unknown_size_says_so_every_100_mb() -> None:
    out = io.StringIO()
    with progress.download("x.whl", None, out) as d:
        for _ in range(25):
            d.update(10_000_000)
    assert out.getvalue().splitlines() == [
        "downloading x.whl: 0 B",
        "downloading x.whl: 100.0 MB",
        "downloading x.whl: 200.0 MB",
        "downloading x.whl: 250.0 MB",
    ]


def test_a_download_on_a_terminal_is_a_tqdm_bar() -> None:
    pytest.importorskip("tqdm")
    out = Terminal()
    with progress.download("x.whl", 2048, out) as d:
        d.update(2048)
    assert "x.whl" in out.getvalue() and "100%" in out.getvalue() and "\r" in out.getvalue()
    assert "downloading x.whl" not in out.getvalue()


def test_a_long_step_says_it_started_that_it_still_runs_and_how_long_it_took() -> None:
    out = io.StringIO()
    with progress.step("making the CPU venv v", out, heartbeat_s=0.05, quiet_s=0):
        time.sleep(0.3)
    lines = out.getvalue().splitlines()
    assert lines[0] == "making the CPU venv v ..."
    assert re.fullmatch(r"  still making the CPU venv v \(\d+ s\)", lines[1])
    assert re.fullmatch(r"making the CPU venv v: done in \d+ s", lines[-1])
    assert "\r" not in out.getvalue()


def test_a_failed_step_says_so_and_the_error_goes_on() -> None:
    out = io.StringIO()
    with pytest.raises(RuntimeError), progress.step("importing vllm 1.1", out, quiet_s=0):
        raise RuntimeError("boom")
    assert re.fullmatch(r"importing vllm 1.1: failed after \d+ s", out.getvalue().splitlines()[-1])


def test_a_quick_step_says_nothing() -> None:
    out = io.StringIO()
    with progress.step("checking", out):
        pass
    assert out.getvalue() == ""


def test_figures_read_as_a_person_writes_them() -> None:
    assert [progress.human_bytes(n) for n in (512, 3_400_000, 1_234_000_000)] == [
        "512 B",
        "3.4 MB",
        "1.2 GB",
    ]
    assert [progress.human_seconds(s) for s in (42, 125)] == ["42 s", "2 min 05 s"]
