"""A deployment's patches in a container: a derived image, named by the patches' hash.

The image's own files are never edited: `derived_image_name` names the base image plus the
patches (their manifests and diffs, hashed), and ops.containers builds it once per node by
running the ordinary patch engine (plan, all-or-nothing writes, .pyc purge, verification,
record) inside a container of the base image, then committing it. See docs/containers.md.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

from firedup.patching.manifest import find_patches

REPOSITORY = "localhost/firedup-patched"


def patches_digest(names: list[str], root: Path | None = None) -> str:
    """sha256 over each named patch's manifest and diff files, in the deployment's order."""
    h = hashlib.sha256()
    for patch in find_patches(names, root):
        folder = patch.source.parent
        for path in sorted(
            p for p in folder.rglob("*") if p.is_file() and "__pycache__" not in p.parts
        ):
            h.update(path.relative_to(folder).as_posix().encode() + b"\0")
            h.update(hashlib.sha256(path.read_bytes()).digest())
    return h.hexdigest()


def derived_image_name(base: str, names: list[str], root: Path | None = None) -> str:
    """`localhost/firedup-patched/<base, as a name>:<hash of base and patches>`."""
    slug = re.sub(r"[^a-z0-9._-]+", "-", base.lower()).strip("-.") or "image"
    key = hashlib.sha256(f"{base}\0{patches_digest(names, root)}".encode()).hexdigest()
    return f"{REPOSITORY}/{slug}:{key[:16]}"
