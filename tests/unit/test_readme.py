"""README and the manual in docs/ agree with the tool: README is a front
page whose contents list is its headings and whose quick starts name
sessions that exist; each docs page's contents list is its headings; every
relative link resolves to a file and heading that exist; docs/README.md
lists every page; the series table is the series; the command table is the
noxfile's; the changelog names every patch and the pin; the history README
points to is there."""

from __future__ import annotations

import re
import subprocess

from tests.support.paths import REPO_ROOT

README = (REPO_ROOT / "README.md").read_text()
DOCS = REPO_ROOT / "docs"
#: Every page held to these rules: the front page, the changelog, the manual.
PAGES = [REPO_ROOT / "README.md", REPO_ROOT / "CHANGELOG.md", *sorted(DOCS.glob("*.md"))]
NOXFILE = (REPO_ROOT / "noxfile.py").read_text()
SESSIONS = set(re.findall(r"^@nox\.session.*\ndef (\w+)\(session", NOXFILE, re.M))


def _outside_fences(text: str) -> list[str]:
    out, fence = [], False
    for line in text.splitlines():
        if line.startswith("```"):
            fence = not fence
        elif not fence:
            out.append(line)
    return out


def _section(title: str, text: str = README) -> str:
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else len(text)]


def _headings(text: str) -> list[str]:
    """The ``##`` and ``###`` headings outside code blocks, with their marks."""
    return [ln for ln in _outside_fences(text) if re.match(r"^#{2,3} ", ln)]


def slug(heading: str) -> str:
    """GitHub's anchor for a heading's text."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(text: str) -> set[str]:
    """Every anchor GitHub makes for the page's headings (repeats get ``-1``, ...)."""
    seen: dict[str, int] = {}
    out = set()
    for ln in _outside_fences(text):
        if re.match(r"^#{1,6} ", ln):
            base = slug(ln.split(" ", 1)[1])
            n = seen.get(base, 0)
            seen[base] = n + 1
            out.add(base if n == 0 else f"{base}-{n}")
    return out


def _contents_is_headings(text: str) -> None:
    heads = [h for h in _headings(text) if h != "## Contents"]
    listed = re.findall(r"^( *)- \[(.*)\]\(#([^)]*)\)$", _section("Contents", text), re.M)
    assert [(len(i) // 2 + 2, t) for i, t, _ in listed] == [
        (len(h.split(" ")[0]), h.split(" ", 1)[1]) for h in heads
    ]
    assert [a for _, _, a in listed] == [slug(h.split(" ", 1)[1]) for h in heads]


def test_the_contents_list_is_every_section_in_order() -> None:
    _contents_is_headings(README)


def test_each_docs_page_s_contents_list_is_its_headings() -> None:
    with_contents = [p for p in DOCS.glob("*.md") if "\n## Contents\n" in p.read_text()]
    assert len(with_contents) >= 2
    for page in with_contents:
        _contents_is_headings(page.read_text())


def test_readme_is_a_front_page() -> None:
    assert 150 <= len(README.splitlines()) <= 250


def test_quick_starts_come_first_and_name_existing_sessions() -> None:
    order = [ln[3:] for ln in _outside_fences(README) if ln.startswith("## ")]
    assert order[1:3] == ["Quick start: operators", "Quick start: maintainers"]
    named = re.findall(r"nox -s (\w+)", _section("Quick start: maintainers"))
    assert named and set(named) <= SESSIONS, set(named) - SESSIONS


def test_every_session_the_pages_name_exists() -> None:
    for page in PAGES:
        if page.name == "history.md":  # measurements of their time
            continue
        named = set(re.findall(r"nox -s (\w+)", page.read_text()))
        assert named <= SESSIONS, (page.name, named - SESSIONS)


def test_every_relative_link_resolves_to_a_file_and_heading() -> None:
    bad = []
    for page in PAGES:
        text = "\n".join(_outside_fences(page.read_text()))
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"^[a-z]+:", target):
                continue
            path, _, anchor = target.partition("#")
            dest = (page.parent / path).resolve() if path else page
            if not dest.exists():
                bad.append(f"{page.name}: {target}: no such file")
            elif anchor and (dest.suffix != ".md" or anchor not in anchors(dest.read_text())):
                bad.append(f"{page.name}: {target}: no such heading")
    assert bad == []


def test_the_docs_index_lists_every_page_and_readme_links_it() -> None:
    index = (DOCS / "README.md").read_text()
    linked = set(re.findall(r"\]\(([\w.-]+\.md)\)", index))
    pages = {p.name for p in DOCS.glob("*.md")} - {"README.md"}
    assert pages == linked, pages ^ linked
    assert "](docs/README.md)" in README
    for page in pages:
        assert f"](docs/{page})" in README, page


def test_the_series_table_lists_the_series_in_order() -> None:
    rows = re.findall(r"^\| `([^`]+\.patch)` \|", (DOCS / "repository.md").read_text(), re.M)
    assert rows == _series()


def _series() -> list[str]:
    return [
        ln.strip()
        for ln in (REPO_ROOT / "series").read_text().splitlines()
        if ln.strip() and not ln.startswith("#")
    ]


def test_troubleshooting_rows_say_cause_and_remedy_and_there_is_a_licence() -> None:
    page = (DOCS / "troubleshooting.md").read_text()
    rows = [r for r in page.splitlines() if r.startswith("| ")][2:]
    assert len(rows) >= 10
    assert all(len(r.strip("|").split(" | ")) == 3 for r in rows), rows
    assert "Apache-2.0" in _section("Licence")


def test_the_history_readme_points_to_is_there() -> None:
    assert "docs/history.md" in README
    history = (DOCS / "history.md").read_text()
    assert "A real move to 0.33.0" in history


def test_the_layout_table_names_every_top_level_path() -> None:
    tracked = subprocess.run(
        ["git", "ls-files"], cwd=REPO_ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    tops = {p.split("/")[0] for p in tracked if p != "README.md"}
    tops |= {"/".join(p.split("/")[:2]) for p in tracked if p.startswith(("tests/", "scripts/"))}
    tops -= {"tests", "scripts", "tests/__init__.py", "tests/conftest.py"}
    table = _section("The repository at a glance")
    named = {n.rstrip("/") for n in re.findall(r"`([^`]+)`", table)}
    missing = sorted(t for t in tops if t not in named and t.rstrip("/") not in named)
    assert missing == []


def _runs(session: str) -> list[str]:
    """The ``python -m MODULE [VERB]`` commands a nox session runs."""
    body = NOXFILE.split(f"def {session}(session", 1)[1].split("\n@nox.session", 1)[0]
    out = [f"python -m vpq {v}" for v in re.findall(r'_vpq\(session, "([\w-]+)"', body)]
    for module, rest in re.findall(r'"python", "-m", "([\w.]+)"((?:, "[\w-]+")?)', body):
        verb = rest.split('"')[1] if module == "vpq" and rest else ""
        out.append(f"python -m {module} {verb}".strip())
    for notified in re.findall(r'session\.notify\("(\w+)"', body):
        out += _runs(notified)
    return out


def test_the_command_table_is_the_noxfile_s() -> None:
    """Each session has one row, and its ``runs`` column names what it runs."""
    page = (DOCS / "commands.md").read_text()
    rows = dict(re.findall(r"^\| (?:\*\*)?`(\w+)`(?:\*\*)? \| (.*?) \|", page, re.M))
    assert set(rows) == SESSIONS, set(rows) ^ SESSIONS
    for session in SESSIONS:
        runs = _runs(session)
        assert runs, session
        for command in runs:
            assert re.search(rf"`{re.escape(command)}[ `]", rows[session]), (session, command)


def test_the_command_pages_name_every_verb_of_the_cli() -> None:
    from vpq import cli

    sub = next(a for a in cli.parser()._actions if a.dest == "cmd")
    page = (DOCS / "commands.md").read_text()
    verbs = set(sub.choices)  # type: ignore[arg-type]
    assert verbs and all(f"`python -m vpq {v}`" in page for v in verbs), verbs


def test_the_changelog_names_every_patch_and_the_pin() -> None:
    log = (REPO_ROOT / "CHANGELOG.md").read_text()
    added = re.findall(r"^- Added \(`[0-9a-f]{7,}`\): `([^`]+\.patch)`", log, re.M)
    dropped = re.findall(r"^- Dropped \(`[0-9a-f]{7,}`\): `([^`]+\.patch)`", log, re.M)
    assert set(_series()) <= set(added), set(_series()) - set(added)
    assert set(added) - set(_series()) == set(dropped)
    version = re.search(r'^version = "([^"]+)"', (REPO_ROOT / "upstream.lock").read_text(), re.M)
    assert version and f"pinned to vLLM **{version.group(1)}**" in log


def test_the_pages_are_all_under_docs_or_the_top() -> None:
    """No stray manual pages: every tracked Markdown file is README, the
    changelog or a docs page."""
    tracked = subprocess.run(
        ["git", "ls-files", "*.md"], cwd=REPO_ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    assert {p for p in tracked if not p.startswith("docs/")} <= {"README.md", "CHANGELOG.md"}
