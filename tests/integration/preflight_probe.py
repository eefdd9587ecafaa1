"""Run inside a venv that has a vLLM wheel installed; prints one JSON line.

Usage: python preflight_probe.py SCRIPTS_DIR TARGET_DIR HEADS_DIR

``preflight`` holds, for every head directory under HEADS_DIR, the exit code
and findings of ``verify_install.preflight`` (one vLLM import for all).

Nothing else: the tests' expectations are one outcome per head, fixed for
the pinned release (test_preflight_installed.py), not derived from the
wheel with the same calls the preflight makes (its registry lookup, the
runner's id reader, ``hf_config_override``, a search of ``llama_eagle3``'s
source). Whether the wheel really serves each head is proved elsewhere,
independently: the engine tier serves the Llama-shaped heads (top level,
``eagle_config``, EAGLE 3.1) on a real engine, and tests/semantics builds
the MLA head and the EAGLE 3.1 Llama head from their real classes.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from dataclasses import asdict
from pathlib import Path

os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")
logging.disable(logging.WARNING)


def main() -> None:
    scripts, target, heads_dir = (Path(a) for a in sys.argv[1:4])
    sys.path.insert(0, str(scripts))
    import verify_install as vi

    heads = sorted(p for p in heads_dir.iterdir() if p.is_dir())
    out: dict[str, object] = {"preflight": {}}
    for head in heads:
        findings = vi.preflight(target, head)
        out["preflight"][head.name] = {  # type: ignore[index]
            "exit": vi.exit_code(findings),
            "findings": [asdict(f) for f in findings],
        }
    print("PROBE " + json.dumps(out))


if __name__ == "__main__":
    main()
