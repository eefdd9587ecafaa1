"""Download cache: hash checks and offline behaviour, against a local index
served on loopback (PEP 691 JSON), never a real registry."""

from __future__ import annotations

import hashlib
import http.server
import json
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from vpq.source import fetch

PAYLOAD = b"release bytes\n"
GOOD_SHA = hashlib.sha256(PAYLOAD).hexdigest()


@pytest.fixture
def index(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path == "/simple/demo/":
                body = json.dumps(
                    {
                        "meta": {"api-version": "1.0"},
                        "name": "demo",
                        "files": [
                            {
                                "filename": "demo-1.0.tar.gz",
                                "url": "/files/demo-1.0.tar.gz",
                                "hashes": {"sha256": GOOD_SHA},
                            }
                        ],
                        "versions": ["1.0"],
                    }
                ).encode()
                ctype = "application/vnd.pypi.simple.v1+json"
            elif self.path == "/files/demo-1.0.tar.gz":
                body, ctype = PAYLOAD, "application/octet-stream"
            else:
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    monkeypatch.setenv("VPQ_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("VPQ_INDEX_URL", f"http://127.0.0.1:{server.server_port}/simple/")
    try:
        yield f"http://127.0.0.1:{server.server_port}/simple/"
    finally:
        server.shutdown()


def test_download_is_verified_and_cached_for_offline_use(
    index: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = fetch.fetch("demo", "demo-1.0.tar.gz", GOOD_SHA)
    assert path.read_bytes() == PAYLOAD
    # Second fetch with no reachable index: served from the cache.
    monkeypatch.setenv("VPQ_INDEX_URL", "http://127.0.0.1:9/simple/")
    assert fetch.fetch("demo", "demo-1.0.tar.gz", GOOD_SHA) == path


def test_hash_mismatch_names_file_expected_and_actual(index: str) -> None:
    wrong = "0" * 64
    with pytest.raises(fetch.FetchError) as exc:
        fetch.fetch("demo", "demo-1.0.tar.gz", wrong)
    msg = str(exc.value)
    assert "demo-1.0.tar.gz" in msg and wrong in msg and GOOD_SHA in msg
    assert not fetch.cached_path("demo-1.0.tar.gz", wrong).exists()


def test_cold_cache_without_network_is_a_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VPQ_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("VPQ_INDEX_URL", "http://127.0.0.1:9/simple/")
    with pytest.raises(
        fetch.FetchError,
        match=r"demo-1.0.tar.gz is not in the download cache .* cannot be downloaded",
    ):
        fetch.fetch("demo", "demo-1.0.tar.gz", GOOD_SHA)


def test_corrupted_cache_entry_is_detected_and_removed(index: str) -> None:
    path = fetch.fetch("demo", "demo-1.0.tar.gz", GOOD_SHA)
    path.write_bytes(b"bit rot")
    with pytest.raises(fetch.FetchError, match="corrupt"):
        fetch.fetch("demo", "demo-1.0.tar.gz", GOOD_SHA)
    assert fetch.fetch("demo", "demo-1.0.tar.gz", GOOD_SHA).read_bytes() == PAYLOAD


def test_file_missing_from_index_names_it(index: str) -> None:
    with pytest.raises(
        fetch.FetchError, match="demo-2.0.tar.gz: the package index lists no such file"
    ):
        fetch.fetch("demo", "demo-2.0.tar.gz", GOOD_SHA)


def test_a_download_says_how_much_arrived(index: str, capsys: pytest.CaptureFixture[str]) -> None:
    fetch.fetch("demo", "demo-1.0.tar.gz", GOOD_SHA)
    assert capsys.readouterr().err.splitlines() == [
        "downloading demo-1.0.tar.gz: 0 B of 14 B (0%)",
        "downloading demo-1.0.tar.gz: 14 B of 14 B (100%)",
    ]
    fetch.fetch("demo", "demo-1.0.tar.gz", GOOD_SHA)  # a cache hit says nothing
    assert capsys.readouterr().err == ""


def test_the_index_is_vpqs_then_pips_then_pypis(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import subprocess

    from vpq.source import fetch

    monkeypatch.setattr(
        subprocess, "run", lambda *a, **k: subprocess.CompletedProcess(a, 1, "", "")
    )
    monkeypatch.delenv("VPQ_INDEX_URL", raising=False)
    monkeypatch.delenv("PIP_INDEX_URL", raising=False)
    assert fetch.index_url() == "https://pypi.org/simple/"
    monkeypatch.setenv("PIP_INDEX_URL", "https://mirror.example/simple")
    assert fetch.index_url() == "https://mirror.example/simple/"
    monkeypatch.setenv("VPQ_INDEX_URL", "file:///srv/index/")
    assert fetch.index_url() == "file:///srv/index/"


def test_a_download_cut_off_earlier_leaves_no_part_file_behind(index: str) -> None:
    """``vpq build`` prefetches the release wheels in a daemon thread; a
    command that fails first exits mid-download, leaving a ``.part`` file.
    The next download of that file removes it."""
    folder = fetch.cached_path("demo-1.0.tar.gz", GOOD_SHA).parent
    folder.mkdir(parents=True)
    (folder / "tmpcutoff.part").write_bytes(b"half")
    path = fetch.fetch("demo", "demo-1.0.tar.gz", GOOD_SHA)
    assert path.read_bytes() == PAYLOAD
    assert sorted(p.name for p in folder.iterdir()) == ["demo-1.0.tar.gz", "demo-1.0.tar.gz.lock"]
