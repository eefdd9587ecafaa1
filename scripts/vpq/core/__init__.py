"""The bottom layer: what every other part of ``vpq`` stands on, and that
imports nothing of ``vpq`` outside this package.

``errors`` (the base exception), ``files`` (atomic writes, hashes, shared
constants), ``proc`` (child processes, the probe line protocol),
``progress`` (long steps' progress lines), ``workspace`` (the paths under
``build/`` and ``dist/``), ``worklock`` (one command at a time on a
checkout), ``supported`` (the oldest Python the tool runs on),
``compat`` (standard-library features newer than that Python) and
``tomltext`` (TOML files edited by tables, comments kept).

This file imports none of them.
"""
