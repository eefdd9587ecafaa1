"""A crafted ``Host`` header does not skip the API key (GHSA-94f4-hr76-p5j6).

``entrypoints/openai/server_utils-authenticate-the-routed-path-not-the-Host-header.patch``
(vllm PR #43426, in 0.22.0): 0.17.1's ``AuthenticationMiddleware`` decided
whether a request needs the key from ``URL(scope=scope).path``, a URL
rebuilt from the client's ``Host`` header, while the router dispatches on
``scope["path"]``. ``Host: localhost/health?`` makes the rebuilt path
``/health``: the key is skipped and ``/v1/...`` is served. The middleware
runs here as plain ASGI around a stand-in app, no server.

Starlette 1.0.1 (CVE-2026-48710) stopped taking a path from ``Host`` in
``URL(scope=...)``, and the deps venv has a newer Starlette, so the bypass
needs the Starlette that 0.17.1's requirements still allow (``fastapi >=
0.115`` admits Starlette 0.x): ``OldStarletteURL`` is Starlette 0.x's rule
(``f"{scheme}://{host}{path}"``, then parsed), put where
``server_utils`` looks ``URL`` up. The patched module no longer uses ``URL``.
"""

from __future__ import annotations

import asyncio
import importlib
from typing import Any
from urllib.parse import urlsplit

import pytest

pytest.importorskip("starlette")


def _middleware_module() -> Any:
    """Where ``AuthenticationMiddleware`` lives: ``entrypoints/openai/server_utils``
    through 0.22.0, ``serve/utils/server_utils`` in 0.23.0,
    ``serve/middleware/authenticate`` later (the probes run on those too)."""
    for name in (
        "vllm.entrypoints.openai.server_utils",
        "vllm.entrypoints.serve.utils.server_utils",
        "vllm.entrypoints.serve.middleware.authenticate",
    ):
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        if hasattr(module, "AuthenticationMiddleware"):
            return module
    raise AssertionError("no vLLM module defines AuthenticationMiddleware")


server_utils = _middleware_module()

KEY = "sk-test-key"


class OldStarletteURL:
    """``starlette.datastructures.URL(scope=...)`` as Starlette 0.x built it:
    the ``Host`` header pasted in front of the path, then parsed."""

    def __init__(self, scope: dict[str, Any]) -> None:
        host = dict(scope["headers"]).get(b"host", b"").decode("latin-1")
        self.path = urlsplit(f"{scope['scheme']}://{host}{scope['path']}").path


@pytest.fixture(autouse=True)
def old_starlette_url(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(server_utils, "URL", OldStarletteURL, raising=False)


def _status(path: str, headers: dict[str, str]) -> int:
    """The status the middleware (around an app that answers 200) gives."""
    sent: list[dict[str, Any]] = []

    async def app(scope, receive, send) -> None:  # type: ignore[no-untyped-def]
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"{}"})

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "method": "GET",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "root_path": "",
        "query_string": b"",
        "server": ("127.0.0.1", 8000),
        "headers": [(k.lower().encode(), v.encode()) for k, v in headers.items()],
    }
    asyncio.run(server_utils.AuthenticationMiddleware(app, [KEY])(scope, receive, send))  # type: ignore[arg-type]
    return next(m["status"] for m in sent if m["type"] == "http.response.start")


def test_a_host_header_with_a_path_does_not_skip_the_api_key() -> None:
    for host in ("localhost/health?", "localhost/metrics#", "127.0.0.1:8000/ping?x="):
        status = _status("/v1/models", {"host": host})
        assert status == 401, f"Host: {host} reached /v1/models without the key ({status})"
    # The key is still required, and accepted, on /v1; /health needs none.
    assert _status("/v1/models", {"host": "localhost"}) == 401
    assert _status("/v1/models", {"host": "localhost", "authorization": f"Bearer {KEY}"}) == 200
    assert _status("/health", {"host": "localhost"}) == 200
