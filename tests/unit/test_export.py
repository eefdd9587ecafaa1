"""``vpq export`` says what it did to patches/ and refuses, in one message and
without writing anything, what ``vpq lint`` would reject: missing trailers,
a body without a why, a patch without a probe, a probe without a patch, a
malformed ``rerere/``; the mutation record, which only a run after the
export can make, it names as still to do."""

from __future__ import annotations

from pathlib import Path

import pytest
from vpq.checks import lints, mutation, peer_list
from vpq.source import git as g
from vpq.source import lock, probe, queue, rerere, series, tree
from vpq.wheels import build

from tests.unit.cli import assert_clean_error, run_cli, snapshot
from tests.unit.tiny_upstream import F10, NEW_F20, WHY, Upstream, _covered

F20 = "mod-f20-returns-200.patch"


def _work(root: Path, message: str | None = None) -> Path:
    """build/work with the series applied and, given ``message``, one more commit."""
    repo = build.prepare(root).repo
    if message is not None:
        (repo / "vllm/mod.py").write_text(NEW_F20)
        g.git(["commit", "-qam", message], repo)
    return repo


def _inputs(root: Path) -> dict[str, bytes]:
    snap = snapshot(root)
    if (root / probe.PROBES_FILE).is_file():
        snap[probe.PROBES_FILE] = (root / probe.PROBES_FILE).read_bytes()
    return snap


def test_a_commit_without_trailers_or_why_is_refused_in_one_round(one_patch: Upstream) -> None:
    root = one_patch.root
    _work(root, "mod: f20 returns 200\n\nJust because.\n")
    before = _inputs(root)
    proc = run_cli(root, "export")
    assert_clean_error(
        proc,
        "export refused, `nox -s lint` would reject the exported series",
        f"patches/{F20}: no valid 'Upstream-Status:' trailer",
        f"patches/{F20}: no valid 'Forwarded:' trailer",
        "the body does not say why the patch exists",
        "Fix the commit messages in build/work",
        "patches/, series and probes.toml are unchanged",
    )
    assert "and probes.toml, then" not in proc.stderr  # nothing wrong there
    assert _inputs(root) == before
    assert run_cli(root, "build", "--no-contract").returncode == 1  # the work is not exported


def test_a_new_patch_without_a_probe_is_refused_then_exported_with_one(
    one_patch: Upstream,
) -> None:
    root = one_patch.root
    (root / probe.PROBES_FILE).write_text(_covered(F10))
    _work(root, "mod: f20 returns 200\n\n" + WHY)
    before = _inputs(root)
    proc = run_cli(root, "export")
    assert_clean_error(
        proc,
        f"probes.toml: patches/{F20} has no probe",
        f'a new patch needs its table in probes.toml, e.g. ["{F20}"]',
        "Fix probes.toml, then run `nox -s export` again",
    )
    assert "commit messages" not in proc.stderr  # the commit is fine
    assert _inputs(root) == before
    (root / probe.PROBES_FILE).write_text(_covered(F10, F20))
    proc = run_cli(root, "export")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [
        f"new      patches/{F20}",
        "series: 2 patches: 1 new, 0 rewritten, 1 unchanged, 0 removed",
    ]
    assert series.read_series(root) == [F10, F20]
    assert run_cli(root, "lint").returncode == 0


def test_removing_a_patch_needs_its_probe_gone_too(one_patch: Upstream) -> None:
    root = one_patch.root
    (root / probe.PROBES_FILE).write_text(_covered(F10))
    repo = _work(root)
    g.git(["reset", "-q", "--hard", "upstream/1.0"], repo)  # drop the patch's commit
    before = _inputs(root)
    assert_clean_error(
        run_cli(root, "export"), f'probes.toml: ["{F10}"] names a patch that is not in series'
    )
    assert _inputs(root) == before
    (root / probe.PROBES_FILE).write_text("")
    proc = run_cli(root, "export")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [
        f"removed  patches/{F10}",
        "series: 0 patches: 0 new, 0 rewritten, 0 unchanged, 1 removed",
    ]
    assert not (root / "patches" / F10).exists() and series.read_series(root) == []


def test_export_names_the_patch_it_rewrote(one_patch: Upstream) -> None:
    root = one_patch.root
    repo = _work(root)
    msg = g.out(["log", "-1", "--format=%B"], repo).replace("says why.", "says why, better.")
    g.git(["commit", "-q", "--amend", "-m", msg], repo)
    proc = run_cli(root, "export")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [
        f"rewrote  patches/{F10}",
        "series: 1 patches: 0 new, 1 rewritten, 0 unchanged, 0 removed",
    ]


def test_export_refuses_what_only_the_rerere_lint_sees(one_patch: Upstream) -> None:
    """Before issue #39 export ran the series and probe lints only: it wrote
    this series, and `vpq lint` then rejected the checkout."""
    root = one_patch.root
    _work(root, "mod: f20 returns 200\n\n" + WHY)
    (root / rerere.RERERE_DIR / "not-an-id").mkdir(parents=True)
    before = _inputs(root)
    assert_clean_error(
        run_cli(root, "export"),
        "export refused, `nox -s lint` would reject the exported series: "
        "(1) rerere/not-an-id: not a rerere conflict id folder (40 hex digits). "
        "Fix rerere/, then run `nox -s export` again.",
    )
    assert _inputs(root) == before


def test_export_writes_and_names_the_mutation_records_still_to_make(one_patch: Upstream) -> None:
    """A mutation record is made from patches/ (`nox -s mutation -- --record`
    applies the exported series), so export cannot refuse for it: it writes,
    then prints what the mutation lint still says, as `vpq lint` will."""
    root = one_patch.root
    (root / probe.PROBES_FILE).write_text(_covered(F10, F20))
    (root / mutation.RECORD_FILE).write_text("")
    _work(root, "mod: f20 returns 200\n\n" + WHY)
    proc = run_cli(root, "export")
    assert proc.returncode == 0, proc.stderr
    fix = "run `nox -s mutation -- --record {}`"
    still = [
        f"mutation.toml: patches/{n} has no mutation record; {fix.format(n)}" for n in (F10, F20)
    ]
    assert proc.stdout.splitlines() == [
        f"new      patches/{F20}",
        "series: 2 patches: 1 new, 0 rewritten, 1 unchanged, 0 removed",
        *(f"still to do: {s}" for s in still),
    ]
    after = run_cli(root, "lint")
    assert after.stderr.splitlines() == [f"{root}/{s}" for s in still]


@pytest.mark.parametrize("case", ["series", "beyond-series"])
def test_lint_and_export_give_the_same_messages_in_the_same_order(
    one_patch: Upstream, case: str
) -> None:
    """The export pre-check's messages, found in memory, are those `vpq
    lint` prints once the entries are written: with the series lint failing
    (probes and rerere run beside it, the lints that need it clean do not),
    and with it clean (probes, rerere, advisories and peer-tests each fail)."""
    root = one_patch.root
    message = "mod: f20 returns 200\n\n" + (
        "Just because.\n" if case == "series" else WHY + "Advisory: GHSA-2222-3333-4444\n"
    )
    repo = _work(root, message)
    (root / rerere.RERERE_DIR / "not-an-id").mkdir(parents=True)
    (root / probe.PROBES_FILE).write_text(_covered(F10))
    if case == "series":
        (root / "patches" / "notes.txt").write_text("not a patch\n")
    else:
        (root / peer_list.PEER_FILE).write_text("")
    entries = queue.export(repo, tree.upstream_tag(lock.load(root).version), series.load(root))
    found = queue.lint_problems(root, entries, lints.LINTS)
    want = {
        "series": ["patches", "probes", "rerere"],
        "beyond-series": ["probes", "rerere", "advisories", "peer-tests"],
    }
    assert list(dict.fromkeys(f.lint.name for f in found)) == want[case]
    refused = "; ".join(f"({i}) {queue.shown(root, f.message)}" for i, f in enumerate(found, 1))
    assert_clean_error(run_cli(root, "export"), f"the exported series: {refused}")
    series.write(root, entries)
    assert run_cli(root, "lint").stderr.splitlines() == [f.message for f in found]


def test_the_docs_show_exports_report_in_the_form_it_prints() -> None:
    import re

    from tests.support.paths import REPO_ROOT

    section = (REPO_ROOT / "docs" / "adding-a-patch.md").read_text()
    sample = section.split("When it writes, it says what\nit did")[1].split("```")[1]
    new, summary, *still = sample.strip().splitlines()
    assert re.fullmatch(r"new      patches/(\S+\.patch)", new)
    assert re.fullmatch(
        r"series: \d+ patches: 1 new, 0 rewritten, \d+ unchanged, 0 removed", summary
    )
    name = new.split("patches/", 1)[1]
    fix = f"run `nox -s mutation -- --record {name}`"
    assert still == [f"still to do: mutation.toml: patches/{name} has no mutation record; {fix}"]
    assert "probes.toml" in section and "Removing a patch" in section
