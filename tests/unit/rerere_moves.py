"""Two patches on the tiny upstream that both conflict at release 1.1, and
a person resolving them: what the recorded-resolution tests
(``test_rebase_rerere.py``, ``test_move_check.py``) start from."""

from __future__ import annotations

from pathlib import Path

import pytest
from vpq.move import rebase, staircase
from vpq.source import git as g
from vpq.source import series
from vpq.wheels import build

from tests.unit.tiny_upstream import MOD, Upstream, publish, replace_line

A = "mod/change-f10.patch"
B = "mod/change-f20.patch"
MOD_1_1 = replace_line(
    replace_line(MOD, "return 10\n", "return 10  # 1.1\n"), "return 20\n", "return 20  # 1.1\n"
)
MOD_1_2 = replace_line(MOD, "return 20\n", "return 20  # 1.1\n")


def commit_a_and_b(upstream: Upstream) -> None:
    """Commit patches A (f10 -> 100) and B (f20 -> 200) onto ``upstream``."""
    upstream.commit_patch(A, {"vllm/mod.py": replace_line(MOD, "return 10\n", "return 100\n")},
                          "mod: make f10 return 100")  # fmt: skip
    both = replace_line(
        replace_line(MOD, "return 10\n", "return 100\n"), "return 20\n", "return 200\n"
    )
    upstream.commit_patch(B, {"vllm/mod.py": both}, "mod: make f20 return 200")


@pytest.fixture
def two(upstream: Upstream, monkeypatch: pytest.MonkeyPatch) -> Upstream:
    """Patches A (f10 -> 100) and B (f20 -> 200), releases 1.1 and 1.2."""
    commit_a_and_b(upstream)
    assert series.lint(upstream.root) == []
    publish(upstream, {"1.1": MOD_1_1, "1.2": MOD_1_2}, monkeypatch)
    return upstream


def inputs(root: Path) -> dict[str, bytes]:
    files = [root / "series", root / "upstream.lock", *sorted((root / "patches").rglob("*"))]
    return {str(p.relative_to(root)): p.read_bytes() for p in files if p.is_file()}


def restore(root: Path, saved: dict[str, bytes]) -> None:
    """Put the inputs back as a fresh clone of the repository would have them."""
    for name, data in saved.items():
        (root / name).write_bytes(data)


def resolve(root: Path, old: str, new: str) -> None:
    """What a person does: keep upstream's comment and the patch's value."""
    work = root / build.WORK_DIR
    text = g.show(work, "HEAD", "vllm/mod.py")
    assert text is not None
    (work / "vllm/mod.py").write_text(replace_line(text.decode(), old, new))
    g.git(["add", "vllm/mod.py"], work)


def stopped_at(root: Path, call: object, *args: object) -> staircase.Report:
    with pytest.raises(rebase.RebaseStopped) as info:
        call(root, *args)  # type: ignore[operator]
    return info.value.report


def status(report: staircase.Report) -> dict[str, str]:
    return {o.patch: o.label for o in report.outcomes}


def record_both_resolutions(two: Upstream) -> Path:
    """Move ``two`` to 1.1 resolving both conflicts by hand (so ``rerere/``
    records them), then put the checkout back at 1.0; returns its root."""
    root, start = two.root, inputs(two.root)
    stopped_at(root, rebase.start, "1.1")
    resolve(root, "return 10  # 1.1\n", "return 100  # 1.1\n")
    stopped_at(root, rebase.resume)
    resolve(root, "return 20  # 1.1\n", "return 200  # 1.1\n")
    rebase.resume(root)
    restore(root, start)
    return root
