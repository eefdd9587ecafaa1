"""The Pythons the tool runs on, and the one-sentence refusal of the others.

The minimum is CPython 3.11, any patch level: ``tomllib`` (the lock, the
pins, pyproject.toml) is new in 3.11. On 3.11.0 to 3.11.3 the standard
library's ``tarfile`` has no extraction filters and ``backports.tarfile``
stands in (``vpq.core.compat``; a dependency on those patch levels only).
Tested: Debian 12's ``/usr/bin/python3`` (3.11.2) and pyenv's 3.11.7; the
engine tier needs 3.11 itself (its pinned torch and triton are cp311).

Checked first thing by the noxfile (before nox, ``tomllib`` or any session
venv, download or build) and by ``python -m vpq``. This module must import
and run on old Pythons (3.7 and newer: nox itself needs 3.8), so its
annotations stay strings and it uses nothing newer.
"""

from __future__ import annotations

import sys

#: The oldest (major, minor) the tool runs on; pyproject.toml's
#: ``requires-python`` says the same (tests/unit/test_supported.py).
MINIMUM = (3, 11)


def refusal(version_info: tuple[int, ...] | None = None, executable: str = "") -> str | None:
    """The one sentence that refuses ``version_info`` (default: this Python),
    or None where it is supported."""
    version_info = version_info or tuple(sys.version_info[:3])
    if version_info[:2] >= MINIMUM:
        return None
    have = ".".join(str(x) for x in version_info[:3])
    least = f"{MINIMUM[0]}.{MINIMUM[1]}"
    return (
        f"This tool needs Python {least} or newer and {executable or sys.executable} is "
        f"Python {have}: remove .venv and run the command again with Python {least} or "
        "newer as python3."
    )


def require_supported_python() -> None:
    """Exit with the refusal (status 1, on stderr) on an unsupported Python."""
    message = refusal()
    if message:
        sys.stderr.write(message + "\n")
        sys.exit(1)
