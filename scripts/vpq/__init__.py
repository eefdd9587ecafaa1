"""vpq: a quilt-style patch queue over a pinned vLLM release.

One module per noun:

- inputs: ``lock`` (upstream.lock), ``series`` (series file and patch mails),
  ``fetch`` (hash-checked download cache), ``files`` (atomic writes, hashes,
  shared constants), ``supported`` (the oldest Python the tool runs on, and
  the refusal of an older one), ``compat`` (standard-library features newer
  than that oldest Python);
- trees: ``git`` (thin git runner), ``tree`` (upstream trees as git commits),
  ``queue`` (apply and export the series), ``worklock`` (one command at a
  time on a checkout), ``workspace`` (the paths under ``build/`` and
  ``dist/``);
- wheels: ``wheel`` (overlay build, tags, label), ``native`` (vLLM's own
  build as a second backend), ``audit`` (built vs upstream wheel), ``build``
  (the pipeline: pin -> patched tree -> audited wheels);
- EAGLE-3: ``contract``, a package whose modules import one way:
  ``contract.items`` (the contract's files, the one table of claimed
  architectures, items), ``contract.target`` (target-side discovery),
  ``contract.drafter`` (drafter-side discovery), ``contract.table`` (the
  verdict table), ``contract.run`` (discovers and checks it on a tree or a
  wheel, cached) and ``contract.probe`` (runs inside a vLLM venv);
  ``venv`` (CPU venvs that import a
  wheel), ``installer`` (local wheel files into a venv: uv where installed,
  else pip, the same result), ``fixture`` and ``kimi_k25_tiny_image_processor`` (the tiny
  Kimi-K2.5 checkpoint), ``scripted`` (weights with known outputs),
  ``engine_env`` (the engine tier's CPU engines), ``gpu`` (the GPU test
  session);
- shipping: ``publish`` (a package index beside the wheels), ``advisories``
  (the security advisory ledger, ``advisories.toml``, held to the series);
- moving the pin: ``releases`` (the releases on the index, and the lock
  for one), ``rebase`` (the cherry-pick state machine of a move and of
  ``--check``), ``staircase`` (a move's report and the staircase over
  several releases, typed), ``verdicts`` (the staircase's verdict cache),
  ``rerere`` (recorded conflict resolutions, kept in ``rerere/``),
  ``probe`` (absorption probes on an unpatched release),
  ``probe_report`` (their verdicts in the report), ``move_check`` (a
  whole move from a clean clone, its result checked) and ``moved_engine``
  (the moved series on a real CPU engine of the new release);
- checking the tests: ``mutation`` (each patch taken out in turn, its probe
  must fail);
- upstream's own tests on the patched tree: ``peer_list`` (peer-tests.toml
  and peer-expected.toml, held to the series), ``peer_env`` (the unpatched
  and patched venvs over the CPU engine's, upstream's tests/ tree, the Hub
  stand-ins), ``peer_run`` (each file run on both), ``peer_report``
  (regressions, what the tests that did not run need, the report),
  ``peer_backports`` (backport-tests.toml: a backport's source tests);
- the rest: ``proc`` (child processes, the probe line protocol), ``bench``
  (timings), ``progress`` (long steps' progress lines), ``cache`` (the cache's
  sizes and pruning), ``errors`` (the base exception), ``cli`` and ``__main__``
  (argument parsing, error mapping).
"""

__all__ = ["VpqError"]

from vpq.errors import VpqError
