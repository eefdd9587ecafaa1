"""One lint composition (issue #39): ``vpq lint`` and export's pre-check run
the same named lints in the same order, over a checkout parsed once (from
disk, or from the entries export would write, in memory)."""

from __future__ import annotations

from pathlib import Path

import pytest
from vpq import cli
from vpq.checks import lints, mutation, peer_backports, peer_list
from vpq.source import linting, probe, queue, series

from tests.unit.tiny_upstream import F10, Upstream, _covered


def _lint(name: str, problems: list[str], needs: tuple[str, ...] = ()) -> linting.Lint:
    return linting.Lint(name, lambda _co: list(problems), f"{name}.toml", needs)


def test_messages_come_in_lint_order_and_a_lint_waits_for_those_it_needs() -> None:
    co = linting.Checkout(Path("/q"), (), (), (), ())
    composed = [
        _lint("a", ["a1", "a2"]),
        _lint("b", ["b1"], needs=("a",)),  # a reported: skipped
        _lint("c", []),
        _lint("d", ["d1"], needs=("c",)),
        _lint("e", ["e1"], needs=("b",)),  # b skipped, so never clean: skipped
    ]
    found = linting.run(composed, co)
    assert [(f.lint.name, f.message) for f in found] == [("a", "a1"), ("a", "a2"), ("d", "d1")]


def test_every_lint_needs_only_lints_listed_before_it() -> None:
    names = [lint.name for lint in lints.LINTS]
    assert len(set(names)) == len(names)
    for i, lint in enumerate(lints.LINTS):
        assert set(lint.needs) <= set(names[:i]), lint.name
    assert names == [
        "series",
        "patches",
        "probes",
        "mutation",
        "rerere",
        "advisories",
        "peer-tests",
        "backport-tests",
        "deps-lock",
    ]
    assert [lint.name for lint in lints.LINTS if not lint.before_export] == ["mutation"]


def test_vpq_lint_parses_each_patch_once(
    one_patch: Upstream, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every lint that reads the patches (series, mutation, advisories,
    peer-tests, backport-tests) gets them from one parse; before issue #39
    the advisory, peer-tests and backport-tests lints each parsed the
    series again (4 parses of each patch here)."""
    root = one_patch.root
    (root / probe.PROBES_FILE).write_text(_covered(F10))
    (root / mutation.RECORD_FILE).write_text("")
    (root / peer_list.PEER_FILE).write_text("")
    (root / peer_backports.BACKPORTS_FILE).write_text("")
    parsed: list[str] = []
    real = series.parse_patch

    def counted(root: Path, name: str, data: bytes | None = None) -> series.Patch:
        parsed.append(name)
        return real(root, name, data)

    monkeypatch.setattr(series, "parse_patch", counted)
    assert cli.main(["--root", str(root), "lint"]) == 1
    err = capsys.readouterr().err
    assert f"patches/{F10} has no mutation record" in err  # the mutation lint ran
    assert "vllm/mod.py: no peer tests chosen" in err  # and the peer-tests lint
    assert parsed == series.read_series(root)


def test_export_compares_each_patch_with_patches_once(
    one_patch: Upstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``write_checked`` plans once and writes by that plan: the lint reads
    no ``*.patch`` file (the entries are linted in memory) and ``write``
    does not compare again."""
    root = one_patch.root
    old = (root / "patches" / F10).read_bytes()
    entries = [(F10, old.replace(b"says why.", b"says why, better."))]
    assert entries[0][1] != old
    reads: list[Path] = []
    real = Path.read_bytes

    def spy(path: Path) -> bytes:
        if path.suffix == ".patch":
            reads.append(path)
        return real(path)

    monkeypatch.setattr(Path, "read_bytes", spy)
    changes, still = queue.write_checked(root, entries, lints.LINTS)
    assert (changes.rewritten, still) == ([F10], [])
    assert reads == [root / "patches" / F10]
    assert real(root / "patches" / F10) == entries[0][1]
