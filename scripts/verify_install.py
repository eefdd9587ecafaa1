#!/usr/bin/env python3
"""Check a patched vLLM install on a serving host. Standard library only.

Run with the serving host's own Python after ``pip install <wheel>``::

    python verify_install.py

Prints the installed vLLM version and the patch manifest (upstream pin, each
patch), then checks that the version's local label matches the manifest and
that ``supports_eagle3`` holds for every architecture the manifest claims.
Exits 0 when all holds, else 1 with a one-line reason on stderr.
"""

from __future__ import annotations

import importlib
import importlib.metadata as md
import json
import sys

MANIFEST = "vpq_manifest.json"
MODULES = {
    "KimiK25ForConditionalGeneration": "vllm.model_executor.models.kimi_k25",
    "DeepseekV3ForCausalLM": "vllm.model_executor.models.deepseek_v2",
    "DeepseekV2ForCausalLM": "vllm.model_executor.models.deepseek_v2",
}


class Failed(Exception):
    pass


def check() -> None:
    try:
        dist = md.distribution("vllm")
    except md.PackageNotFoundError:
        raise Failed("vllm is not installed in this Python") from None
    text = dist.read_text(MANIFEST)
    if text is None:
        raise Failed(f"vllm {dist.version} has no {MANIFEST}: this is not a patch-queue build")
    man = json.loads(text)
    up = man["upstream"]
    print(f"vllm {dist.version}")
    print(f"  upstream: vllm {up['version']} ({up['tag']}, commit {up['commit']})")
    print(f"  upstream wheel: {up['wheel']['filename']} sha256 {up['wheel']['sha256']}")
    for p in man["patches"]:
        print(f"  patch: {p['name']}  sha256 {p['sha256'][:16]}  [{p.get('upstream_status')}]")
    if dist.version != man["version"]:
        raise Failed(f"installed version {dist.version} != manifest version {man['version']}")
    if dist.version.partition("+")[2] != man["local_label"]:
        raise Failed(f"local label of {dist.version} != manifest label {man['local_label']}")
    import vllm

    if vllm.__version__ != dist.version:
        raise Failed(f"vllm.__version__ {vllm.__version__} != installed {dist.version}")
    from vllm.model_executor.models.interfaces import supports_eagle3

    for arch in man.get("eagle3_architectures", []):
        module = MODULES.get(arch)
        if module is None:
            raise Failed(f"manifest claims {arch}, which this check does not know")
        cls = getattr(importlib.import_module(module), arch)
        if not supports_eagle3(cls):
            raise Failed(f"{arch} does not support EAGLE-3 in this install")
        print(f"  supports_eagle3({arch}) = True")


def main() -> int:
    try:
        check()
    except Failed as exc:
        print(f"verify_install: FAILED: {exc}", file=sys.stderr)
        return 1
    print("verify_install: OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
