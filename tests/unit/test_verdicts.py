"""The staircase's verdict cache (``vpq.move.verdicts``): an unchanged
``--check`` is answered from the cache; a changed patch replays the series
but keeps the target's judgement (contract and probes); changed probe code
(the probes' tests, or the shared tests/support) judges the target again;
``--no-cache`` recomputes everything.

The tiny upstream (tests/unit/tiny_upstream.py) has one patch with a probe
(a real pytest file in the queue's ``tests/``) and a release 1.1 that has
the patch's behaviour, so the probe absorbs it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest
from vpq.checks import cache
from vpq.envs import probe_run
from vpq.move import rebase, verdicts
from vpq.move.staircase import Report
from vpq.source import fetch, probe, series

from tests.unit.tiny_upstream import MOD, Upstream, publish

PATCH = "mod/change-f10.patch"
PROBE_FILE = "tests/probes/test_f10.py"


@pytest.fixture
def probed(one_patch: Upstream, monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """Release 1.1 with f10 returning 100 elsewhere in the file, the
    patch's probe, and a count of the probe runs and the replays."""
    publish(one_patch, {"1.1": MOD + "def f10():\n    return 100\n"}, monkeypatch)
    test = one_patch.root / PROBE_FILE
    test.parent.mkdir(parents=True)
    test.write_text("from vllm import mod\n\n\ndef test_f10():\n    assert mod.f10() == 100\n")
    (one_patch.root / probe.PROBES_FILE).write_text(
        f'["{PATCH}"]\ntests = ["{PROBE_FILE}::test_f10"]\n'
    )
    calls: Counter[str] = Counter()

    def counted(name: str, real: Callable[..., object]) -> Callable[..., object]:
        def call(*args: object, **kwargs: object) -> object:
            calls[name] += 1
            return real(*args, **kwargs)

        return call

    monkeypatch.setattr(probe_run, "run", counted("probe runs", probe_run.run))
    monkeypatch.setattr(rebase, "_begin", counted("replays", rebase._begin))
    return calls


def check(root: Path, *, use_cache: bool = True) -> Report:
    (report,) = rebase.check(root, ["1.1"], use_cache=use_cache)
    assert report.error == "" and [o.status for o in report.outcomes] == ["absorbed"]
    return report


def test_an_unchanged_check_is_answered_from_the_cache(
    one_patch: Upstream, probed: Counter[str]
) -> None:
    first = check(one_patch.root)
    assert not first.cached and probed == {"probe runs": 1, "replays": 1}
    again = check(one_patch.root)
    assert again.cached and probed == {"probe runs": 1, "replays": 1}
    assert again.outcomes == first.outcomes and again.used == first.used
    parts = Counter(e.part for e in cache.scan(fetch.cache_dir()))
    assert parts["staircase verdicts"] == 2  # the judgement and the report


def test_a_changed_patch_byte_replays_the_series_but_keeps_the_judgement(
    one_patch: Upstream, probed: Counter[str]
) -> None:
    check(one_patch.root)
    path = one_patch.root / series.PATCHES_DIR / PATCH
    path.write_bytes(path.read_bytes().replace(b"this line says why", b"this line says why!"))
    assert series.lint(one_patch.root) == []
    changed = check(one_patch.root)
    assert not changed.cached and probed == {"probe runs": 1, "replays": 2}
    assert check(one_patch.root).cached and probed["replays"] == 2


def test_changed_probe_code_judges_the_target_again(
    one_patch: Upstream, probed: Counter[str]
) -> None:
    check(one_patch.root)
    with (one_patch.root / PROBE_FILE).open("a") as fh:
        fh.write("# the probe's code changed\n")
    changed = check(one_patch.root)
    assert not changed.cached and probed == {"probe runs": 2, "replays": 2}


def test_changed_shared_test_support_code_changes_the_judgements_key(
    one_patch: Upstream, probed: Counter[str]
) -> None:
    """tests/support is the test code every tier may import, probes' tests
    included: a change there is a change of the probe code."""
    support = one_patch.root / "tests" / "support" / "helpers.py"
    support.parent.mkdir(parents=True)
    support.write_text("ANSWER = 100\n")
    before = verdicts.probe_code(one_patch.root)
    support.write_text("ANSWER = 101\n")
    assert verdicts.probe_code(one_patch.root) != before


def test_no_cache_recomputes_and_refreshes(one_patch: Upstream, probed: Counter[str]) -> None:
    check(one_patch.root)
    fresh = check(one_patch.root, use_cache=False)
    assert not fresh.cached and probed == {"probe runs": 2, "replays": 2}
    assert check(one_patch.root).cached and probed["replays"] == 2
