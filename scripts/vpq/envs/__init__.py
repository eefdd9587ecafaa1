"""Interpreters that import a vLLM: CPU venvs holding a wheel, the
installer, the engine tier's environments, the GPU session, and what runs
inside them (the EAGLE-3 contract check, the absorption probes and their
pytest plugin); imports go down to ``vpq.wheels`` and below.

``venv``, ``deps_lock``, ``installer``, ``engine_env``, ``gpu``, ``contract_run``,
``probe_run`` and ``probe_report``.

This file imports none of them (``noxfile.py`` imports ``vpq.envs.gpu``
before any install: keep it standard library only).
"""
