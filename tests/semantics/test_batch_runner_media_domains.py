"""The batch runner keeps to ``--allowed-media-domains`` (GHSA-pf3h-qjgv-vcpr).

``entrypoints/openai/run_batch-check-file_url-against-allowed-media-domains.patch``
(vllm PR #38482, in 0.20.0): ``vllm run-batch`` fetched a transcription or
translation request's ``file_url`` with aiohttp, checking neither
``--allowed-media-domains`` (which the online server's ``MediaConnector``
applies) nor ``VLLM_MEDIA_URL_ALLOW_REDIRECTS``: whoever writes the batch
file makes the host request any URL (SSRF). The test builds the runner's
endpoint registry with ``allowed_media_domains`` set (the serving objects
stubbed: ``init_app_state`` needs an engine) and points a request at an HTTP
server it opens on 127.0.0.1, counting the hits: there must be none.
"""

from __future__ import annotations

import asyncio
import threading
from argparse import Namespace
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import SimpleNamespace
from typing import Any

import pytest

try:  # the batch runner moved to entrypoints/launchers after 0.23.0
    from vllm.entrypoints.launchers import run_batch
except ImportError:
    from vllm.entrypoints.openai import run_batch


class _Counting(BaseHTTPRequestHandler):
    hits = 0

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        type(self).hits += 1
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"RIFF")

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def internal_url() -> Iterator[tuple[str, type[_Counting]]]:
    """An internal service on 127.0.0.1 that must not be contacted."""
    handler = type("Handler", (_Counting,), {"hits": 0})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/latest/meta-data", handler
    finally:
        server.shutdown()
        thread.join(timeout=10)
        server.server_close()


def _transcription_wrapper(monkeypatch: pytest.MonkeyPatch, domains: list[str]) -> Any:
    calls: list[Any] = []

    async def handler(audio: bytes, request: Any) -> str:
        calls.append(audio)
        return "transcribed"

    async def init_app_state(engine_client, state, args, supported_tasks) -> None:  # type: ignore[no-untyped-def]
        state.openai_serving_transcription = SimpleNamespace(create_transcription=handler)

    async def supported() -> tuple[str, ...]:
        return ("generate", "transcription")

    monkeypatch.setattr(run_batch, "init_app_state", init_app_state)
    client = SimpleNamespace(get_supported_tasks=supported)
    args = Namespace(allowed_media_domains=domains)
    registry = asyncio.run(run_batch.build_endpoint_registry(client, args))  # type: ignore[arg-type]
    entry = registry["transcriptions"]
    return entry["wrapper_fn"](entry["handler_getter"]())


def test_a_batch_file_url_outside_the_allowed_domains_is_not_fetched(
    monkeypatch: pytest.MonkeyPatch, internal_url: tuple[str, type[_Counting]]
) -> None:
    url, server = internal_url
    if not hasattr(run_batch, "build_endpoint_registry"):
        # Later releases fetch through download_bytes_from_url's own check.
        with pytest.raises(Exception, match="allowed domains"):  # VLLMValidationError
            asyncio.run(run_batch.download_bytes_from_url(url, ["media.example.com"]))
        assert server.hits == 0
        return
    wrapped = _transcription_wrapper(monkeypatch, ["media.example.com"])
    body = run_batch.BatchTranscriptionRequest(file_url=url)
    out = asyncio.run(asyncio.wait_for(wrapped(body), timeout=30))
    assert server.hits == 0, f"the batch runner fetched {url} ({server.hits} hits): {out}"
    assert "allowed domains" in str(out), out
    # A data: URL is not subject to the list and still reaches the handler.
    data = run_batch.BatchTranscriptionRequest(file_url="data:audio/wav;base64,UklGRg==")
    assert asyncio.run(asyncio.wait_for(wrapped(data), timeout=30)) == "transcribed"
