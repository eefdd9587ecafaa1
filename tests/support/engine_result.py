"""What the two tiers that start real engines (tests/engine, tests/gpu) both
do with an engine probe's result (``tests/engine/engine_probe.py``)."""

from __future__ import annotations

from typing import Any

import pytest


def ok(result: dict[str, Any]) -> dict[str, Any]:
    """``result`` if the engine ran; fails the test with its error otherwise."""
    if not result.get("ok"):
        pytest.fail(
            f"engine failed in phase {result.get('phase')}: {result.get('error')}\n"
            f"{result.get('traceback', '')}\n--- log tail ---\n{result.get('log_tail', '')}"
        )
    return result
