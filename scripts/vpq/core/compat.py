"""Standard-library features newer than the oldest Python the tool runs on.

Knows nothing about vLLM or the series: it only picks, once, the module
that has the feature.

- ``tarfile``: extraction filters (``extractall(..., filter="data")``) came
  in CPython 3.11.4; Debian 12's stock ``python3`` is 3.11.2. There the
  ``backports.tarfile`` package (CPython 3.12's module, a dependency on those
  patch levels only, pyproject.toml) stands in.
"""

from __future__ import annotations

import importlib
import tarfile as _stdlib_tarfile
from types import ModuleType
from typing import TYPE_CHECKING


def _tarfile() -> ModuleType:
    if hasattr(_stdlib_tarfile, "data_filter"):
        return _stdlib_tarfile
    return importlib.import_module("backports.tarfile")


if TYPE_CHECKING:
    # Both modules have the same API; callers are typed against the stdlib's.
    tarfile = _stdlib_tarfile
else:
    tarfile = _tarfile()
