"""Wheels and shipping them: the overlay build, vLLM's own build, the audit,
the pipeline from pin to audited wheels, the package index, the
advisory ledger, its VEX document and its check against OSV; imports go
down to ``vpq.source``, ``vpq.contract`` (the claimed architectures a
manifest carries) and ``vpq.core``.

``wheel``, ``native``, ``audit``, ``build``, ``publish``, ``advisories``,
``vex`` and ``osv``.

This file imports none of them.
"""
