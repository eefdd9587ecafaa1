"""advisories.toml, the security advisory ledger: each entry is checked key
by key (one message naming file, id and key), and lint holds it to the
series both ways (a carried entry's patch has its ``Advisory:`` trailer,
every trailer has its carried entry); docs/known-issues.md's table is generated from it.
Each rule has a test that breaks exactly that rule."""

from __future__ import annotations

from pathlib import Path

import pytest
import tomli_w
from vpq import cli
from vpq.move import staircase
from vpq.wheels import advisories

from tests.support.paths import REPO_ROOT
from tests.unit.tiny_upstream import Upstream

GID = "GHSA-7972-pg2x-xr59"
PATCH = "mod/change-f10.patch"
CARRIED = {
    "severity": "high",
    "summary": "hard-coded trust_remote_code",
    "impact": "code-execution",
    "affected": "< 1.1",  # the tiny upstream's pin is 1.0
    "aliases": ["CVE-2026-27893"],
    "source": ["https://osv.dev/vulnerability/GHSA-7972-pg2x-xr59"],
    "fixed-in": "1.1",
    "upstream": ["https://github.com/vllm-project/vllm/pull/36192"],
    "status": "carried",
    "patch": PATCH,
}


def _ledger(root: Path, entries: dict[str, dict[str, object]]) -> None:
    (root / advisories.LEDGER_FILE).write_bytes(tomli_w.dumps(entries).encode())


def _trailer(root: Path, gid: str = GID) -> None:
    """Add ``Advisory: gid`` to the patch's trailers."""
    path = root / "patches" / PATCH
    text = path.read_text()
    path.write_text(text.replace("Forwarded: no\n", f"Forwarded: no\nAdvisory: {gid}\n", 1))


def test_a_carried_entry_whose_patch_has_its_trailer_is_clean(one_patch: Upstream) -> None:
    _ledger(one_patch.root, {GID: CARRIED})
    _trailer(one_patch.root)
    assert advisories.lint(one_patch.root) == []
    (a,) = advisories.load(one_patch.root)
    assert (a.id, a.status, a.patch, a.fixed_in) == (GID, "carried", PATCH, "1.1")


def test_no_ledger_and_no_trailers_is_clean(one_patch: Upstream) -> None:
    assert advisories.lint(one_patch.root) == []


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"severity": "severe"}, "key 'severity' must be one of critical, high, moderate, low"),
        ({"justification": "x"}, "key 'justification' must be one of code_not_present"),
        ({"impact": "bad"}, "key 'impact' must be one of code-execution, cross-request"),
        ({"status": "fixed"}, "key 'status' must be one of carried, not-affected, open"),
        ({"source": []}, "key 'source' must be a non-empty list of URLs"),
        ({"upstream": ["not a url"]}, "key 'upstream' must be a non-empty list of URLs"),
        ({"aliases": ["2026-1"]}, "key 'aliases' must be a list of GHSA, CVE or PYSEC ids"),
        ({"affected": "before 0.18"}, "key 'affected' must be PEP 440 specifiers"),
        ({"cve": "CVE-2026-1234"}, "unknown key 'cve'"),
        ({"fixed-in": "soon"}, "key 'fixed-in' is not a release version"),
        ({"summary": ""}, "key 'summary' must be a non-empty string"),
        ({"colour": "red"}, "unknown key 'colour'"),
        ({"absent": ["setup.py"]}, "key 'absent' must be a non-empty list of 'vllm/<file>.py'"),
        ({"absent": []}, "key 'absent' must be a non-empty list"),
        (
            {"justification": "code_not_present"},
            "justification 'code_not_present' needs key 'absent'",
        ),
    ],
)
def test_a_bad_value_is_named_by_file_id_and_key(one_patch: Upstream, change, message) -> None:
    _ledger(one_patch.root, {GID: CARRIED | change})
    _trailer(one_patch.root)
    problems = advisories.lint(one_patch.root)
    assert any(p.startswith(f"{one_patch.root / 'advisories.toml'}: {GID}: ") for p in problems)
    assert any(message in p for p in problems), problems
    with pytest.raises(advisories.AdvisoryError, match=GID):
        advisories.load(one_patch.root)


def test_a_missing_key_and_a_bad_id_are_named(one_patch: Upstream) -> None:
    entry = {k: v for k, v in CARRIED.items() if k != "severity"}
    _ledger(one_patch.root, {"GHSA-nope": entry})
    problems = advisories.lint(one_patch.root)
    assert any("'GHSA-nope' is not a GHSA, CVE or PYSEC id" in p for p in problems), problems
    assert any("GHSA-nope: missing key 'severity'" in p for p in problems), problems


def test_a_ledger_that_is_not_toml_is_one_message(one_patch: Upstream) -> None:
    (one_patch.root / advisories.LEDGER_FILE).write_text('["GHSA-x"\nseverity = \n')
    (problem,) = advisories.lint(one_patch.root)
    assert "advisories.toml: not valid TOML" in problem


def test_a_carried_entry_needs_a_patch_in_series(one_patch: Upstream) -> None:
    _ledger(one_patch.root, {GID: CARRIED | {"patch": "mod/gone.patch"}})
    (problem,) = advisories.lint(one_patch.root)
    assert f"{GID}: key 'patch' names 'mod/gone.patch', which is not in series" in problem


def test_a_carried_entry_needs_the_trailer_in_its_patch(one_patch: Upstream) -> None:
    _ledger(one_patch.root, {GID: CARRIED})
    (problem,) = advisories.lint(one_patch.root)
    assert f"patches/{PATCH} has no 'Advisory: {GID}' trailer" in problem


def test_a_carried_entry_needs_a_patch_key(one_patch: Upstream) -> None:
    _ledger(one_patch.root, {GID: {k: v for k, v in CARRIED.items() if k != "patch"}})
    problems = advisories.lint(one_patch.root)
    assert any("status 'carried' needs key 'patch'" in p for p in problems), problems


def test_a_trailer_without_an_entry_is_a_problem(one_patch: Upstream) -> None:
    _trailer(one_patch.root)
    (problem,) = advisories.lint(one_patch.root)
    assert f"patches/{PATCH}: trailer 'Advisory: {GID}'" in problem and "(no entry)" in problem


def test_a_trailer_whose_entry_is_not_carried_by_that_patch_is_a_problem(
    one_patch: Upstream,
) -> None:
    _ledger(one_patch.root, {GID: CARRIED | {"status": "open", "mitigation": "a proxy"}})
    _trailer(one_patch.root)
    (problem,) = advisories.lint(one_patch.root)
    assert "wants an entry in advisories.toml with status 'carried'" in problem
    assert "status 'open'" in problem


def test_an_open_entry_needs_a_mitigation(one_patch: Upstream) -> None:
    entry = {k: v for k, v in CARRIED.items() if k != "patch"} | {"status": "open"}
    _ledger(one_patch.root, {GID: entry})
    problems = advisories.lint(one_patch.root)
    assert any("status 'open' needs key 'mitigation'" in p for p in problems), problems
    _ledger(one_patch.root, {GID: entry | {"mitigation": "put a proxy in front"}})
    assert advisories.lint(one_patch.root) == []


def test_a_not_affected_entry_needs_a_reason_and_a_check_that_exists(one_patch: Upstream) -> None:
    entry = {k: v for k, v in CARRIED.items() if k != "patch"} | {"status": "not-affected"}
    _ledger(one_patch.root, {GID: entry})
    problems = advisories.lint(one_patch.root)
    assert any("needs key 'reason'" in p for p in problems), problems
    assert any("needs key 'check'" in p for p in problems), problems
    assert any("needs key 'justification'" in p for p in problems), problems
    check = "tests/test_reason.py::test_the_reason_holds"
    reason = {"reason": "no such path", "justification": "code_not_reachable", "check": check}
    _ledger(one_patch.root, {GID: entry | reason})
    (problem,) = advisories.lint(one_patch.root)
    assert f"key 'check' names {check!r}, which is not a test in this repository" in problem
    (one_patch.root / "tests").mkdir(exist_ok=True)
    (one_patch.root / "tests/test_reason.py").write_text("def test_the_reason_holds():\n    pass\n")
    assert advisories.lint(one_patch.root) == []


def test_vpq_lint_reports_the_ledger(one_patch: Upstream, capsys) -> None:
    _ledger(one_patch.root, {GID: CARRIED})
    assert cli.main(["--root", str(one_patch.root), "lint"]) == 1
    assert f"no 'Advisory: {GID}' trailer" in capsys.readouterr().err


def _adv(status: str = "open", **more: object) -> advisories.Advisory:
    """A good entry built in code."""
    fields: dict[str, object] = {
        "id": GID, "severity": "high", "summary": "s", "impact": "code-execution",
        "affected": "< 0.18.0", "aliases": (), "source": ("https://x",), "status": status,
        "fixed_in": "0.18.0",
    }  # fmt: skip
    return advisories.Advisory(**(fields | more))  # type: ignore[arg-type]


def test_an_entry_whose_range_excludes_the_pin_is_a_problem(one_patch: Upstream) -> None:
    """The tiny upstream's pin is 1.0: a range that stops before it names no
    advisory this ledger keeps, unless upstream has the fix (fixed-upstream)."""
    entry = {k: v for k, v in CARRIED.items() if k != "patch"} | {
        "status": "open",
        "mitigation": "a proxy",
    }
    _ledger(one_patch.root, {GID: entry | {"affected": "< 0.18.0"}})
    (problem,) = advisories.lint(one_patch.root)
    assert "key 'affected' '< 0.18.0' does not include the pin, vllm 1.0" in problem
    _ledger(one_patch.root, {GID: entry | {"affected": "< 0.18.0 || >= 0.30, < 2.0"}})
    assert advisories.lint(one_patch.root) == []


def test_ids_and_cve_read_the_aliases() -> None:
    a = _adv(aliases=("CVE-2026-27893", "GHSA-2222-3333-4444"))
    assert a.cve == "CVE-2026-27893"
    assert a.ids == (GID, "CVE-2026-27893", "GHSA-2222-3333-4444")
    assert advisories.includes(a, "0.17.1") and not advisories.includes(a, "0.18.0")


def test_fixed_at_is_from_fixed_in_on() -> None:
    a = _adv()
    assert [advisories.fixed_at(a, v) for v in ("0.17.1", "0.18.0", "0.19.1")] == [
        False,
        True,
        True,
    ]
    assert not advisories.fixed_at(a.__class__(**{**a.__dict__, "fixed_in": None}), "9.0")


def test_the_staircase_shows_an_advisory_fixed_from_its_release() -> None:
    a = _adv("carried")
    (row,) = staircase.advisory_rows([a], ["0.17.2", "0.18.0", "0.19.0"])
    assert row.cells == {"0.17.2": "affected", "0.18.0": "fixed", "0.19.0": "fixed"}
    table = staircase.Staircase("0.17.1", ["0.17.2", "0.18.0"], {}, [], advisories=[row])
    assert f"| advisory {GID} (carried) | affected | fixed |" in table.render()
    assert f"- {GID} (carried here): fixed from 0.18.0, so at 0.18.0" in table.render_flags()


def test_readme_block_is_replaced_between_its_markers(tmp_path: Path) -> None:
    a = _adv(mitigation="a proxy")
    page = tmp_path / advisories.TABLE_PAGE
    page.parent.mkdir(parents=True)
    page.write_text(f"intro\n{advisories.BEGIN}\nold\n{advisories.END}\nend\n")
    assert advisories.write_readme(tmp_path, [a])
    text = page.read_text()
    assert text.startswith("intro\n") and text.endswith("\nend\n") and "old" not in text
    row = f"| [{GID}]({a.source[0]}) | high | code-execution | s | 0.18.0 | "
    assert row in text and "1 advisories: 0 carried, 0 not affected, 1 open" in text
    assert not advisories.write_readme(tmp_path, [a])
    page.write_text("no markers\n")
    with pytest.raises(advisories.AdvisoryError, match="wants one line"):
        advisories.write_readme(tmp_path, [a])


def test_readme_table_is_the_one_generated_from_the_ledger() -> None:
    """The docs' advisory table equals ``python -m vpq advisories --markdown``'s."""
    readme = (REPO_ROOT / advisories.TABLE_PAGE).read_text()
    block = advisories.readme_block(advisories.load(REPO_ROOT))
    stale = f"{advisories.TABLE_PAGE}'s table is stale: run python -m vpq advisories --markdown"
    assert block in readme, stale


def test_the_repository_ledger_passes_its_lint() -> None:
    assert advisories.lint(REPO_ROOT) == []


def test_rebase_check_shows_an_advisory_fixed_at_the_checked_release(
    one_patch: Upstream, monkeypatch, capsys
) -> None:
    """``rebase --check 1.1`` reads the ledger: an advisory fixed in 1.1
    shows as fixed there, one still open at 1.1 does not."""
    from vpq.move import rebase
    from vpq.source import series

    fixed, later = "GHSA-2222-3333-4444", "GHSA-5555-6666-7777"
    entry = {k: v for k, v in CARRIED.items() if k != "patch"} | {
        "status": "open",
        "mitigation": "a proxy",
    }
    _ledger(
        one_patch.root, {fixed: entry | {"fixed-in": "1.1"}, later: entry | {"fixed-in": "2.0"}}
    )
    (patch,) = series.load(one_patch.root)
    rep = staircase.Report("1.0", "1.1", [staircase.Outcome(patch.name, "clean", "applies as is")],
                        checked=True)  # fmt: skip
    monkeypatch.setattr(rebase, "check", lambda root, versions, source, on_report, use_cache: [rep])
    assert cli.main(["--root", str(one_patch.root), "rebase", "--check", "1.1"]) == 0
    out = capsys.readouterr().out
    assert "The patch headers agree with this release." in out
    assert f"- {fixed} (open here): fixed from 1.1, so at 1.1" in out
    assert later not in out


def test_an_id_named_by_two_entries_is_one_problem(one_patch: Upstream) -> None:
    """The same bug in two entries (one's id is the other's alias) would be
    two rows of the table and two VEX statements about one advisory."""
    twin = CARRIED | {"aliases": [GID], "status": "open", "mitigation": "m"}
    del twin["patch"]
    _ledger(one_patch.root, {GID: CARRIED, "GHSA-2222-3333-4444": twin})
    _trailer(one_patch.root)
    problems = advisories.lint(one_patch.root)
    assert any(
        f"{GID} is named by GHSA-7972-pg2x-xr59 and GHSA-2222-3333-4444" in p for p in problems
    ), problems
