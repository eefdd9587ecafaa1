"""Helpers for the fleet tests: pip and uv run offline against a published
dist/, and the Containerfile's steps run outside a container."""

from __future__ import annotations

import os
import shutil
import string
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: Environment variables that point pip or uv at this machine's configured
#: indexes, find-links and constraints: dropped, so the installers see only
#: what the test gives them.
_INSTALLER_PREFIXES = ("PIP_", "UV_")


def offline_env(**extra: str) -> dict[str, str]:
    """os.environ without pip's and uv's settings, plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(_INSTALLER_PREFIXES)}
    return {**env, **extra}


def run(cmd: list[str], **kw: object) -> subprocess.CompletedProcess[str]:
    """Run ``cmd`` offline-configured; capture its output."""
    env = kw.pop("env", None) or offline_env()
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=900, **kw)  # type: ignore[call-overload]


def pip_install(target: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``pip install --isolated --target TARGET ARGS`` (no config, no env)."""
    cmd = [sys.executable, "-m", "pip", "install", "--isolated", "--no-cache-dir", "-q"]
    return run([*cmd, "--target", str(target), *args])


def uv_bin() -> str | None:
    """The uv binary of the ``uv`` package, or on PATH; None without one."""
    try:
        import uv

        return uv.find_uv_bin()
    except (ImportError, FileNotFoundError):
        return shutil.which("uv")


def uv_install(uv: str, target: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``uv pip install --offline --no-config --target TARGET ARGS``."""
    cmd = [uv, "pip", "install", "--offline", "--no-config", "--no-cache", "-q"]
    cmd += ["--python", sys.executable, "--target", str(target), *args]
    return run(cmd)


@dataclass
class Recipe:
    """The Containerfile's instructions after ``FROM``, run on this machine:
    ``ARG`` sets a variable, ``COPY`` copies from the build context, ``RUN``
    runs its command with ``/bin/sh -c`` after making its bind mounts as
    symlinks. Variables named in ``overrides`` are set as ``--build-arg``
    would set them."""

    path: Path
    context: Path
    overrides: dict[str, str] = field(default_factory=dict)

    def commands(self) -> list[Any]:
        """The parsed instructions (BuildKit's own parser, the ``dockerfile``
        package: ``dockerfile.Command`` tuples)."""
        import dockerfile

        return list(dockerfile.parse_file(str(self.path)))

    def base_image(self) -> str:
        """The image of the one ``FROM``."""
        (base,) = [c.value[0] for c in self.commands() if c.cmd.upper() == "FROM"]
        return base

    def steps(self) -> list[Any]:
        """The instructions after ``FROM``."""
        cmds = self.commands()
        first = [c.cmd.upper() for c in cmds].index("FROM")
        return cmds[first + 1 :]


def _expand(text: str, env: dict[str, str]) -> str:
    """``$VAR`` and ``${VAR}`` expanded from ``env`` (Dockerfile word
    expansion); an unknown variable raises KeyError."""
    return string.Template(text).substitute(env)


def _bind(flag: str, recipe: Recipe, env: dict[str, str]) -> None:
    """Make a ``--mount=type=bind,source=S,target=T`` as a symlink T -> S."""
    assert flag.startswith("--mount="), f"the test cannot emulate {flag}"
    opts = dict(kv.split("=", 1) for kv in _expand(flag[len("--mount=") :], env).split(","))
    assert opts.pop("type") == "bind" and set(opts) == {"source", "target"}, flag
    target = Path(opts["target"])
    target.parent.mkdir(parents=True, exist_ok=True)
    target.symlink_to(recipe.context / opts["source"])


def run_steps(recipe: Recipe, bin_dir: Path, steps: list[Any]) -> list[str]:
    """Run ``steps`` with ``bin_dir`` first on PATH (so ``python3`` is the
    venv's, as it is the image's); returns one transcript line per step.
    A failing RUN raises AssertionError with its output."""
    env = offline_env(PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    log = []
    for c in steps:
        kind = c.cmd.upper()
        if kind == "ARG":
            name, _, default = c.value[0].partition("=")
            env[name] = recipe.overrides.get(name, default)
        elif kind == "COPY":
            assert not c.flags and len(c.value) == 2, f"the test cannot emulate {c.original}"
            dest = Path(_expand(c.value[1], env))
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(recipe.context / c.value[0], dest)
        elif kind == "RUN":
            for flag in c.flags:
                _bind(flag, recipe, env)
            proc = run(["/bin/sh", "-c", c.value[0]], env=env)
            assert proc.returncode == 0, f"{c.original}\n{proc.stdout}\n{proc.stderr}"
            log.append(proc.stdout)
        else:
            raise AssertionError(f"the test cannot emulate {c.original}")
    return log


def tool(name: str) -> str:
    """A console script of this Python's environment (nox installs the fleet
    tests' tools there), else from PATH; fails the test without one."""
    here = Path(sys.executable).parent / name
    found = str(here) if here.exists() else shutil.which(name)
    if found is None:
        raise AssertionError(f"{name} is not installed: run the tests with `nox -s tests`")
    return found
