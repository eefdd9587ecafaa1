"""scripts/verify_install.py as a file: one standard-library script that a
serving host copies. The claimed architectures reach it through the wheel's
manifest, written from the repository's one table
(``vpq.contract.items.CLAIMS``); its fallback copy is held equal to that
table. Its function lengths and docstrings are held by
tests/unit/test_structure.py, with the package's."""

from __future__ import annotations

import ast
import importlib.metadata as md
import json
import sys
import types
import zipfile
from pathlib import Path

import pytest
import verify_install as vi
from vpq.contract import items as contract_items
from vpq.wheels import build

from tests.support.paths import REPO_ROOT
from tests.unit.tiny_upstream import Upstream

SCRIPT = REPO_ROOT / "scripts" / "verify_install.py"
TREE = ast.parse(SCRIPT.read_text(encoding="utf-8"))
#: Imported only inside the functions that ask the installed vLLM.
SERVING_HOST_PACKAGES = {"vllm", "transformers"}


def test_the_script_needs_only_the_standard_library() -> None:
    """At module level only the standard library; vLLM and transformers only
    inside the functions that ask the installed vLLM."""
    top: set[str] = set()
    inner: set[str] = set()
    for node in ast.walk(TREE):
        if isinstance(node, ast.Import):
            names = {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = {node.module.split(".")[0]}
        else:
            continue
        (top if node.col_offset == 0 else inner).update(names)
    assert top - set(sys.stdlib_module_names) == set()
    assert inner - set(sys.stdlib_module_names) <= SERVING_HOST_PACKAGES


def test_the_fallback_copy_is_the_one_table_as_the_manifest_records_it() -> None:
    """``FALLBACK_CLAIMS`` (used only for a wheel whose manifest carries no
    claims) is ``CLAIMS`` as the build writes it into the manifest: a new
    claim without its copy here fails this test, not a serving host."""
    recorded = contract_items.manifest_claims()
    assert vi.FALLBACK_CLAIMS == recorded["eagle3_claims"]
    assert list(vi.FALLBACK_CLAIMS) == recorded["eagle3_architectures"]
    assert list(vi.FALLBACK_CLAIMS) == list(contract_items.CLAIMS)


def test_the_manifest_s_claims_are_used_and_only_their_absence_falls_back_with_a_note() -> None:
    recorded = vi.claims_from(contract_items.manifest_claims())
    assert (recorded.table, recorded.note) == (vi.FALLBACK_CLAIMS, "")
    for manifest in (None, {"eagle3_architectures": ["X"]}, {"eagle3_claims": {"X": {}}}):
        fallback = vi.claims_from(manifest)
        assert fallback.table == vi.FALLBACK_CLAIMS and "own copy" in fallback.note
    found = vi.installed_findings(vi.Installed("1.0+eagle3.x", True, fallback.note))
    assert [(f.severity, f.rule) for f in found] == [("info", "vllm"), ("note", "claims-fallback")]


def test_the_preflight_finds_each_claimed_text_model_by_its_model_type() -> None:
    """``Claims.text_archs`` (a ``text_config`` without architectures) names,
    for each claimed text model_type, the claimed architecture of that type."""
    text_archs = vi.claims_from(contract_items.manifest_claims()).text_archs
    assert set(text_archs) == {c.text_model_type for c in contract_items.CLAIMS.values()}
    for model_type, arch in text_archs.items():
        assert contract_items.CLAIMS[arch].model_type == model_type


def _installed(wheel: Path, site: Path) -> md.Distribution:
    """The wheel's dist-info, unpacked under ``site``, as importlib.metadata reads it."""
    with zipfile.ZipFile(wheel) as z:
        names = [n for n in z.namelist() if ".dist-info/" in n]
        z.extractall(site, names)
    (dist_info,) = {n.split("/")[0] for n in names}
    return md.PathDistribution(site / dist_info)


def _fake_vllm(monkeypatch: pytest.MonkeyPatch, version: str) -> None:
    """A ``vllm`` whose claimed model classes all support EAGLE-3."""

    def module(name: str, **attrs: object) -> None:
        monkeypatch.setitem(sys.modules, name, types.ModuleType(name))
        for k, v in attrs.items():
            setattr(sys.modules[name], k, v)

    module("vllm", __version__=version)
    eagle3 = lambda cls: getattr(cls, "eagle3", False)  # noqa: E731
    module("vllm.model_executor.models.interfaces", supports_eagle3=eagle3)
    for arch, claim in contract_items.CLAIMS.items():
        if claim.module not in sys.modules:
            module(claim.module)
        setattr(sys.modules[claim.module], arch, type(arch, (), {"eagle3": True}))


def test_a_new_claimed_architecture_reaches_the_install_check_through_the_manifest(
    one_patch: Upstream,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Claim one more architecture in the one table only: the built wheel's
    manifest carries it and its module, and the install check imports it
    from there. The same wheel without ``eagle3_claims`` falls back to the
    script's copy, which does not know it, and says so."""
    new = contract_items.Claim("new_arch", "new_arch", "vllm.model_executor.models.new_arch")
    claims = {**contract_items.CLAIMS, "NewArchForCausalLM": new}
    monkeypatch.setattr(contract_items, "CLAIMS", claims)
    (res,) = build.build_wheels(one_patch.root)
    dist = _installed(res.wheel.path, tmp_path / "site")
    monkeypatch.setattr(md, "distribution", lambda name: dist)
    _fake_vllm(monkeypatch, res.wheel.version)
    vi.check()
    out = capsys.readouterr().out
    assert "supports_eagle3(NewArchForCausalLM) = True" in out and "note:" not in out

    path = Path(str(dist._path)) / vi.MANIFEST  # type: ignore[attr-defined]
    manifest = json.loads(path.read_text())
    del manifest["eagle3_claims"]
    path.write_text(json.dumps(manifest))
    with pytest.raises(vi.Failed, match="manifest claims NewArchForCausalLM, which this check"):
        vi.check()
    assert "note: the installed wheel's vpq_manifest.json records no eagle3_claims" in (
        capsys.readouterr().out
    )


GID = "GHSA-7972-pg2x-xr59"


def _advised_wheel(one_patch: Upstream, tmp_path: Path) -> tuple[md.Distribution, str]:
    """one_patch's wheel built with an ``Advisory:`` trailer on its patch, its dist-info."""
    (patch,) = (one_patch.root / "patches").rglob("*.patch")
    text = patch.read_text()
    patch.write_text(text.replace("Forwarded: no\n", f"Forwarded: no\nAdvisory: {GID}\n", 1))
    (res,) = build.build_wheels(one_patch.root)
    return _installed(res.wheel.path, tmp_path / "site"), res.wheel.version


def _vex_for(version: str, path: Path) -> Path:
    from vpq.wheels import advisories, vex

    def adv(gid: str, status: advisories.Status, **keys: str) -> advisories.Advisory:
        return advisories.Advisory(
            id=gid, severity="high", summary="s", impact="dos", affected="< 9",
            aliases=(), source=("https://osv.dev/x",), status=status, **keys,  # type: ignore[arg-type]
        )  # fmt: skip

    entries = [
        adv(GID, "carried", patch="p.patch"),
        adv("GHSA-2222-2222-2222", "open", mitigation="cap n"),
    ]
    path.write_text(vex.document(entries, "vllm", version))
    return path


def test_the_install_check_prints_the_advisory_status_in_one_line_and_all_with_a_flag(
    one_patch: Upstream,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    dist, version = _advised_wheel(one_patch, tmp_path)
    monkeypatch.setattr(md, "distribution", lambda name: dist)
    _fake_vllm(monkeypatch, version)
    path = _vex_for(version, tmp_path / "vex.cdx.json")
    assert vi.main(["--vex", str(path)]) == 0
    out = capsys.readouterr().out
    (line,) = [ln for ln in out.splitlines() if "advisories:" in ln]
    assert line.strip() == (
        "advisories: 2 covering this wheel (1 fixed, 0 not affected, 1 open); "
        "--advisories lists them"
    )
    assert vi.main(["--vex", str(path), "--advisories"]) == 0
    out = capsys.readouterr().out
    assert f"  {GID} [high] fixed: fixed by the series' patch p.patch" in out
    assert "  GHSA-2222-2222-2222 [high] open: cap n" in out


def test_without_a_vex_document_the_line_names_the_patches_fixes_and_where_to_put_it(
    one_patch: Upstream, tmp_path: Path
) -> None:
    dist, version = _advised_wheel(one_patch, tmp_path)
    man = json.loads(dist.read_text(vi.MANIFEST) or "{}")
    assert vi.fixed_by_patches(man) == [GID]
    line = vi.advisory_line(version, man, None)
    assert line.startswith("advisories: this wheel's patches fix 1;") and "--vex PATH" in line
    other = vi.read_vex(_vex_for("0.17.1+eagle3.00000000", tmp_path / "other.json"))
    assert "is for vllm 0.17.1+eagle3.00000000, not this install" in (
        vi.advisory_line(version, man, other)
    )


def test_a_file_that_is_not_a_vex_document_fails_naming_it(tmp_path: Path) -> None:
    bad = tmp_path / "vex.cdx.json"
    bad.write_text('{"bomFormat": "CycloneDX"}')
    with pytest.raises(vi.Failed, match=r"vex.cdx.json: not a CycloneDX VEX document"):
        vi.find_vex(str(bad))
