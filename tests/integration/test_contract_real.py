"""The EAGLE-3 contract on real vLLM: holds on the patched wheel, reports the
gaps the series fixes on unpatched 0.17.1, catches the protocol-stub trap,
and discovers new calls in a newer upstream by itself."""

from __future__ import annotations

import re
import shutil
import tarfile
import tomllib
from pathlib import Path

import pytest
from vpq.contract import items as contract_items
from vpq.contract import table as contract_table
from vpq.contract import target as contract_target
from vpq.envs import contract_run
from vpq.envs import venv as envs
from vpq.source import fetch
from vpq.source import git as g
from vpq.wheels import build

from tests.integration.venv_runs import discover_at
from tests.support.paths import REPO_ROOT

KIMI = "KimiK25ForConditionalGeneration"
ALL = list(contract_items.CLAIMS)
HEADS = list(contract_items.DRAFTERS)
MLA_HEADS = ["Eagle3DeepseekV2ForCausalLM", "Eagle3DeepseekV3ForCausalLM"]
MLA_PATCH = "patches/model_executor/models/deepseek_eagle3-add-mla-eagle3-drafter.patch"
#: What the proposer requires of every EAGLE-3 head on the pin's source.
DRAFTER_ROWS = (
    "speculative registry: EAGLE-3 head",
    "isinstance(drafter, Eagle3LlamaForCausalLM | Eagle3DeepseekV2ForCausalLM)",
    "drafter.combine_hidden_states()",
    "drafter.compute_logits()",
    "drafter.embed_input_ids()",
    "drafter.forward()",
)


def discover_in_release(key: str) -> list[contract_items.Item]:
    """Discovery on the sources of a hash-pinned release (tests/reference-upstreams.toml)."""
    ref = tomllib.loads((REPO_ROOT / "tests/reference-upstreams.toml").read_text())[key]
    sdist = fetch.fetch("vllm", ref["filename"], ref["sha256"])
    with tarfile.open(sdist) as tar:

        def read(path: str) -> str:
            member = tar.extractfile(f"vllm-{ref['version']}/{path}")
            assert member is not None
            return member.read().decode()

        return contract_run.discover(read)


def test_contract_holds_on_the_patched_wheel(patched_table: contract_table.Table) -> None:
    print(patched_table.render())
    assert patched_table.gaps == []
    rows = patched_table.rows
    for item in (
        "supports_eagle3(model)",
        "model.set_aux_hidden_state_layers()",
        "model.get_eagle3_aux_hidden_state_layers()",
        "speculative gate: aux_hidden_states_supported",
    ):
        assert rows[item] == {a: "ok" for a in ALL}
    assert rows["config.media_placeholder_token_id"][KIMI] == "ok"
    assert rows["model.get_language_model()"][KIMI] == "ok"
    for item in DRAFTER_ROWS:  # the drafter side, on every claimed head
        assert rows[item] == {h: "ok" for h in HEADS}, item


def test_contract_reports_the_gaps_the_series_fixes_on_unpatched_upstream(
    upstream_table: contract_table.Table,
) -> None:
    print(upstream_table.render())
    expected = (
        {
            (item, arch, "missing")
            for item in (
                "supports_eagle3(model)",
                "model.set_aux_hidden_state_layers()",
                "model.get_eagle3_aux_hidden_state_layers()",
            )
            for arch in ALL
        }
        | {("config.image_token_index", KIMI, "missing")}
        | {("speculative gate: aux_hidden_states_supported", arch, "missing") for arch in ALL}
        # the drafter side: 0.17.1 registers no MLA head
        | {("speculative registry: EAGLE-3 head", h, "missing") for h in MLA_HEADS}
    )
    assert set(upstream_table.gaps) == expected
    rows = upstream_table.rows
    assert rows["isinstance(drafter, Eagle3LlamaForCausalLM)"] == {
        h: "n/a" if h in MLA_HEADS else "ok" for h in HEADS
    }


def test_contract_flags_a_wrapper_that_only_inherits_the_protocol(
    tmp_path: Path, deps_venv: Path
) -> None:
    """The trap: KimiK25 declares SupportsEagle3 but does not delegate; the
    protocol's stubs return None. Built from a series whose Kimi patch lacks
    the delegation hunk."""
    root = tmp_path / "repo"
    root.mkdir()
    for name in ("series", "upstream.lock"):
        shutil.copy(REPO_ROOT / name, root / name)
    shutil.copytree(REPO_ROOT / "patches", root / "patches")
    kimi = (
        root
        / "patches/model_executor/models/kimi_k25-delegate-eagle3-interface-to-language-model.patch"
    )
    text = kimi.read_text()
    hunks = [m.start() for m in re.finditer(r"^@@ ", text, re.MULTILINE)]
    assert len(hunks) == 3 and "def set_aux_hidden_state_layers" in text[hunks[2] :]
    kimi.write_text(text[: hunks[2]])
    prep = build.prepare(root)
    (res,) = build.build_wheels(root, platform="x86_64", out_dir=tmp_path / "dist", prep=prep)
    python = envs.wheel_env(tmp_path / "venv", deps_venv, res.wheel.path)
    table = contract_run.check(
        python,
        contract_run.discover(lambda p: g.git(["show", f"patched:{p}"], prep.repo).stdout.decode()),
    )
    print(table.render())
    assert table.rows["supports_eagle3(model)"][KIMI] == "ok"  # the flag alone passes...
    assert (
        table.rows["model.set_aux_hidden_state_layers()"][KIMI] == "stub"
    )  # ...the methods do not
    assert table.rows["model.get_eagle3_aux_hidden_state_layers()"][KIMI] == "stub"


def test_discovery_finds_new_calls_in_a_newer_upstream_by_itself() -> None:
    """0.18.1's runner calls get_eagle3_default_aux_hidden_state_layers(),
    which 0.17.1's does not; nothing in the tool names it."""
    names = {i.name for i in discover_in_release("vllm-0_18_1")}
    assert "get_eagle3_default_aux_hidden_state_layers" in names
    assert "get_eagle3_default_aux_hidden_state_layers" not in {
        i.name for i in discover_at("patched")
    }
    assert all(
        "get_eagle3_default_aux_hidden_state_layers" not in p.read_text()
        for p in [*contract_run.PACKAGE.glob("*.py"), Path(contract_run.__file__)]
    )


#: The runner items of the pin, with the one upstream renamed since (0.18.0).
SUCCESSORS = {"get_eagle3_aux_hidden_state_layers": "get_eagle3_default_aux_hidden_state_layers"}


@pytest.mark.parametrize(
    "key", ["vllm-0_18_1", "vllm-0_19_1", "vllm-0_20_0", "vllm-0_22_0", "vllm-0_33_0"]
)
def test_discovery_follows_both_runners_through_their_helpers_in_later_releases(key: str) -> None:
    build.prepare(REPO_ROOT)  # the pin's tree, for its items
    items = discover_in_release(key)
    pinned = {
        (i.kind, SUCCESSORS.get(i.name, i.name))
        for i in discover_at("upstream/0.17.1")
        if i.kind != "config_attr"
    }
    runner_items = {
        (i.kind, i.name) for i in items if i.kind in ("interface", "method") and "worker" in i.where
    }
    assert runner_items == {
        (k, n) for k, n in pinned if k in ("interface", "method") and n != "get_language_model"
    }
    files = {i.file for i in items if i.kind == "interface"}
    assert files == {contract_items.RUNNER, "vllm/v1/worker/gpu/spec_decode/eagle/eagle3_utils.py"}
    # The proposer's read of Kimi-K2.5's placeholder, wherever load_model lives
    # (eagle.py through 0.19.x, llm_base_proposer.py from 0.20.0).
    assert "media_placeholder_token_id" in {i.name for i in items if i.kind == "config_attr"}


def test_contract_flags_a_registered_mla_head_the_proposer_would_refuse(
    tmp_path: Path, deps_venv: Path
) -> None:
    """The drafter-side trap: the MLA head is registered and loads, but the
    proposer's EAGLE-3 type check still names only the Llama head, so
    ``propose`` would fail its assert on the first step. Built from a series
    whose MLA drafter patch keeps the registry entries and drops the type
    check's new class (same line count, so the later patches apply as they are)."""
    root = tmp_path / "repo"
    root.mkdir()
    for name in ("series", "upstream.lock"):
        shutil.copy(REPO_ROOT / name, root / name)
    shutil.copytree(REPO_ROOT / "patches", root / "patches")
    mla = root / MLA_PATCH
    text = mla.read_text()
    old = "+                self.model, (Eagle3LlamaForCausalLM, Eagle3DeepseekV2ForCausalLM)\n"
    assert text.count(old) == 1
    mla.write_text(text.replace(old, "+                self.model, (Eagle3LlamaForCausalLM,)\n"))
    prep = build.prepare(root)
    (res,) = build.build_wheels(root, platform="x86_64", out_dir=tmp_path / "dist", prep=prep)
    python = envs.wheel_env(tmp_path / "venv", deps_venv, res.wheel.path)
    read = lambda p: g.git(["show", f"patched:{p}"], prep.repo).stdout.decode()  # noqa: E731
    table = contract_run.check(
        python,
        contract_run.discover(read),
        modules=contract_target.model_modules(read(contract_items.REGISTRY)),
    )
    print(table.render())
    assert table.rows["speculative registry: EAGLE-3 head"] == {h: "ok" for h in HEADS}
    assert table.rows["isinstance(drafter, Eagle3LlamaForCausalLM)"] == {
        h: "missing" if h in MLA_HEADS else "ok" for h in HEADS
    }
    assert table.rows["drafter.combine_hidden_states()"] == {h: "ok" for h in HEADS}
    # the rebase signal: the MLA drafter's files do not hold this part
    assert not table.holds_for(["vllm/v1/spec_decode/eagle.py"])


@pytest.mark.parametrize("key", ["vllm-0_22_0", "vllm-0_33_0"])
def test_drafter_discovery_follows_the_proposer_into_its_base_module_in_later_releases(
    key: str,
) -> None:
    """From 0.22.0 eagle.py's EagleProposer is a thin subclass of
    SpecDecodeBaseProposer in llm_base_proposer.py; discovery follows it there
    and finds the same requirements of the head as on the pin."""
    items = [i for i in discover_in_release(key) if i.side == "drafter"]
    base = "vllm/v1/spec_decode/llm_base_proposer.py"
    found = {i.name for i in items if i.kind == "drafter_method" and i.file == base}
    assert {"combine_hidden_states", "compute_logits", "embed_input_ids", "forward"} <= found
    (check,) = [i for i in items if i.kind == "drafter_type"]
    assert check.file == base
    assert "vllm.model_executor.models.deepseek_eagle3.Eagle3DeepseekV2ForCausalLM" in check.values
    (registry,) = [i for i in items if i.kind == "drafter_registry"]
    assert set(HEADS) <= set(registry.values)
