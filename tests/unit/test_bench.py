"""``nox -s bench``'s installer cases: the contract check's wheel venv by
pip and by uv in turn, each with its ratio to pip's case of the same round
(``vpq.checks.bench.installer_cases``; the bench runs them on upstream's wheel)."""

from __future__ import annotations

from pathlib import Path

import pytest
from vpq.checks import bench
from vpq.envs import installer

from tests.unit.tiny_upstream import _wheel


def test_installer_cases_time_pip_and_uv_in_turn_with_ratios_to_pip(tmp_path: Path) -> None:
    if installer.uv_bin() is None:
        pytest.skip("uv is not installed in this Python (a test dependency: noxfile.py)")
    wheel = tmp_path / "vllm-1.0-cp38-abi3-linux_x86_64.whl"
    _wheel(wheel)
    cases = bench.installer_cases(tmp_path, wheel, rounds=1)
    assert [c.name for c in cases] == [
        "contract wheel venv by pip, round 1",
        "contract wheel venv by uv, round 1",
    ]
    assert all(c.ok for c in cases) and cases[0].vs_pip == 1.0
    assert cases[1].vs_pip == round(cases[1].seconds / cases[0].seconds, 3)
    assert list((tmp_path / "build").iterdir()) == []  # the venvs are gone
    table = bench.render(cases).splitlines()
    assert table[0].split()[-8:] == ["pip", "/", "no", "spec", "/", "1", "batch", "ok"]
    assert table[2].split()[-4:] == [f"{cases[1].vs_pip:.3f}", "-", "-", "yes"]


def test_serving_cases_read_the_load_test_report(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The load test's two lines become two cases, each with its ratio to the
    load served without speculation; the whole run is a case too."""
    (tmp_path / "build").mkdir()

    def fake_measure(name, args, root, *, cmd=None, env=None):  # type: ignore[no-untyped-def]
        lines = [
            '{"name": "no speculation", "requests": 34, "seconds": 20.0}',
            '{"name": "EAGLE-3", "requests": 34, "seconds": 30.0}',
        ]
        Path(env["VPQ_LOAD_REPORT"]).write_text("\n".join(lines) + "\n")
        assert cmd[-4:] == [str(root / bench.LOAD_TEST), "-q", "-p", "no:cacheprovider"]
        return bench.Case(name, 99.0, 1.0, True)

    monkeypatch.setattr(bench, "measure", fake_measure)
    cases = bench.serving_cases(tmp_path)
    assert [(c.name, c.seconds, c.vs_plain) for c in cases[1:]] == [
        ("load: 34 requests, no speculation", 20.0, 1.0),
        ("load: 34 requests, EAGLE-3", 30.0, 1.5),
    ]
    assert cases[0].ok and list((tmp_path / "build").iterdir()) == []


def test_pipeline_cases_read_the_pp_case_s_report(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The PP=2 case's two lines become two cases, each with its ratio to
    the load with one batch in flight; the whole run is a case too."""
    (tmp_path / "build").mkdir()

    def fake_measure(name, args, root, *, cmd=None, env=None):  # type: ignore[no-untyped-def]
        lines = [
            '{"name": "overlapped", "requests": 24, "seconds": 6.0}',
            '{"name": "one batch in flight", "requests": 24, "seconds": 10.0}',
        ]
        Path(env["VPQ_PIPELINE_REPORT"]).write_text("\n".join(lines) + "\n")
        assert str(root / bench.PIPELINE_TEST) in cmd and "--outside-ci" in cmd
        return bench.Case(name, 99.0, 1.0, True)

    monkeypatch.setattr(bench, "measure", fake_measure)
    cases = bench.pipeline_cases(tmp_path)
    assert [(c.name, c.seconds, c.vs_one_batch) for c in cases[1:]] == [
        ("PP=2: 24 requests, overlapped", 6.0, 0.6),
        ("PP=2: 24 requests, one batch in flight", 10.0, 1.0),
    ]
    assert cases[0].ok and list((tmp_path / "build").iterdir()) == []


def test_cold_cases_run_pip_then_the_lock_each_on_fresh_empty_caches(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first build, the tests' deps venv and the engine tier's base
    venv, each by the old path (``VPQ_DEPS_LOCK=off``) then from its lock,
    each on its own new, empty download, pip and uv caches; the lock's
    ``vs_pip`` is its ratio to pip's."""
    seen: list[tuple[str, dict[str, str]]] = []
    seconds = iter([300.0, 90.0, 240.0, 60.0, 260.0, 65.0, 100.0, 20.0])

    def fake_measure(name, args, root, *, cmd=None, env=None):  # type: ignore[no-untyped-def]
        caches = [Path(env[v]) for v in ("VPQ_CACHE_DIR", "PIP_CACHE_DIR", "UV_CACHE_DIR")]
        assert all(c.is_dir() and not any(c.iterdir()) for c in caches)
        assert len(set(caches)) == 3
        if cmd is None:
            assert args[0] == "build"
        elif "reference_engine" in cmd[2]:
            assert cmd[3:] == [str(tmp_path)]
        else:
            assert Path(cmd[-1]).read_bytes() == b"numpy\n"
            assert cmd[:2] == [bench.sys.executable, "-c"]
            assert ("engine_env.base_env" in cmd[2]) is (cmd[3] == str(tmp_path))
        seen.append((name, env["VPQ_DEPS_LOCK"]))
        return bench.Case(name, next(seconds), 1.0, True)

    monkeypatch.setattr(bench, "measure", fake_measure)
    cases = bench.cold_cases(tmp_path, b"numpy\n")
    assert seen == [
        ("first vpq build, cold caches, pip", "off"),
        ("first vpq build, cold caches, the lock", "on"),
        ("the tests' deps venv, cold caches, pip", "off"),
        ("the tests' deps venv, cold caches, the lock", "on"),
        ("the engine tier's base venv, cold caches, pip", "off"),
        ("the engine tier's base venv, cold caches, the lock", "on"),
        ("the reference engine's venv, cold caches, pip", "off"),
        ("the reference engine's venv, cold caches, the lock", "on"),
    ]
    assert [c.vs_pip for c in cases] == [1.0, 0.3, 1.0, 0.25, 1.0, 0.25, 1.0, 0.2]
    assert list((tmp_path / "build").iterdir()) == []  # the caches are gone
