"""Tiny Kimi-K2.5 checkpoints for tests: the fixture, scripted weights with
known outputs, and the image processor module the fixture copies into a
checkpoint beside ``fixture`` (its ``auto_map`` names it by file, not by
``vpq`` path). Imports nothing of ``vpq`` outside this package.

``fixture``, ``scripted`` and ``kimi_k25_tiny_image_processor``.

This file imports none of them.
"""
