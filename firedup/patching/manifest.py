"""Patches as data: `patches/<package>/<name>/manifest.yaml` plus the unified diff beside it.

Everything is validated when loaded, before any node is contacted: the version specifier, the
diff's syntax, and that the manifest's `files` are exactly the files the diff touches. Every
problem is a PatchError naming the manifest file and the key.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from firedup.errors import PatchError
from firedup.patching.diff import DiffSyntaxError, FilePatch, parse_diff

DEFAULT_PATCHES_DIR = Path(__file__).resolve().parent.parent.parent / "patches"
PATCHES_ENV = "FIREDUP_PATCHES"
MANIFEST = "manifest.yaml"
_NAME = r"^[A-Za-z0-9][A-Za-z0-9._-]*$"
_IDENT = r"^[A-Za-z_][A-Za-z0-9_]*$"


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Check(_Model):
    """Names a patched file must define after patching, checked by parsing (never importing)."""

    file: str
    class_: str | None = Field(default=None, alias="class")
    defines: list[str] = Field(min_length=1)

    @field_validator("defines")
    @classmethod
    def _identifiers(cls, value: list[str]) -> list[str]:
        bad = [v for v in value if not re.fullmatch(_IDENT, v)]
        if bad:
            raise ValueError(f"not Python identifiers: {', '.join(map(repr, bad))}")
        return value


class Manifest(_Model):
    name: str = Field(pattern=_NAME)
    package: str = Field(pattern=_IDENT)
    versions: str
    description: str = Field(min_length=1)
    diff: str = Field(pattern=r"^[^/]+$")
    files: list[str] = Field(min_length=1)
    verify: list[Check] = Field(default_factory=list)

    @field_validator("versions")
    @classmethod
    def _specifier(cls, value: str) -> str:
        try:
            SpecifierSet(value)
        except InvalidSpecifier:
            raise ValueError(
                f"{value!r} is not a PEP 440 version specifier (e.g. '>=0.5.9,<0.5.10')"
            ) from None
        return value

    @property
    def specifier(self) -> SpecifierSet:
        return SpecifierSet(self.versions)


@dataclass(frozen=True)
class Patch:
    manifest: Manifest
    files: tuple[FilePatch, ...]
    source: Path  # the manifest file, for messages

    @property
    def name(self) -> str:
        return self.manifest.name


def patches_dir(explicit: Path | None = None) -> Path:
    """Where patches live: an explicit path > $FIREDUP_PATCHES > patches/ in this checkout."""
    return Path(explicit or os.environ.get(PATCHES_ENV) or DEFAULT_PATCHES_DIR).expanduser()


def _read_yaml(path: Path) -> Any:
    try:
        return yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise PatchError(f"cannot read patch manifest {path}: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        raise PatchError(f"{path}: not valid YAML: {exc}".replace("\n", " ")) from None


def _validate(data: Any, path: Path) -> Manifest:
    if not isinstance(data, dict):
        raise PatchError(f"{path}: expected a mapping (name, package, versions, diff, files)")
    try:
        return Manifest.model_validate(data)
    except ValidationError as exc:
        problems = []
        for err in exc.errors():
            loc = ".".join(str(p) for p in err["loc"]) or "manifest"
            problems.append(f"{loc}: {str(err['msg']).removeprefix('Value error, ')}")
        raise PatchError(f"{path}: " + "; ".join(problems)) from None


def _check_files(manifest: Manifest, files: tuple[FilePatch, ...], path: Path) -> None:
    in_diff = {f.path for f in files}
    if in_diff != set(manifest.files):
        raise PatchError(
            f"{path}: files: lists {sorted(manifest.files)} but {manifest.diff} touches "
            f"{sorted(in_diff)}"
        )
    for rel in in_diff:
        if rel.split("/", 1)[0] != manifest.package or "/" not in rel:
            raise PatchError(f"{path}: {rel} is not inside package {manifest.package!r}")
    for check in manifest.verify:
        if check.file not in in_diff:
            raise PatchError(f"{path}: verify: {check.file} is not a file this patch touches")


def load_patch(manifest_path: Path) -> Patch:
    """Load and validate one patch directory's manifest and diff."""
    manifest = _validate(_read_yaml(manifest_path), manifest_path)
    if manifest.name != manifest_path.parent.name:
        raise PatchError(
            f"{manifest_path}: name: {manifest.name!r} must match its directory "
            f"{manifest_path.parent.name!r}"
        )
    diff_path = manifest_path.parent / manifest.diff
    try:
        data = diff_path.read_bytes()
    except OSError as exc:
        raise PatchError(
            f"{manifest_path}: diff: cannot read {diff_path}: {exc.strerror}"
        ) from None
    try:
        files = parse_diff(data)
    except DiffSyntaxError as exc:
        raise PatchError(f"{diff_path}: {exc}") from None
    _check_files(manifest, files, manifest_path)
    return Patch(manifest, files, manifest_path)


class PatchNameError(PatchError):
    """A patch name (from the inventory or the command line) that names no patch: a bad input,
    reported like an inventory error (exit 2) before anything is contacted."""

    exit_code = 2


def find_patches(names: list[str], root: Path | None = None) -> list[Patch]:
    """Load the named patches from `root` (laid out as <package>/<name>/manifest.yaml)."""
    base = patches_dir(root)
    loaded: list[Patch] = []
    for name in names:
        if not re.fullmatch(_NAME, name):
            raise PatchNameError(f"{name!r} is not a valid patch name")
        found = sorted(base.glob(f"*/{name}/{MANIFEST}"))
        if not found:
            raise PatchNameError(
                f"patch {name!r} not found: no {base}/<package>/{name}/{MANIFEST}",
                hint=f"known patches: {', '.join(known_patches(base)) or 'none'}",
            )
        if len(found) > 1:
            raise PatchError(f"patch name {name!r} is used twice: {', '.join(map(str, found))}")
        loaded.append(load_patch(found[0]))
    return loaded


def known_patches(root: Path | None = None) -> list[str]:
    return sorted(p.parent.name for p in patches_dir(root).glob(f"*/*/{MANIFEST}"))
