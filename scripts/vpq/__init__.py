"""vpq: a quilt-style patch queue over a pinned vLLM release.

One module per noun, in sub-packages by what they serve. A sub-package
imports only from those listed before it (``tests/unit/test_structure.py``
checks this, and that there is no cycle):

- ``core``: ``core.errors`` (the base exception), ``core.files`` (atomic
  writes, hashes, shared constants), ``core.proc`` (child processes, the
  probe line protocol), ``core.progress`` (long steps' progress lines),
  ``core.workspace`` (the paths under ``build/`` and ``dist/``),
  ``core.worklock`` (one command at a time on a checkout),
  ``core.supported`` (the oldest Python the tool runs on, and the refusal
  of an older one), ``core.compat`` (standard-library features newer than
  that oldest Python), ``core.tomltext`` (TOML files edited by tables,
  comments kept);
- ``contract``: the EAGLE-3 contract, pure ``ast`` over vLLM's source, a
  package whose modules import one way: ``contract.items`` (the contract's
  files, the one table of claimed architectures, items),
  ``contract.target`` (target-side discovery), ``contract.drafter``
  (drafter-side discovery), ``contract.table`` (the verdict table) and
  ``contract.probe`` (runs inside a vLLM venv);
- ``checkpoints``: ``checkpoints.fixture`` and
  ``checkpoints.kimi_k25_tiny_image_processor`` (the tiny Kimi-K2.5
  checkpoint), ``checkpoints.scripted`` (weights with known outputs);
- ``source``: ``source.lock`` (upstream.lock), ``source.series`` (series
  file and patch mails), ``source.fetch`` (hash-checked download cache),
  ``source.git`` (thin git runner), ``source.tree`` (upstream trees as git
  commits), ``source.queue`` (apply and export the series),
  ``source.rerere`` (recorded conflict resolutions, kept in ``rerere/``),
  ``source.probe`` (absorption probes: the ``probes.toml`` table),
  ``source.linting`` (lints as data: a checkout parsed once, named lints
  over it, the order of their messages);
- ``wheels``: ``wheels.wheel`` (overlay build, tags, label),
  ``wheels.native`` (vLLM's own build as a second backend),
  ``wheels.audit`` (built vs upstream wheel), ``wheels.build`` (the
  pipeline: pin -> patched tree -> audited wheels), ``wheels.publish`` (a
  package index beside the wheels), ``wheels.advisories`` (the security
  advisory ledger, ``advisories.toml``, held to the series), ``wheels.vex``
  (the ledger as a CycloneDX VEX document), ``wheels.osv`` (the ledger
  against OSV's records);
- ``envs``: ``envs.venv`` (CPU venvs that import a wheel),
  ``envs.deps_lock`` (``cpu-deps.lock``: the deps venv's wheels by hash),
  ``envs.installer`` (local wheel files into a venv: uv where installed,
  else pip, the same result), ``envs.engine_env`` (the engine tier's CPU
  engines), ``envs.gpu`` (the GPU test session), ``envs.contract_run``
  (the EAGLE-3 contract discovered and checked on a tree or a wheel,
  cached), ``envs.probe_run`` (absorption probes run on an unpatched
  release), ``envs.probe_report`` (their verdicts in the report, a pytest
  plugin);
- ``move`` (moving the pin): ``move.releases`` (the releases on the index,
  and the lock for one), ``move.rebase`` (the cherry-pick state machine of
  a move and of ``--check``), ``move.staircase`` (a move's report and the
  staircase over several releases, typed), ``move.verdicts`` (the
  staircase's verdict cache), ``move.ledgers`` (the ledgers brought to
  the moved series), ``move.changelog`` (a move's entry in CHANGELOG.md),
  ``move.move_check`` (a whole move from a clean clone, its result
  checked) and ``move.moved_engine`` (the moved series on a real CPU
  engine of the new release);
- ``checks``: ``checks.mutation`` (each patch taken out in turn, its probe
  must fail), ``checks.bench`` (timings), ``checks.figures`` (README's two
  commands timed in a fresh clone), ``checks.cache`` (the cache's sizes and
  pruning);
- ``checks`` also holds upstream's own tests on the patched tree:
  ``checks.peer_list`` (peer-tests.toml and peer-expected.toml, held to the
  series), ``checks.peer_env`` (the unpatched and patched venvs over the
  CPU engine's, upstream's tests/ tree, the Hub stand-ins),
  ``checks.peer_run`` (each file run on both), ``checks.peer_report``
  (regressions, what the tests that did not run need, the report),
  ``checks.peer_backports`` (backport-tests.toml: a backport's source tests),
  ``checks.peer_moved`` (the new release's tests on a moved series: the
  move check's peer step);
- ``checks.lints``: the lint composition, every lint ``vpq lint`` runs and
  ``vpq export`` checks before it writes, in order;
- on top: ``cli`` and ``__main__`` (argument parsing, error mapping).
"""

__all__ = ["VpqError"]

from vpq.core.errors import VpqError
