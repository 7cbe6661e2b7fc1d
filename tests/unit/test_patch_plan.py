"""Classifying patches against file contents: the pure heart of `--check` and apply."""

from __future__ import annotations

from pathlib import Path

import pytest

from firedup.errors import PatchError
from firedup.patching.manifest import Patch, find_patches
from firedup.patching.plan import plan_patches
from firedup.patching.report import PatchStatus
from firedup.patching.target import PackageTarget, TargetFile
from tests.unit.test_patch_manifest import write_patch

MOD = "/site/pkg/mod.py"
ORIGINAL = b"x = 1\n"
PATCHED = b"x = 1\ny = 2\n"
SECOND = b"--- a/pkg/mod.py\n+++ b/pkg/mod.py\n@@ -1,2 +1,3 @@\n x = 1\n y = 2\n+z = 3\n"


def target(version: str | None = "1.5", *, extra: tuple[str, ...] = ()) -> PackageTarget:
    files = {
        rel: TargetFile(rel, "/site/" + rel, None, 0o644, True, True)
        for rel in ("pkg/mod.py", *extra)
    }
    return PackageTarget("pkg", version, "test", ("/site/pkg",), "python3", None, files)


def load(tmp_path: Path, *names: str) -> list[Patch]:
    return find_patches(list(names), tmp_path)


@pytest.fixture
def p1(tmp_path: Path) -> list[Patch]:
    write_patch(tmp_path)
    return load(tmp_path, "p1")


def test_would_apply(p1: list[Patch]) -> None:
    plan = plan_patches(p1, {"pkg": target()}, {MOD: ORIGINAL})
    assert [o.status for o in plan.outcomes] == [PatchStatus.WOULD_APPLY]
    assert plan.after == {MOD: PATCHED}
    assert plan.outcomes[0].line() == "p1 (pkg 1.5): would apply"


def test_already_applied(p1: list[Patch]) -> None:
    plan = plan_patches(p1, {"pkg": target()}, {MOD: PATCHED})
    assert [o.status for o in plan.outcomes] == [PatchStatus.ALREADY_APPLIED]
    assert plan.after == {}


@pytest.mark.parametrize("version", ["0.9", "2.0", "2.0rc1"])
def test_not_needed_for_this_version(p1: list[Patch], version: str) -> None:
    plan = plan_patches(p1, {"pkg": target(version)}, {MOD: ORIGINAL})
    (outcome,) = plan.outcomes
    assert outcome.status is PatchStatus.NOT_NEEDED and plan.after == {}
    assert outcome.line() == (
        f"p1 (pkg {version}): not needed for this version: "
        f"installed {version}, patch is for >=1.0,<2"
    )


def test_conflict_names_file_and_hunk(p1: list[Patch]) -> None:
    plan = plan_patches(p1, {"pkg": target()}, {MOD: b"x = 10\n"})
    (outcome,) = plan.conflicts
    assert outcome.detail == (
        "pkg/mod.py: hunk #1 (@@ -1,1 +1,2 @@): must sit at the end of the file (its context "
        "stops there): line 1: expected b'x = 1\\n', found b'x = 10\\n'"
    )
    assert plan.after == {}


def test_a_patch_that_applies_both_ways_is_a_conflict(tmp_path: Path) -> None:
    # Context-free (-U0) hunk replacing a line with itself plus one: both directions match.
    diff = b"--- a/pkg/mod.py\n+++ b/pkg/mod.py\n@@ -1 +1 @@\n-x = 1\n+x = 1\n"
    write_patch(tmp_path, diff_bytes=diff, verify=[])
    plan = plan_patches(load(tmp_path, "p1"), {"pkg": target()}, {MOD: ORIGINAL})
    (outcome,) = plan.conflicts
    assert "cannot tell whether it is applied" in outcome.detail


def test_unknown_version_is_an_error(p1: list[Patch]) -> None:
    with pytest.raises(PatchError, match="cannot tell which version of pkg"):
        plan_patches(p1, {"pkg": target(None)}, {MOD: ORIGINAL})
    with pytest.raises(PatchError, match="not a PEP 440 version"):
        plan_patches(p1, {"pkg": target("banana")}, {MOD: ORIGINAL})


def test_verification_failure_is_an_error(tmp_path: Path) -> None:
    write_patch(tmp_path, verify=[{"file": "pkg/mod.py", "defines": ["z"]}])
    with pytest.raises(PatchError, match=r"p1 does not verify once applied: pkg/mod\.py does not"):
        plan_patches(load(tmp_path, "p1"), {"pkg": target()}, {MOD: ORIGINAL})


def test_post_image_syntax_error_is_an_error(tmp_path: Path) -> None:
    bad = b"--- a/pkg/mod.py\n+++ b/pkg/mod.py\n@@ -1 +1,2 @@\n x = 1\n+y = (\n"
    write_patch(tmp_path, diff_bytes=bad, verify=[])
    with pytest.raises(PatchError, match=r"pkg/mod\.py: line 2"):
        plan_patches(load(tmp_path, "p1"), {"pkg": target()}, {MOD: ORIGINAL})


def test_patches_chain_on_one_file_in_order(tmp_path: Path) -> None:
    write_patch(tmp_path)
    write_patch(tmp_path, "p2", diff_bytes=SECOND, verify=[])
    patches = load(tmp_path, "p1", "p2")
    plan = plan_patches(patches, {"pkg": target()}, {MOD: ORIGINAL})
    assert [o.status for o in plan.outcomes] == [PatchStatus.WOULD_APPLY] * 2
    assert plan.after == {MOD: PATCHED + b"z = 3\n"}
    # Half done earlier: the first is already there, the second still to come.
    plan = plan_patches(patches, {"pkg": target()}, {MOD: PATCHED})
    assert [o.status for o in plan.outcomes] == [
        PatchStatus.ALREADY_APPLIED,
        PatchStatus.WOULD_APPLY,
    ]


def test_new_file_patch(tmp_path: Path) -> None:
    diff = b"--- /dev/null\n+++ b/pkg/new.py\n@@ -0,0 +1 @@\n+NEW = 1\n"
    write_patch(tmp_path, diff_bytes=diff, files=["pkg/new.py"], verify=[])
    patches = load(tmp_path, "p1")
    targets = {"pkg": target(extra=("pkg/new.py",))}
    new = "/site/pkg/new.py"
    plan = plan_patches(patches, targets, {MOD: ORIGINAL, new: None})
    assert plan.after == {new: b"NEW = 1\n"}
    plan = plan_patches(patches, targets, {MOD: ORIGINAL, new: b"NEW = 1\n"})
    assert plan.outcomes[0].status is PatchStatus.ALREADY_APPLIED
