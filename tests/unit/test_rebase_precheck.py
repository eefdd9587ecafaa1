"""The rebase's pre-check: which files the series needs that the target
release lacks (a file an earlier patch creates is needed from nobody), and
the one paragraph that names them."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from vpq.move import rebase
from vpq.source import probe, series


def _patch(name: str, files: tuple[str, ...], new: tuple[str, ...] = ()) -> series.Patch:
    """A parsed patch that touches ``files``, creating ``new`` among them."""
    return series.Patch(
        name=name, path=Path("patches") / name, data=b"", subject=name, author="", date="",
        body="", files=files, new_files=new, deleted_files=(), hunks=(),
    )  # fmt: skip


DRAFTER = "vllm/model_executor/models/deepseek_eagle3.py"
RUNNER = "vllm/v1/worker/gpu_model_runner.py"
SERIES = [
    _patch("add-drafter.patch", (DRAFTER, "vllm/registry.py"), new=(DRAFTER,)),
    _patch("keep-rope.patch", (DRAFTER,)),
    _patch("runner-a.patch", (RUNNER,)),
    _patch("fc-norm.patch", (DRAFTER, RUNNER)),
    _patch("runner-b.patch", (RUNNER,)),
]


def test_a_file_an_earlier_patch_creates_is_not_missing() -> None:
    listed = {"vllm/registry.py", RUNNER}
    assert rebase.missing_files(listed, SERIES) == {}
    assert DRAFTER not in series.files_needed(SERIES)


def test_a_file_a_patch_changes_before_any_patch_creates_it_is_missing() -> None:
    late = [SERIES[1], SERIES[0]]  # keep-rope before add-drafter
    assert rebase.missing_files({"vllm/registry.py"}, late) == {DRAFTER: ["keep-rope.patch"]}


def test_each_missing_file_is_named_once_with_every_patch_that_needs_it() -> None:
    missing = rebase.missing_files({"vllm/registry.py"}, SERIES)
    assert missing == {RUNNER: ["runner-a.patch", "fc-norm.patch", "runner-b.patch"]}
    msg = rebase.missing_message("0.16.0", missing)
    assert msg == (
        f"vllm 0.16.0 has no {RUNNER} (changed by patches/runner-a.patch, "
        "patches/fc-norm.patch, patches/runner-b.patch): the series cannot be moved "
        "there. patches/, series and upstream.lock are unchanged."
    )
    assert msg.count(RUNNER) == 1 and "\n" not in msg


def test_several_missing_files_are_named_in_series_order() -> None:
    missing = rebase.missing_files(set(), SERIES)
    assert list(missing) == ["vllm/registry.py", RUNNER]
    msg = rebase.missing_message("0.14.1", missing)
    assert msg.startswith("vllm 0.14.1 has no vllm/registry.py (changed by patches/add-drafter")
    assert f"; no {RUNNER} (changed by patches/runner-a.patch" in msg


def test_a_file_only_probe_absorbed_patches_change_is_not_missing() -> None:
    """0.23.0 moved server_utils.py; the Host-header backport's probe passes
    there, so the move drops the patch rather than refusing the release."""
    moved = "vllm/entrypoints/openai/server_utils.py"
    patches = [*SERIES, _patch("host-header.patch", (moved,))]
    listed = {"vllm/registry.py", RUNNER}
    assert rebase.missing_files(listed, patches) == {moved: ["host-header.patch"]}
    assert rebase.missing_files(listed, patches, frozenset({"host-header.patch"})) == {}
    # judged first only where the header says upstream has it by then
    backport = dataclasses.replace(patches[-1], body="Upstream-Status: Backport [v0.22.0]\n")
    needs = {moved: ["host-header.patch"]}
    assert rebase.claimed_upstream(needs, [*SERIES, backport], "0.23.0")
    assert not rebase.claimed_upstream(needs, [*SERIES, backport], "0.21.0")
    assert not rebase.claimed_upstream(needs, patches, "0.23.0")  # no header: refused at once
    # an absorbed patch that changes a file still leaves it needed by the others
    assert rebase.missing_files({"vllm/registry.py"}, SERIES, frozenset({"runner-a.patch"})) == {
        RUNNER: ["fc-norm.patch", "runner-b.patch"]
    }


PROBES = """\
# header comment

["a.patch"]
# why a's probe looks like this
tests = ["tests/x.py::test_a"]

["b.patch"]
contract = [
    "supports_eagle3(model)",
]
"""


def test_a_rebase_that_drops_no_patch_keeps_probes_toml_byte_for_byte(tmp_path: Path) -> None:
    (tmp_path / probe.PROBES_FILE).write_text(PROBES)
    assert probe.keep_only(tmp_path, ["a.patch", "b.patch"]) == PROBES.encode()


def test_dropping_a_probe_keeps_the_other_probes_comments(tmp_path: Path) -> None:
    (tmp_path / probe.PROBES_FILE).write_text(PROBES)
    got = probe.keep_only(tmp_path, ["a.patch"])
    assert got == PROBES.split('["b.patch"]')[0].encode()
