"""GPU integration tests (``nox -s gpu_tests``): CUDA detection and environments.

``no_cuda_reason()`` decides, before anything is installed, whether this
host can run them: it needs a ``/dev/nvidia<N>`` device node or an
``nvidia-smi -L`` that lists a GPU. The module imports only the standard
library at the top, so the noxfile can call it from nox's own process.

With a GPU, ``main()`` (``python -m vpq.envs.gpu [OPTIONS] [PYTEST ARGS]``):

1. takes ``dist/``'s wheel for the current series and this host's platform,
   building it first if it is not there;
2. installs it *with its dependencies* (torch, the CUDA stack, ...) into a
   fresh venv, as a serving host would: ``gpu-<wheel sha256[:12]>`` in the
   cache's ``envs/`` beside the other venvs (``vpq.envs.venv.envs_dir``), made
   once per wheel and reused while its bytes are unchanged;
3. makes a second venv with the unpatched upstream release wheel
   (``--no-deps``, seeing the first venv's packages through a ``.pth``
   file: the two wheels carry the same dependency metadata), for the one
   test that must fail there;
4. runs ``pytest tests/gpu`` with the first venv's python, passing
   ``--model``, ``--drafter``, ``--tensor-parallel-size`` and the upstream
   venv's python through; its exit status is the result.
"""

from __future__ import annotations

import argparse
import glob
import os
import shutil
import subprocess
import sys
from pathlib import Path

from vpq.core import proc
from vpq.core.proc import PYTEST
from vpq.core.workspace import Workspace


def no_cuda_reason(dev: Path = Path("/dev"), smi: str | None = "nvidia-smi") -> str | None:
    """None if a CUDA device looks usable; else one line saying why not.

    ``smi`` is the ``nvidia-smi`` command to try (None: do not try); a
    device node under ``dev`` alone is enough, since containers often lack
    ``nvidia-smi``.
    """
    nodes = sorted(glob.glob(str(dev / "nvidia[0-9]*")))
    if nodes:
        return None
    exe = shutil.which(smi) if smi else None
    if exe is None:
        return f"no CUDA device: no {dev}/nvidia* device node and no nvidia-smi on PATH"
    try:
        listed = subprocess.run([exe, "-L"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"no CUDA device: no {dev}/nvidia* device node and nvidia-smi failed ({exc})"
    if listed.returncode == 0 and any(ln.startswith("GPU ") for ln in listed.stdout.splitlines()):
        return None
    why = (listed.stderr or listed.stdout).strip().splitlines()[:1] or [f"exit {listed.returncode}"]
    return f"no CUDA device: no {dev}/nvidia* device node and nvidia-smi lists none ({why[0]})"


def _run(cmd: list[str]) -> None:
    from vpq.envs.venv import VenvError

    proc.run(cmd, VenvError, stream=True)


def host_wheel(root: Path) -> Path:
    """``dist/``'s wheel for the current series on this platform, built if missing."""
    from vpq.core import worklock
    from vpq.wheels import build, wheel

    pin, patches = build.load_inputs(root)
    plat = build.host_platform()
    version = wheel.local_version(pin.version, build.label_for(patches))
    pattern = f"{pin.name}-{version}-{wheel.BUILD_TAG}-*_{plat}.whl"
    found = sorted(Workspace(root).dist.glob(pattern))
    if found:
        return found[-1]
    print(f"no {pin.name} {version} wheel for {plat} in dist/; building it", flush=True)
    with worklock.held(root, "build (for gpu_tests)"):
        (res,) = build.build_wheels(root, platform=plat)
    return res.wheel.path


def serving_env(root: Path, wheel_path: Path) -> Path:
    """A venv with ``wheel_path`` and its dependencies (plus pytest). Returns its python."""
    from vpq.core.files import sha256_file
    from vpq.envs.venv import cached, envs_dir

    def make(dest: Path) -> None:
        """Create the venv at ``dest`` and install the wheel with its dependencies."""
        _run([sys.executable, "-m", "venv", str(dest)])
        _run([str(dest / "bin" / "python"), "-m", "pip", "install", str(wheel_path), PYTEST])

    dest = cached(envs_dir() / f"gpu-{sha256_file(wheel_path)[:12]}", make)
    return dest / "bin" / "python"


def upstream_env(root: Path, serving_python: Path) -> Path:
    """A venv with the unpatched upstream wheel over the serving venv's packages."""
    from vpq.envs import venv
    from vpq.source import fetch
    from vpq.wheels import build

    pin = build.load_inputs(root)[0]
    w = pin.wheel(build.host_platform())
    up = fetch.fetch(pin.name, w.filename, w.sha256)
    deps = serving_python.parent.parent
    dest = venv.envs_dir() / f"{deps.name}-upstream-{w.sha256[:12]}"
    return venv.cached(dest, lambda d: venv.wheel_env(d, deps, up)) / "bin" / "python"


def parser() -> argparse.ArgumentParser:
    """The argument parser of ``python -m vpq.envs.gpu``."""
    ap = argparse.ArgumentParser(
        prog="python -m vpq.envs.gpu",
        description="GPU integration tests on the built wheel; other arguments go to pytest.",
    )
    ap.add_argument("--root", default=".", help="repository root (default: .)")
    ap.add_argument("--model", help="target checkpoint directory (default: the tiny fixture)")
    ap.add_argument("--drafter", help="EAGLE-3 head directory (with --model)")
    ap.add_argument("--tensor-parallel-size", type=int, help="for --model (default 1)")
    ap.add_argument(
        "--no-upstream", action="store_true", help="skip the unpatched-upstream test's venv"
    )
    return ap


def pytest_command(
    python: Path, ns: argparse.Namespace, upstream: Path | None, extra: list[str]
) -> list[str]:
    """The pytest command line that runs tests/gpu and the engine tier's
    cases (tests/engine, ``--engine-backend gpu``) in ``python``'s venv."""
    cmd = [str(python), "-m", "pytest", "tests/gpu", "tests/engine", "-p", "no:cacheprovider"]
    # every MLA and compiled case: a GPU host runs them all (the CPU tier
    # keeps some outside CI for time, tests/engine/test_mla_engine.py)
    cmd += ["--engine-backend", "gpu", "--engine-mla-extra"]
    for opt in ("model", "drafter"):
        if getattr(ns, opt):
            cmd += [f"--{opt}", str(Path(getattr(ns, opt)).resolve())]
    if ns.tensor_parallel_size:
        cmd += ["--tensor-parallel-size", str(ns.tensor_parallel_size)]
    if upstream is not None:
        cmd += ["--upstream-python", str(upstream), "--engine-upstream-python", str(upstream)]
    return cmd + extra


def main(argv: list[str] | None = None) -> int:
    """``python -m vpq.envs.gpu``: make the serving venvs and run tests/gpu; pytest's exit code."""
    from vpq.core.errors import VpqError

    ns, extra = parser().parse_known_args(argv)
    if bool(ns.model) != bool(ns.drafter):
        parser().error("--model and --drafter go together")
    reason = no_cuda_reason()
    if reason:
        print(f"gpu_tests skipped: {reason}")
        return 0
    root = Path(ns.root).resolve()
    try:
        python = serving_env(root, host_wheel(root))
        upstream = None if ns.no_upstream else upstream_env(root, python)
    except VpqError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    env = {**os.environ, "PYTHONPATH": str(root / "scripts")}
    cmd = pytest_command(python, ns, upstream, extra)
    print("+ " + " ".join(cmd), flush=True)
    return subprocess.run(cmd, cwd=root, env=env).returncode


if __name__ == "__main__":
    sys.exit(main())
