"""Checks on the tool and its tests: the mutation check, the benchmarks, the
cache's sizes and pruning, and upstream's own tests on the patched tree;
imports go down to ``vpq.move`` and below.

``mutation``, ``bench``, ``figures`` (README's timed two commands),
``cache``, ``peer_list``, ``peer_env``, ``peer_run``, ``peer_report``,
``peer_backports``, ``peer_moved`` (the new release's tests on a moved
series) and ``lints`` (the lint composition: every
lint ``vpq lint`` and ``vpq export`` run, in order).

This file imports none of them.
"""
