"""``vpq osv``: the ledger against OSV's vllm records, served on 127.0.0.1
from tests/data/osv/query-vllm.json (two pages, OSV's v1 query shape): each
way the two can disagree is named once, records of one bug in two databases
are judged once, and without a network the command says so in one line."""

from __future__ import annotations

import copy
import http.server
import json
import shutil
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import tomli_w
from vpq.wheels import advisories, osv

from tests.support.paths import REPO_ROOT
from tests.unit.cli import run_cli

RECORDED = json.loads((REPO_ROOT / "tests/data/osv/query-vllm.json").read_text())["pages"]
ENTRY = {
    "severity": "high",
    "summary": "hard-coded trust_remote_code",
    "impact": "code-execution",
    "affected": ">= 0.10.1, < 0.18.0",
    "aliases": ["CVE-2026-27893", "PYSEC-2026-2297"],
    "source": ["https://osv.dev/vulnerability/GHSA-7972-pg2x-xr59"],
    "status": "open",
    "mitigation": "m",
}
N_ENTRY = {
    **ENTRY,
    "severity": "moderate",
    "impact": "dos",
    "affected": ">= 0.1.0, < 0.19.0",
    "aliases": ["CVE-2026-34756"],
}


class Served:
    """The recorded pages on 127.0.0.1, and the bodies OSV was asked."""

    def __init__(self, pages: list[dict[str, Any]]) -> None:
        self.pages = pages
        self.asked: list[dict[str, Any]] = []
        self.url = ""


@pytest.fixture
def served() -> Iterator[Served]:
    box = Served(copy.deepcopy(RECORDED))

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 (http.server's name)
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            box.asked.append(body)
            page = box.pages[1] if body.get("page_token") == "page-2" else box.pages[0]
            data = json.dumps(page).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    box.url = f"http://127.0.0.1:{server.server_address[1]}/v1/query"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield box
    server.shutdown()
    server.server_close()


def _root(tmp_path: Path, entries: dict[str, dict[str, object]]) -> Path:
    """A repository with the real pin (0.17.1), no patches and ``entries`` as its ledger."""
    shutil.copy(REPO_ROOT / "upstream.lock", tmp_path / "upstream.lock")
    (tmp_path / "series").write_text("")
    (tmp_path / advisories.LEDGER_FILE).write_bytes(tomli_w.dumps(entries).encode())
    return tmp_path


def test_a_ledger_that_matches_osv_is_clean_and_both_pages_are_read(
    served: Served, tmp_path: Path
) -> None:
    root = _root(tmp_path, {"GHSA-7972-pg2x-xr59": ENTRY, "GHSA-3mwp-wvh9-7528": N_ENTRY})
    proc = run_cli(root, "osv", "--url", served.url)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "OSV: 3 advisories for vllm, 2 covering 0.17.1; the ledger holds 2; 0 to settle" in (
        proc.stdout
    )
    assert served.asked == [
        {"package": {"name": "vllm", "ecosystem": "PyPI"}},
        {"package": {"name": "vllm", "ecosystem": "PyPI"}, "page_token": "page-2"},
    ]


def test_an_advisory_covering_the_pin_that_the_ledger_lacks_is_named(
    served: Served, tmp_path: Path
) -> None:
    """GHSA-3mwp covers 0.17.1 and is missing; GHSA-2pc9 (< 0.14.0) does not and is not named."""
    root = _root(tmp_path, {"GHSA-7972-pg2x-xr59": ENTRY})
    proc = run_cli(root, "osv", "--url", served.url)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("advisories.toml:")]
    assert lines == [
        "advisories.toml: GHSA-3mwp-wvh9-7528: missing: >= 0.1.0, < 0.19.0 (moderate): "
        "vLLM: unbounded n parameter in OpenAI API server leads to DoS"
    ]


def test_a_range_severity_or_alias_that_changed_is_named(served: Served, tmp_path: Path) -> None:
    ghsa = served.pages[0]["vulns"][0]
    ghsa["database_specific"]["severity"] = "CRITICAL"
    ghsa["affected"][0]["ranges"][0]["events"][1] = {"fixed": "0.18.1"}
    ghsa["aliases"].append("CVE-2026-99999")
    root = _root(tmp_path, {"GHSA-7972-pg2x-xr59": ENTRY, "GHSA-3mwp-wvh9-7528": N_ENTRY})
    proc = run_cli(root, "osv", "--url", served.url)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    got = {ln.split(": ")[2] for ln in proc.stdout.splitlines() if ln.startswith("advisories.toml")}
    assert got == {"range", "severity", "aliases"}
    assert "ledger '>= 0.10.1, < 0.18.0', OSV '>= 0.10.1, < 0.18.1'" in proc.stdout
    assert "ledger high, OSV critical" in proc.stdout and "lacks CVE-2026-99999" in proc.stdout


def test_records_of_one_bug_in_two_databases_are_one_advisory_named_by_its_ghsa() -> None:
    found = osv.records(RECORDED[0]["vulns"], "vllm")
    (rec,) = found
    assert rec.id == "GHSA-7972-pg2x-xr59"
    assert rec.aliases == ("CVE-2026-27893", "PYSEC-2026-2297")
    assert (rec.affected, rec.severity) == (">= 0.10.1, < 0.18.0", "high")


@pytest.mark.parametrize(
    ("events", "text"),
    [
        ([{"introduced": "0"}, {"fixed": "0.18.0"}], "< 0.18.0"),
        ([{"introduced": "0.5"}, {"last_affected": "0.17.1"}], ">= 0.5, <= 0.17.1"),
        ([{"introduced": "0.5"}], ">= 0.5"),
        (
            [{"introduced": "0.5"}, {"fixed": "0.6"}, {"introduced": "0.8"}, {"fixed": "0.9"}],
            ">= 0.5, < 0.6 || >= 0.8, < 0.9",
        ),
    ],
)
def test_osv_events_read_as_the_ledgers_ranges(events: list[dict[str, str]], text: str) -> None:
    raw = {"affected": [{"package": {"ecosystem": "PyPI", "name": "vllm"}, "ranges": [
        {"type": "ECOSYSTEM", "events": events}]}]}  # fmt: skip
    assert osv._affected(raw, "vllm") == text
    assert advisories.ranges(text) is not None


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_without_a_network_one_line_and_exit_zero_unless_asked(tmp_path: Path) -> None:
    root = _root(tmp_path, {"GHSA-7972-pg2x-xr59": ENTRY})
    url = f"http://127.0.0.1:{_closed_port()}/v1/query"
    proc = run_cli(root, "osv", "--url", url)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stderr.count("\n") == 1 and "could not be reached" in proc.stderr
    assert "not checked" in proc.stderr and "Traceback" not in proc.stderr
    proc = run_cli(root, "osv", "--url", url, "--require-network")
    assert proc.returncode == 1 and "could not be reached" in proc.stderr


def test_an_answer_that_is_not_osvs_gives_one_paragraph(served: Served, tmp_path: Path) -> None:
    served.pages[0] = {"vulns": "nope"}  # type: ignore[dict-item]
    root = _root(tmp_path, {"GHSA-7972-pg2x-xr59": ENTRY})
    proc = run_cli(root, "osv", "--url", served.url)
    assert proc.returncode == 1 and proc.stderr.startswith("error: ")
    assert "'vulns' is not a list" in proc.stderr and "Traceback" not in proc.stderr
