"""Ledgers edited by tables (``vpq.core.tomltext``), and the advisory
status ``fixed-upstream``, on copies of this repository's own ledgers."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from vpq.core import tomltext
from vpq.wheels import advisories

from tests.conftest import REPO_ROOT

LEDGERS = [
    "advisories.toml",
    "backport-tests.toml",
    "peer-tests.toml",
    "peer-expected.toml",
    "mutation.toml",
]


def _copy(tmp: Path) -> Path:
    root = tmp / "repo"
    root.mkdir()
    for name in [*LEDGERS, "series", "upstream.lock", "probes.toml", "CHANGELOG.md"]:
        shutil.copy(REPO_ROOT / name, root / name)
    shutil.copytree(REPO_ROOT / "patches", root / "patches")
    (root / "docs").mkdir()
    shutil.copy(REPO_ROOT / advisories.TABLE_PAGE, root / advisories.TABLE_PAGE)
    return root


def test_fixed_upstream_needs_fixed_in_and_a_pin_that_has_the_fix(tmp_path: Path) -> None:
    root = _copy(tmp_path)
    gid = "GHSA-rwxx-mrjm-wc2m"  # open, fixed in 0.24.0
    path = root / "advisories.toml"
    path.write_text(tomltext.set_value(path.read_text(), (gid,), "status", "fixed-upstream", "x"))
    problems = [p for p in advisories.lint(root) if gid in p]
    assert problems == [
        f"{path}: {gid}: status 'fixed-upstream', but the pin, vllm 0.17.1, is before "
        "fixed-in 0.24.0"
    ]
    text = re.sub(r'fixed-in = "0.24.0"\n', "", path.read_text(), count=1)
    path.write_text(text)
    assert f"{path}: {gid}: status 'fixed-upstream' needs key 'fixed-in'" in advisories.lint(root)


def test_a_table_takes_the_comments_just_above_it_and_strings_are_not_headers() -> None:
    text = (
        "# file comment\n\n"
        '["a"]\nx = 1\n\n'
        '# about b\n["b"]\nwhy = """\n[not a header]\n"""\n\n'
        '["b".sub]\ny = 2\n'
    )
    blocks = tomltext.split(text)
    assert [b.path for b in blocks] == [None, ("a",), ("b",), ("b", "sub")]
    assert blocks[2].lines[0] == "# about b\n"
    assert tomltext.join(blocks) == text
    kept = tomltext.drop_tables(text, lambda p, _d: p[0] == "b", "t")
    assert kept == '# file comment\n\n["a"]\nx = 1\n\n'
    with pytest.raises(tomltext.TomlTextError, match="intended data"):
        tomltext.drop_tables(text, lambda p, _d: p == ("b",), "t")  # its sub-table would stay
    added = tomltext.set_value(text, ("a",), "z", "w", "t")
    assert '["a"]\nx = 1\nz = "w"\n' in added
