from pathlib import Path

import pytest
from vpq.source import lock

GOOD = f"""
[upstream]
name = "vllm"
version = "0.17.1"
tag = "v0.17.1"
repository = "https://example.invalid/vllm.git"
commit = "95c0f928c"
commit_source = "sdist vllm/_version.py"

[sdist]
filename = "vllm-0.17.1.tar.gz"
sha256 = "{"a" * 64}"

[wheels.x86_64]
filename = "vllm-0.17.1-cp38-abi3-manylinux_2_31_x86_64.whl"
sha256 = "{"b" * 64}"
"""


def test_a_valid_lock_round_trips_through_dump(tmp_path: Path) -> None:
    (tmp_path / "upstream.lock").write_text(GOOD)
    pin = lock.load(tmp_path)
    assert pin.version == "0.17.1" and pin.wheel("x86_64").sha256 == "b" * 64
    lock.dump(pin, tmp_path)
    assert lock.load(tmp_path) == pin


def test_missing_lock_names_the_file(tmp_path: Path) -> None:
    with pytest.raises(lock.LockError, match=r"upstream.lock: not found"):
        lock.load(tmp_path)


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda t: t.replace("[sdist]", "[sdistx]"), r"missing table \[sdist\]"),
        (
            lambda t: t.replace('sha256 = "' + "a" * 64, 'sha256 = "xyz'),
            r"\[sdist\] sha256 must be 64",
        ),
        (
            lambda t: t.replace('version = "0.17.1"', 'version = "not a version"'),
            "not a PEP 440 version",
        ),
        (lambda t: t.replace('commit = "95c0f928c"', 'commit = "g95c0f928c"'), "commit must be"),
        (
            lambda t: t.replace('tag = "v0.17.1"\n', ""),
            r"\[upstream\] needs a non-empty string 'tag'",
        ),
        (lambda t: t + "[[[", "not valid TOML"),
    ],
)
def test_malformed_lock_names_file_and_key(tmp_path: Path, edit, message: str) -> None:
    (tmp_path / "upstream.lock").write_text(edit(GOOD))
    with pytest.raises(lock.LockError, match=message) as exc:
        lock.load(tmp_path)
    assert str(tmp_path / "upstream.lock") in str(exc.value)


def test_unpinned_platform_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "upstream.lock").write_text(GOOD)
    with pytest.raises(lock.LockError, match="pins no wheel for platform 'riscv64'"):
        lock.load(tmp_path).wheel("riscv64")
