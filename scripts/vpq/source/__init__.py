"""The patch queue's sources: the pin, the series, and the upstream trees
they make, as git commits; imports go down to ``vpq.core`` only.

``lock`` (upstream.lock), ``series`` (series file and patch mails),
``fetch`` (hash-checked download cache), ``git`` (thin git runner),
``tree`` (upstream trees as git commits), ``queue`` (apply and export the
series), ``rerere`` (recorded conflict resolutions), ``probe`` (the
``probes.toml`` table; running probes is ``vpq.envs.probe_run``) and
``linting`` (lints as data; which lints there are is ``vpq.checks.lints``).

This file imports none of them.
"""
