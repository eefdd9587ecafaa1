"""Differential test against upstream's own kimi_k2 tool parser (vLLM 0.20.0).

Upstream rewrote the parser's streaming path in v0.20.0 (PR #38579); our
backport must stream exactly what that parser streams. The driver
(tests/integration/test_parsers.py) fetches the hash-pinned 0.20.0 sdist
(tests/reference-upstreams.toml) and passes its path in
``VPQ_REFERENCE_SDIST``. Here its ``vllm/tool_parsers/kimi_k2_tool_parser.py``
is executed, unmodified, against the installed 0.17.1 vLLM, with upstream's
own ``partial_tag_overlap`` taken from 0.20.0's ``tool_parsers/utils.py``.

It does not import cleanly against 0.17.1 as is, for two base-API reasons
only, which are shimmed while its module body runs: it imports the ``Tool``
alias from ``abstract_tool_parser`` (0.20.0 only; used in an annotation), and
it calls ``ToolParser.__init__(tokenizer, tools)`` (0.17.1's takes the
tokenizer only). The shim base drops ``tools``, which the kimi_k2 parser
never reads. Everything the replay exercises is 0.20.0's code.

Both parsers then replay every case for k = 1..8 and must agree on content,
calls and errors, streamed and non-streamed. Where we deliberately differ,
the test says so in its name.
"""

from __future__ import annotations

import ast
import os
import tarfile
import types
from pathlib import Path

import pytest
from vllm.tool_parsers import abstract_tool_parser, utils
from vllm.tool_parsers.kimi_k2_tool_parser import KimiK2ToolParser

from tests.parsers import replay
from tests.parsers.cases import CASES, Case

KS = range(1, 9)
VERSION = "0.20.0"
PARSER = "vllm/tool_parsers/kimi_k2_tool_parser.py"
UTILS = "vllm/tool_parsers/utils.py"
#: Cases where we differ from 0.20.0 on purpose, and why.
DIFFERS = {"singular_section_marker": "0.20.0 reads only the plural section marker; we accept both"}


def _read(sdist: Path, *members: str) -> list[str]:
    """The text of ``members`` (paths inside the release tree), in one pass."""
    wanted = {f"vllm-{VERSION}/{m}": m for m in members}
    found: dict[str, str] = {}
    with tarfile.open(sdist, "r|gz") as tar:
        for info in tar:
            if info.name in wanted:
                f = tar.extractfile(info)
                assert f is not None, info.name
                found[wanted[info.name]] = f.read().decode()
                if len(found) == len(wanted):
                    break
    assert set(found) == set(members), f"{sdist} lacks {set(members) - set(found)}"
    return [found[m] for m in members]


class _ToolParserTakingTools(abstract_tool_parser.ToolParser):
    """0.17.1's ToolParser with 0.20.0's constructor signature (``tools`` ignored)."""

    def __init__(self, tokenizer, tools=None):  # type: ignore[no-untyped-def]
        super().__init__(tokenizer)


@pytest.fixture(scope="module")
def reference_parser() -> type:
    """``KimiK2ToolParser`` as vLLM 0.20.0 ships it."""
    path = os.environ.get("VPQ_REFERENCE_SDIST")
    if not path:
        pytest.fail("VPQ_REFERENCE_SDIST is not set: run via tests/integration/test_parsers.py")
    parser_src, utils_src = _read(Path(path), PARSER, UTILS)
    assert "_sent_content_idx" in parser_src, "not the re-parsing parser of PR #38579"
    (fn,) = [
        n
        for n in ast.parse(utils_src).body
        if isinstance(n, ast.FunctionDef) and n.name == "partial_tag_overlap"
    ]
    helper_ns: dict[str, object] = {}
    exec(
        compile(ast.get_source_segment(utils_src, fn) or "", f"{VERSION}:{UTILS}", "exec"),
        helper_ns,
    )

    module = types.ModuleType(f"vllm_{VERSION.replace('.', '_')}_kimi_k2_tool_parser")
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(abstract_tool_parser, "Tool", object, raising=False)
        mp.setattr(abstract_tool_parser, "ToolParser", _ToolParserTakingTools)
        mp.setattr(utils, "partial_tag_overlap", helper_ns["partial_tag_overlap"], raising=False)
        exec(compile(parser_src, f"{VERSION}:{PARSER}", "exec"), module.__dict__)
    return module.__dict__["KimiK2ToolParser"]


@pytest.mark.parametrize("k", KS)
@pytest.mark.parametrize("case", [c for c in CASES if c.name not in DIFFERS], ids=lambda c: c.name)
def test_streams_what_0_20_0_streams(tokenizer, reference_parser, case: Case, k: int) -> None:
    ids = replay.encode(tokenizer, case.text)
    ours = replay.stream(tokenizer, ids, k, tool_parser_cls=KimiK2ToolParser)
    theirs = replay.stream(tokenizer, ids, k, tool_parser_cls=reference_parser)
    assert (ours.content, ours.calls, ours.errors) == (theirs.content, theirs.calls, theirs.errors)


@pytest.mark.parametrize("case", [c for c in CASES if c.name not in DIFFERS], ids=lambda c: c.name)
def test_non_streaming_parse_equals_0_20_0(tokenizer, reference_parser, case: Case) -> None:
    ids = replay.encode(tokenizer, case.text)
    ours = replay.full(tokenizer, ids, tool_parser_cls=KimiK2ToolParser)
    theirs = replay.full(tokenizer, ids, tool_parser_cls=reference_parser)
    assert (ours.content, ours.calls) == (theirs.content, theirs.calls)


def test_adjust_request_equals_0_20_0(tokenizer, reference_parser) -> None:
    ours = KimiK2ToolParser(tokenizer).adjust_request(replay.request())
    theirs = reference_parser(tokenizer).adjust_request(replay.request())
    assert ours.skip_special_tokens is theirs.skip_special_tokens is False


@pytest.mark.parametrize("k", [1, 3, 8])
def test_differs_from_0_20_0_on_the_singular_section_marker(
    tokenizer, reference_parser, k: int
) -> None:
    """0.20.0 streams the singular-marker section as plain content; we parse its calls."""
    (case,) = [c for c in CASES if c.name == "singular_section_marker"]
    ids = replay.encode(tokenizer, case.text)
    theirs = replay.stream(tokenizer, ids, k, tool_parser_cls=reference_parser)
    ours = replay.stream(tokenizer, ids, k, tool_parser_cls=KimiK2ToolParser)
    assert theirs.calls == [] and theirs.content == case.text
    assert ours.calls == list(case.calls) and ours.content == case.content
