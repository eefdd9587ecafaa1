"""Moving the pin to a new upstream release: the releases, the rebase's
state machine, its report and staircase, their verdict cache, the ledgers
and the changelog a move edits, a whole move checked from a clean clone,
and the moved series on a real CPU engine; imports go down to
``vpq.envs`` and below.

``releases``, ``rebase``, ``staircase``, ``verdicts``, ``ledgers``,
``changelog``, ``move_check`` and ``moved_engine``.

This file imports none of them.
"""
