"""README is a manual that agrees with the tool: its contents list is its
headings, its quick starts name sessions that exist, its series table is
the series, and the history it points to is there."""

from __future__ import annotations

import re

from tests.conftest import REPO_ROOT

README = (REPO_ROOT / "README.md").read_text()


def _outside_fences(text: str) -> list[str]:
    out, fence = [], False
    for line in text.splitlines():
        if line.startswith("```"):
            fence = not fence
        elif not fence:
            out.append(line)
    return out


def _section(title: str) -> str:
    start = README.index(f"\n## {title}\n")
    end = README.find("\n## ", start + 1)
    return README[start : end if end != -1 else len(README)]


def test_the_contents_list_is_every_section_in_order() -> None:
    heads = [ln for ln in _outside_fences(README) if re.match(r"^#{2,3} ", ln)]
    heads = [h for h in heads if h != "## Contents"]
    listed = re.findall(r"^ *- \[(.*)\]\(#[^)]*\)$", _section("Contents"), re.M)
    assert listed == [h.split(" ", 1)[1] for h in heads]


def test_quick_starts_come_first_and_name_existing_sessions() -> None:
    order = [ln[3:] for ln in _outside_fences(README) if ln.startswith("## ")]
    assert order[1:3] == ["Quick start: operators", "Quick start: maintainers"]
    noxfile = (REPO_ROOT / "noxfile.py").read_text()
    sessions = set(re.findall(r"^def (\w+)\(session", noxfile, re.M))
    named = re.findall(r"nox -s (\w+)", _section("Quick start: maintainers"))
    assert named and set(named) <= sessions, set(named) - sessions


def test_the_series_table_lists_the_series_in_order() -> None:
    series = [
        ln.strip()
        for ln in (REPO_ROOT / "series").read_text().splitlines()
        if ln.strip() and not ln.startswith("#")
    ]
    rows = re.findall(r"^\| `([^`]+\.patch)` \|", README, re.M)
    assert rows == series


def test_troubleshooting_rows_say_cause_and_remedy_and_there_is_a_licence() -> None:
    rows = [r for r in _section("Troubleshooting").splitlines() if r.startswith("| ")][2:]
    assert len(rows) >= 10
    assert all(len(r.strip("|").split(" | ")) == 3 for r in rows), rows
    assert "Apache-2.0" in _section("Licence")


def test_the_history_readme_points_to_is_there() -> None:
    assert "docs/history.md" in README
    history = (REPO_ROOT / "docs" / "history.md").read_text()
    assert "A real move to 0.33.0" in history


def test_the_layout_table_names_every_top_level_path() -> None:
    import subprocess

    tracked = subprocess.run(
        ["git", "ls-files"], cwd=REPO_ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    tops = {p.split("/")[0] for p in tracked if p != "README.md"}
    tops |= {"/".join(p.split("/")[:2]) for p in tracked if p.startswith(("tests/", "scripts/"))}
    tops -= {"tests", "scripts", "tests/__init__.py", "tests/conftest.py"}
    table = _section("How the repository works").split("\n### ")[0]
    named = {n.rstrip("/") for n in re.findall(r"`([^`]+)`", table)}
    missing = sorted(t for t in tops if t not in named and t.rstrip("/") not in named)
    assert missing == []
