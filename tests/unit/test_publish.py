"""`vpq publish`: the package index, requirements.txt and constraints.txt
that a fleet installs from, with pip and uv offline, hashes enforced."""

from __future__ import annotations

import json
import zipfile
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote

import pytest
from packaging.requirements import Requirement
from packaging.version import Version
from vpq.core.files import sha256_file
from vpq.wheels import build, publish

from tests.support.fleet import pip_install, uv_bin, uv_install
from tests.unit.cli import assert_clean_error, run_cli
from tests.unit.tiny_upstream import Upstream


class _Links(HTMLParser):
    """The anchors of an HTML page: (href, data-requires-python)."""

    def __init__(self) -> None:
        super().__init__()
        self.links: list[tuple[str, str | None]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            a = dict(attrs)
            self.links.append((a["href"] or "", a.get("data-requires-python")))


def links(page: Path) -> list[tuple[str, str | None]]:
    parser = _Links()
    parser.feed(page.read_text())
    return parser.links


@pytest.fixture
def published(one_patch: Upstream) -> Path:
    """one_patch's wheel built into dist/ and published there."""
    build.build_wheels(one_patch.root)
    publish.publish(one_patch.root)
    return one_patch.root / "dist"


def _wheel(dist: Path) -> Path:
    (whl,) = dist.glob("*.whl")
    return whl


def test_every_index_link_carries_the_wheels_sha256(published: Path) -> None:
    whl = _wheel(published)
    page = published / "simple" / "vllm" / "index.html"
    ((href, _),) = links(page)
    url, _, fragment = href.partition("#")
    assert fragment == f"sha256={sha256_file(whl)}"
    assert (page.parent / unquote(url)).resolve() == whl.resolve()  # relative: the dir can move
    assert links(published / "simple" / "index.html") == [("vllm/", None)]


def test_pep691_json_lists_the_same_files_and_hashes(published: Path) -> None:
    whl = _wheel(published)
    page = json.loads((published / "simple" / "vllm" / "index.json").read_text())
    assert page["meta"] == {"api-version": "1.0"} and page["name"] == "vllm"
    assert [(f["filename"], f["hashes"]) for f in page["files"]] == [
        (whl.name, {"sha256": sha256_file(whl)})
    ]
    root = json.loads((published / "simple" / "index.json").read_text())
    assert root["projects"] == [{"name": "vllm"}]


def test_requirements_pin_the_one_version_with_every_wheels_hash(published: Path) -> None:
    whl = _wheel(published)
    text = (published / "requirements.txt").read_text()
    logical = text.replace("\\\n", " ").splitlines()
    (line,) = [ln for ln in logical if ln and not ln.startswith("#")]
    req_text, *hashes = line.split(" --hash=")
    req = Requirement(req_text.strip())
    assert req.name == "vllm" and str(req.specifier) == f"=={whl.name.split('-')[1]}"
    assert [h.strip() for h in hashes] == [f"sha256:{sha256_file(whl)}"]


def test_the_vex_document_covers_the_wheels_version_and_the_ledger(one_patch: Upstream) -> None:
    (one_patch.root / "advisories.toml").write_text(
        '[GHSA-7972-pg2x-xr59]\nseverity = "high"\nsummary = "s"\nimpact = "code-execution"\n'
        'affected = ">= 0.9"\naliases = []\nsource = ["https://osv.dev/x"]\nstatus = "open"\n'
        'mitigation = "m"\n'
    )
    build.build_wheels(one_patch.root)
    publish.publish(one_patch.root)
    dist = one_patch.root / "dist"
    doc = json.loads((dist / "vex.cdx.json").read_text())
    assert doc["metadata"]["component"]["version"] == _wheel(dist).name.split("-")[1]
    assert [(v["id"], v["analysis"]["state"]) for v in doc["vulnerabilities"]] == [
        ("GHSA-7972-pg2x-xr59", "exploitable")
    ]


@pytest.mark.parametrize("source", ["index-url", "find-links"])
def test_pip_installs_from_the_index_offline_with_hashes_required(
    published: Path, tmp_path: Path, source: str
) -> None:
    where = (
        ["--index-url", (published / "simple").as_uri()]
        if source == "index-url"
        else ["--no-index", "--find-links", str(published)]
    )
    req = str(published / "requirements.txt")
    proc = pip_install(tmp_path / "t", "--require-hashes", "--no-deps", *where, "-r", req)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (dist_info,) = (tmp_path / "t").glob("vllm-*.dist-info")
    assert "+eagle3." in dist_info.name


def _uv() -> str:
    found = uv_bin()
    if found is None:
        pytest.skip("uv is not installed (nox -s tests installs it)")
    return found


def test_uv_installs_from_the_index_offline_with_hashes_required(
    published: Path, tmp_path: Path
) -> None:
    proc = uv_install(
        _uv(), tmp_path / "t", "--require-hashes", "--no-deps",
        "--index-url", (published / "simple").as_uri(), "-r", str(published / "requirements.txt"),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert list((tmp_path / "t").glob("vllm-*+eagle3.*.dist-info"))


def _tamper(whl: Path) -> None:
    """Change one module of the wheel, keeping it a valid zip of the same name."""
    data = {}
    with zipfile.ZipFile(whl) as zf:
        data = {i.filename: zf.read(i) for i in zf.infolist()}
    data["vllm/mod.py"] += b"\nimport os  # injected\n"
    with zipfile.ZipFile(whl, "w") as zf:
        for name, body in data.items():
            zf.writestr(name, body)


def test_a_tampered_wheel_is_refused_by_pip_and_uv(published: Path, tmp_path: Path) -> None:
    _tamper(_wheel(published))
    req = str(published / "requirements.txt")
    index = ["--index-url", (published / "simple").as_uri()]
    proc = pip_install(tmp_path / "p", "--require-hashes", "--no-deps", *index, "-r", req)
    assert proc.returncode != 0 and "HASHES" in proc.stderr, proc.stdout + proc.stderr
    assert not list((tmp_path / "p").glob("vllm*"))
    proc = uv_install(_uv(), tmp_path / "u", "--require-hashes", "--no-deps", *index, "-r", req)
    assert proc.returncode != 0 and "hash" in proc.stderr.lower(), proc.stdout + proc.stderr
    assert not list((tmp_path / "u").glob("vllm*"))


def test_cli_publish_names_what_it_wrote(one_patch: Upstream) -> None:
    assert run_cli(one_patch.root, "build", "--no-contract").returncode == 0
    proc = run_cli(one_patch.root, "publish")
    assert proc.returncode == 0, proc.stderr
    dist = one_patch.root / "dist"
    for rel in ["simple/vllm/index.html", "requirements.txt", "constraints.txt", "vex.cdx.json"]:
        assert f"wrote {dist / rel}" in proc.stdout
        assert (dist / rel).stat().st_mode & 0o777 == 0o644


def test_empty_dist_gives_one_paragraph(one_patch: Upstream) -> None:
    assert_clean_error(run_cli(one_patch.root, "publish"), "holds no wheel", "build_wheel")


def test_two_versions_in_dist_give_one_paragraph(one_patch: Upstream, tmp_path: Path) -> None:
    build.build_wheels(one_patch.root)
    one_patch.commit_patch("mod/add-g.patch", {"vllm/g.py": "G = 1\n"}, "Add g")
    (res,) = build.build_wheels(one_patch.root, out_dir=tmp_path / "next")
    (one_patch.root / "dist" / res.wheel.path.name).write_bytes(res.wheel.path.read_bytes())
    assert_clean_error(run_cli(one_patch.root, "publish"), "several versions of vllm")


def test_a_renamed_wheel_gives_one_paragraph(one_patch: Upstream) -> None:
    (res,) = build.build_wheels(one_patch.root)
    res.wheel.path.rename(res.wheel.path.with_name("vllm-9.9-cp38-abi3-linux_x86_64.whl"))
    assert_clean_error(run_cli(one_patch.root, "publish"), "METADATA says vllm", "9.9")


CI_LOCK = """\
# This file was autogenerated by uv via the following command:
#    uv pip compile requirements/test.in -o requirements/test.txt
numpy==2.2.6
    # via -r requirements/test.in
torch==2.10.0+cu129
    # via
    #   -r requirements/test.in
    #   timm
protobuf==6.33.2
    # via grpcio-tools
"""


def test_ci_pins_drop_local_labels_and_skip_comments() -> None:
    assert publish.ci_pins(CI_LOCK) == {
        "numpy": Version("2.2.6"),
        "torch": Version("2.10.0"),
        "protobuf": Version("6.33.2"),
    }


def test_constraints_tighten_ranges_only_where_the_ci_pin_fits() -> None:
    requires = (
        "torch==2.10.0",
        "numpy",
        "protobuf!=6.33.2.*,>=5.29.6",  # the CI pin is outside upstream's range
        "fastapi[standard]>=0.115.0",
        'six>=1.16.0; python_version > "3.11"',
        'scipy; extra == "audio"',
    )
    got = [(str(c.requirement), c.source) for c in
           publish.constraints(requires, publish.ci_pins(CI_LOCK))]  # fmt: skip
    assert got == [
        ("torch==2.10.0", "upstream"),
        ("numpy==2.2.6", "ci"),
        ("protobuf!=6.33.2.*,>=5.29.6", "range"),
        ("fastapi>=0.115.0", "range"),  # pip refuses extras in constraints
        ('six>=1.16.0; python_version > "3.11"', "range"),
    ]
