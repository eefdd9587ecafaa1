"""Checks on the tool and its tests: the mutation check, the benchmarks and
the cache's sizes and pruning; imports go down to ``vpq.move`` and below.

``mutation``, ``bench`` and ``cache``.

This file imports none of them.
"""
