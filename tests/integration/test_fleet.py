"""Fleet distribution on the real pin: the published index over the real
wheels, constraints.txt against the upstream release, and the Containerfile's
steps run in a venv that holds upstream vLLM 0.17.1 the way the image does."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from vpq.envs import venv as envs
from vpq.source import lock
from vpq.wheels import build, publish

from tests.support.fleet import Recipe, offline_env, run_steps, tool, uv_bin
from tests.support.paths import REPO_ROOT

CONTAINERFILE = REPO_ROOT / "Containerfile"


@pytest.fixture(scope="session")
def published(built: dict[str, build.Result]) -> Path:
    """Both platforms' real wheels, published where they were built."""
    dist = built["x86_64"].wheel.path.parent
    publish.publish(REPO_ROOT, dist)
    return dist


def _constraints(dist: Path) -> list[Requirement]:
    lines = (dist / "constraints.txt").read_text().splitlines()
    return [Requirement(ln) for ln in lines if ln and not ln.startswith("#")]


def test_constraints_stay_inside_the_upstream_release_wheels_requirements(
    published: Path, upstream_wheel: Path
) -> None:
    upstream = {}
    for line in publish.read_wheel(upstream_wheel).requires_dist:
        req = Requirement(line)
        if req.marker is None or "extra" not in str(req.marker):
            upstream[canonicalize_name(req.name)] = req
    got = _constraints(published)
    assert {canonicalize_name(r.name) for r in got} == set(upstream)
    for req in got:
        (spec,) = list(req.specifier) if "==" in str(req.specifier) else [None]
        if spec is not None:  # exact: inside upstream's own range
            assert upstream[canonicalize_name(req.name)].specifier.contains(spec.version), req
    assert "torch==2.10.0" in {str(r) for r in got}


def test_containerfile_builds_on_the_pinned_upstream_image(pin: lock.Lock) -> None:
    assert Recipe(CONTAINERFILE, REPO_ROOT).base_image() == f"vllm/vllm-openai:v{pin.version}"


def _hadolint(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([tool("hadolint"), str(path)], capture_output=True, text=True)


def test_hadolint_passes_the_recipe_and_catches_an_untagged_base(tmp_path: Path) -> None:
    ok = _hadolint(CONTAINERFILE)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    bad = tmp_path / "Containerfile"
    base = Recipe(CONTAINERFILE, REPO_ROOT).base_image()
    bad.write_text(CONTAINERFILE.read_text().replace(base, base.split(":")[0]))
    caught = _hadolint(bad)
    assert caught.returncode != 0 and "DL3006" in caught.stdout, caught.stdout


def _sources(recipe: Recipe) -> set[str]:
    """What the recipe takes from the build context: COPY sources, bind-mount sources."""
    out = set()
    for step in recipe.steps():
        if step.cmd.upper() == "COPY":
            out.update(step.value[:-1])
        for flag in step.flags:
            out.update(kv.split("=", 1)[1] for kv in flag.split(",") if kv.startswith("source="))
    return out


def test_build_context_holds_only_what_the_recipe_copies_and_mounts(tmp_path: Path) -> None:
    """.dockerignore, read with docker-py's own implementation of its rules."""
    from docker.utils.build import exclude_paths

    for rel in ["dist/x.whl", "dist/simple/vllm/index.html", "dist/vex.cdx.json",
                "scripts/verify_install.py",
                "scripts/vpq/cli.py", "build/work/setup.py", ".nox/tests/bin/python",
                "README.md"]:  # fmt: skip
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("x")
    ignore = (REPO_ROOT / ".dockerignore").read_text().splitlines()
    patterns = [ln for ln in ignore if ln.strip() and not ln.startswith("#")]
    sent = {p for p in exclude_paths(str(tmp_path), patterns) if (tmp_path / p).is_file()}
    assert sent == {"dist/x.whl", "dist/simple/vllm/index.html", "dist/vex.cdx.json",
                    "scripts/verify_install.py"}  # fmt: skip
    for source in _sources(Recipe(CONTAINERFILE, REPO_ROOT)):
        assert any(f == source.rstrip("/") or f.startswith(source.rstrip("/") + "/")
                   for f in sent), source  # fmt: skip


def _is_install(step: object) -> bool:
    return getattr(step, "cmd", "").upper() == "RUN" and bool(getattr(step, "flags", ()))


@pytest.mark.outside_ci  # CI: a representative subset (docs/tests.md)
def test_recipe_turns_the_upstream_image_into_one_that_passes_verify_install(
    published: Path, deps_venv: Path, upstream_wheel: Path, tmp_path: Path
) -> None:
    # the image: upstream's wheel installed over its dependencies
    python = envs.wheel_env(tmp_path / "image", deps_venv, upstream_wheel, pip=True)
    recipe = Recipe(
        CONTAINERFILE,
        context=tmp_path / "context",
        overrides={"VPQ_DIST": str(tmp_path / "mnt" / "dist"), "VPQ_HOME": str(tmp_path / "opt")},
    )
    (recipe.context / "scripts").mkdir(parents=True)
    (recipe.context / "scripts" / "verify_install.py").symlink_to(
        REPO_ROOT / "scripts" / "verify_install.py"
    )
    (recipe.context / "dist").symlink_to(published)
    steps = recipe.steps()
    assert sum(map(_is_install, steps)) == 1, [s.original for s in steps]
    # without the install step the verify step fails the build
    with pytest.raises(AssertionError, match="no vpq_manifest.json"):
        run_steps(recipe, python.parent, [s for s in steps if not _is_install(s)])
    log = run_steps(recipe, python.parent, steps)
    version = next(iter(publish.wheels_in(published))).version
    assert f"vllm {version}" in log[-1] and "verify_install: OK" in log[-1], log[-1]
    assert "covering this wheel" in log[-1], log[-1]  # the VEX document beside it was read
    shown = subprocess.run(
        [str(python), "-m", "pip", "list", "--format=freeze"],
        capture_output=True, text=True, env=offline_env(),
    ).stdout  # fmt: skip
    assert f"vllm=={version}" in shown.splitlines()


def _check_against_constraints(dist: Path, resolved: dict[str, str], env: dict[str, str]) -> None:
    """Every constraint whose marker holds in ``env`` holds for ``resolved``."""
    for req in _constraints(dist):
        if req.marker is not None and not req.marker.evaluate(env):
            continue
        got = resolved[canonicalize_name(req.name)]
        assert req.specifier.contains(got, prereleases=True), (str(req), got)
    assert resolved["torch"] == "2.10.0"


def test_pip_resolves_our_wheel_from_the_index_and_the_rest_within_constraints(
    published: Path, tmp_path: Path
) -> None:
    """The index route on a fresh host, as a dry run (network: the default index)."""
    (wheel,) = [w for w in publish.wheels_in(published) if "x86_64" in w.path.name]
    report = tmp_path / "report.json"
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet",
         "--report", str(report), "--extra-index-url", (published / "simple").as_uri(),
         "-c", str(published / "constraints.txt"), f"vllm=={wheel.version}"],
        capture_output=True, text=True, timeout=1800,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    installs = json.loads(report.read_text())["install"]
    resolved = {canonicalize_name(i["metadata"]["name"]): i["metadata"]["version"]
                for i in installs}  # fmt: skip
    (ours,) = [i for i in installs if canonicalize_name(i["metadata"]["name"]) == "vllm"]
    assert ours["download_info"]["url"].startswith(published.as_uri())
    assert ours["download_info"]["archive_info"]["hashes"] == {"sha256": wheel.sha256}
    _check_against_constraints(published, resolved, default_environment())  # type: ignore[arg-type]


def test_uv_locks_the_image_python_with_hashes_from_the_index_and_constraints(
    published: Path, tmp_path: Path
) -> None:
    """The hashed lock an operator makes on a networked machine (docs/fleet.md):
    ``uv pip compile --generate-hashes`` for the image's Python 3.12."""
    uv = uv_bin()
    assert uv, "uv is not installed (nox -s tests installs it)"
    version = publish.wheels_in(published)[0].version
    (tmp_path / "in.txt").write_text(f"vllm=={version}\n")
    lock_file = tmp_path / "lock.txt"
    proc = subprocess.run(
        [uv, "pip", "compile", "--no-config", "--quiet", "--generate-hashes",
         "--extra-index-url", (published / "simple").as_uri(),
         "-c", str(published / "constraints.txt"), "--python-version", "3.12",
         "--python-platform", "x86_64-manylinux_2_31", str(tmp_path / "in.txt"),
         "-o", str(lock_file)],
        capture_output=True, text=True, timeout=1800,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    text = lock_file.read_text()
    ours = text.split(f"vllm=={version} \\\n", 1)[1].split("# via", 1)[0]
    hashes = {h.strip(" \\\n") for h in ours.split("--hash=sha256:") if h.strip(" \\\n")}
    assert hashes == {w.sha256 for w in publish.wheels_in(published)}
    env = {**default_environment(), "python_version": "3.12", "python_full_version": "3.12.0",
           "platform_machine": "x86_64", "sys_platform": "linux"}  # fmt: skip
    resolved = {name: str(v) for name, v in publish.ci_pins(text).items()}
    _check_against_constraints(published, resolved, env)
