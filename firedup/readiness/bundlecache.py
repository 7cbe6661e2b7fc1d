"""The shipped bundles (readiness/shipping.py) kept on the operator's disk between commands.

Building a bundle (find the modules an entry needs, their shipped text, compress) costs
about 0.1 s of the operator's CPU (0.15-0.3 s with tokenize, before readiness/shipsource):
every `fab status`, `fab top` or `fab wait` paid it once before its first command went out,
a round trip of a slow link. Reading it back takes a few milliseconds. The result depends
only on firedup's own sources, so it is kept under
`$XDG_CACHE_HOME/firedup/bundles/` (default `~/.cache`), named by a digest of the entry and
every firedup source file's path, size and mtime: an edited or upgraded firedup names
another file. A cache that cannot be read or written is no error: the bundle is built.
"""

from __future__ import annotations

import hashlib
import os
import secrets
from collections.abc import Callable
from contextlib import suppress
from pathlib import Path

import firedup

PACKAGE = Path(firedup.__file__).resolve().parent


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "firedup" / "bundles"


def sources_key(entry: str, version: str) -> str:
    """A digest of `entry`, the bundle format's `version` and firedup's sources as they are
    on disk (path, size, mtime: no file is read)."""
    digest = hashlib.sha256(f"{entry}\0{version}\n".encode())
    for path in sorted(PACKAGE.rglob("*.py")):
        info = path.stat()
        rel = path.relative_to(PACKAGE)
        digest.update(f"{rel}\0{info.st_size}\0{info.st_mtime_ns}\n".encode())
    return digest.hexdigest()[:40]


def cached(entry: str, version: str, build: Callable[[], str]) -> str:
    """The bundle of `entry` from the cache, else `build()`'s (then kept for next time, in
    place of this checkout's older bundles of the same entry)."""
    where = hashlib.sha256(str(PACKAGE).encode()).hexdigest()[:12]  # one per checkout
    prefix = f"{where}-{entry}-"
    try:
        path = cache_dir() / f"{prefix}{sources_key(entry, version)}.b85"
    except OSError:  # a source vanished while listed (an upgrade under way): no cache
        return build()
    with suppress(OSError, UnicodeDecodeError):
        return path.read_text(encoding="ascii")
    text = build()
    with suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        for old in path.parent.glob(f"{prefix}*.b85"):
            old.unlink(missing_ok=True)
        tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}")
        tmp.write_text(text, encoding="ascii")
        os.replace(tmp, path)  # whole or not at all, whoever writes at the same time
    return text
