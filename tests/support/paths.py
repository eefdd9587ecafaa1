"""Where the repository is, for every tier."""

from __future__ import annotations

from pathlib import Path

#: The checkout's root (the folder holding ``tests/``).
REPO_ROOT = Path(__file__).resolve().parents[2]
