"""The preflight's file rules (``scripts/verify_install.py``) without vLLM,
and the findings worth a test's attention."""

from __future__ import annotations

from pathlib import Path

import verify_install as vi

NOTEWORTHY = (vi.ERROR, vi.WARNING, vi.NOTE)


def problems(findings: list[vi.Finding]) -> list[tuple[str, str]]:
    return [(f.severity, f.rule) for f in findings if f.severity in NOTEWORTHY]


def preflight(target: Path, head_dir: Path) -> list[vi.Finding]:
    return vi.preflight(target, head_dir, use_vllm=False)
