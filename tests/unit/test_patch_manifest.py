"""Patch manifests: validated at load, every problem one PatchError naming file and key."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from packaging.version import Version

from firedup.errors import PatchError
from firedup.patching.apply import apply_patch
from firedup.patching.manifest import find_patches, known_patches, load_patch
from firedup.patching.verify import check_problems

REPO = Path(__file__).resolve().parents[2]
KIMI = "kimi-k25-eagle3-hooks"
SIM_KIMI = REPO / "sim" / "python" / "sglang" / "srt" / "models" / "kimi_k25.py"
DIFF = b"--- a/pkg/mod.py\n+++ b/pkg/mod.py\n@@ -1 +1,2 @@\n x = 1\n+y = 2\n"


def write_patch(
    root: Path, dirname: str = "p1", diff_bytes: bytes | None = DIFF, **manifest: object
) -> Path:
    """A patch directory under root/pkg/<dirname>; keyword arguments override manifest keys."""
    name = dirname
    folder = root / "pkg" / name
    folder.mkdir(parents=True)
    data = {
        "name": name,
        "package": "pkg",
        "versions": ">=1.0,<2",
        "description": "test patch",
        "diff": f"{name}.diff",
        "files": ["pkg/mod.py"],
        "verify": [{"file": "pkg/mod.py", "defines": ["y"]}],
        **manifest,
    }
    (folder / "manifest.yaml").write_text(yaml.safe_dump(data))
    if diff_bytes is not None:
        (folder / f"{name}.diff").write_bytes(diff_bytes)
    return folder / "manifest.yaml"


def test_the_shipped_kimi_patch_loads() -> None:
    (patch,) = find_patches([KIMI])
    m = patch.manifest
    assert (m.package, m.files) == ("sglang", ["sglang/srt/models/kimi_k25.py"])
    assert m.verify[0].class_ == "KimiK25ForConditionalGeneration"
    assert KIMI in known_patches()


@pytest.mark.parametrize(
    ("version", "needed"),
    [
        ("0.5.9", True),
        ("0.5.9.post1", True),
        ("0.5.10rc0", False),
        ("0.5.10", False),
        ("0.5.8.post1", False),
        ("0.5.23", False),
    ],
)
def test_kimi_patch_version_range(version: str, needed: bool) -> None:
    (patch,) = find_patches([KIMI])
    assert patch.manifest.specifier.contains(Version(version), prereleases=True) is needed


@pytest.mark.skipif(not SIM_KIMI.exists(), reason="the simulated node's kimi_k25.py is absent")
def test_kimi_patch_applies_to_the_sim_stand_in_and_verifies() -> None:
    (patch,) = find_patches([KIMI])
    (fp,) = patch.files
    original = SIM_KIMI.read_bytes()
    check = patch.manifest.verify[0]
    assert check_problems(original, check) == [
        "sglang/srt/models/kimi_k25.py: class KimiK25ForConditionalGeneration does not define "
        "get_embed_and_head, set_embed_and_head, set_eagle3_layers_to_capture"
    ]
    patched = apply_patch(original, fp)
    assert patched is not None and check_problems(patched, check) == []
    assert apply_patch(patched, fp, reverse=True) == original


def test_a_valid_manifest(tmp_path: Path) -> None:
    patch = load_patch(write_patch(tmp_path))
    assert patch.name == "p1" and patch.files[0].path == "pkg/mod.py"


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"versions": ">=0.5.9,<<0.5.10"}, "versions: '>=0.5.9,<<0.5.10' is not a PEP 440"),
        ({"versions": "0.5.9"}, "versions: '0.5.9' is not a PEP 440"),
        ({"files": ["pkg/other.py"]}, "files: lists ['pkg/other.py'] but p1.diff touches"),
        ({"name": "other"}, "name: 'other' must match its directory 'p1'"),
        ({"package": "not a name"}, "package: String should match pattern"),
        ({"surprise": 1}, "surprise: Extra inputs are not permitted"),
        ({"verify": [{"file": "pkg/x.py", "defines": ["y"]}]}, "verify: pkg/x.py is not a file"),
        ({"verify": [{"file": "pkg/mod.py", "defines": ["no-dash"]}]}, "not Python identifiers"),
        ({"diff": "../escape.diff"}, "diff: String should match pattern"),
    ],
)
def test_bad_manifests_name_the_file_and_key(
    tmp_path: Path, changes: dict[str, object], message: str
) -> None:
    path = write_patch(tmp_path, **changes)
    with pytest.raises(PatchError) as err:
        find_patches(["p1"], tmp_path)
    assert str(path) in str(err.value)
    assert message in str(err.value)


def test_missing_diff_file(tmp_path: Path) -> None:
    write_patch(tmp_path, diff_bytes=None)
    with pytest.raises(PatchError, match=r"diff: cannot read .*p1\.diff: No such file"):
        find_patches(["p1"], tmp_path)


def test_malformed_diff_names_the_diff_and_line(tmp_path: Path) -> None:
    write_patch(tmp_path, diff_bytes=b"--- a/pkg/mod.py\n+++ b/pkg/mod.py\n@@ -1 +1 @@\n?x\n")
    with pytest.raises(PatchError, match=r"p1\.diff: line 4: unexpected line"):
        find_patches(["p1"], tmp_path)


def test_file_outside_the_package_is_refused(tmp_path: Path) -> None:
    diff = b"--- a/other/mod.py\n+++ b/other/mod.py\n@@ -1 +1,2 @@\n x = 1\n+y = 2\n"
    write_patch(tmp_path, diff_bytes=diff, files=["other/mod.py"], verify=[])
    with pytest.raises(PatchError, match="not inside package 'pkg'"):
        find_patches(["p1"], tmp_path)


def test_unknown_patch_lists_the_known_ones(tmp_path: Path) -> None:
    write_patch(tmp_path)
    with pytest.raises(PatchError) as err:
        find_patches(["nope"], tmp_path)
    assert "patch 'nope' not found" in str(err.value) and "known patches: p1" in str(err.value)


def test_yaml_errors_are_patch_errors(tmp_path: Path) -> None:
    path = write_patch(tmp_path)
    path.write_text("name: [unclosed\n")
    with pytest.raises(PatchError, match="not valid YAML"):
        find_patches(["p1"], tmp_path)


def test_patches_dir_from_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_patch(tmp_path)
    monkeypatch.setenv("FIREDUP_PATCHES", str(tmp_path))
    assert [p.name for p in find_patches(["p1"])] == ["p1"]
