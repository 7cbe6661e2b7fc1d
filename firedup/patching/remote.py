"""Runs ON THE NODE, under the node's own python: `PYTHON -c <this file's text> COMMAND ARGS...`.

The text is static (never formatted); values arrive as argv. It prints one JSON object.
Only the standard library, and syntax old pythons accept (3.8+), because it runs wherever the
engine's interpreter is.

  locate PACKAGE REL...   where PACKAGE is imported from, its version (metadata beside it,
                          else any installed metadata, else a literal __version__, else
                          importing PACKAGE.version), the bytecode prefix,
                          and for each REL (a path inside the package) its path, mode and
                          whether its directory and __pycache__ are writable
  settle PATH...          for each file: sha256, whether this python compiles it, and the
                          stale bytecode removed (`__pycache__/<stem>.*.pyc` and the prefix)
  read PATH...            each file's content (base64), null when it does not exist
"""

from __future__ import annotations

import ast
import base64
import glob
import hashlib
import importlib
import importlib.util
import json
import os
import re
import sys


def _dist_version(package: str, roots: list[str]) -> tuple[str | None, str | None]:
    """The version of the distribution installed next to the package, else any installed."""
    try:
        import importlib.metadata as md
    except ImportError:  # python < 3.8
        return None, None
    wanted = re.sub(r"[-_.]+", "-", package).lower()
    for root in roots:
        parent = os.path.dirname(root)
        for dist in md.distributions(path=[parent]):
            name = dist.metadata["Name"] or ""
            if re.sub(r"[-_.]+", "-", name).lower() == wanted:
                return dist.version, f"metadata in {parent}"
    try:
        return md.version(package), "installed metadata"
    except md.PackageNotFoundError:
        return None, None


def _source_version(roots: list[str]) -> tuple[str | None, str | None]:
    """`__version__ = "..."` in the package's version module, read without importing it."""
    for root in roots:
        for name in ("_version.py", "version.py", "__init__.py"):
            path = os.path.join(root, name)
            try:
                with open(path, "rb") as fh:
                    tree = ast.parse(fh.read())
            except (OSError, SyntaxError, ValueError):
                continue
            for node in tree.body:
                if not isinstance(node, ast.Assign) or not isinstance(node.value, ast.Constant):
                    continue
                names = [t.id for t in node.targets if isinstance(t, ast.Name)]
                if "__version__" in names and isinstance(node.value.value, str):
                    return node.value.value, path
    return None, None


def _imported_version(package: str) -> tuple[str | None, str | None]:
    """Last resort (no metadata, no literal): import the version module and ask it.

    This runs the package's own code, as the server will; the sim's version is dynamic.
    """
    for name in (package + ".version", package + "._version", package):
        try:
            module = importlib.import_module(name)
        except Exception:  # any failure of foreign code only means "no answer here"
            continue
        version = getattr(module, "__version__", None)
        if isinstance(version, str):
            return version, f"{name}.__version__"
    return None, None


def _writable(path: str) -> bool:
    while path and not os.path.exists(path):
        path = os.path.dirname(path)
    return bool(path) and os.access(path, os.W_OK)


def _read(path: str) -> str | None:
    """A file's bytes as base64 (JSON carries no bytes), None when there is no such file."""
    if not os.path.isfile(path):
        return None
    with open(path, "rb") as fh:
        return base64.b64encode(fh.read()).decode("ascii")


def _file_facts(roots: list[str], rel: str) -> dict[str, object]:
    candidates = [os.path.join(root, rel) for root in roots]
    path = next((p for p in candidates if os.path.exists(p)), candidates[0])
    exists = os.path.isfile(path)
    cache = os.path.join(os.path.dirname(path), "__pycache__")
    return {
        "path": path,
        "data": _read(path),
        "mode": os.stat(path).st_mode & 0o7777 if exists else None,
        "writable": _writable(os.path.dirname(path)),
        "pycache_writable": not os.path.isdir(cache) or os.access(cache, os.W_OK),
    }


def locate(package: str, rels: list[str]) -> dict[str, object]:
    out: dict[str, object] = {
        "python": sys.executable,
        "python_version": sys.version.split()[0],
        "pycache_prefix": getattr(sys, "pycache_prefix", None),
    }
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError) as exc:
        return dict(out, found=False, error=f"{type(exc).__name__}: {exc}")
    if spec is None:
        return dict(out, found=False, error=f"No module named {package!r}")
    if spec.submodule_search_locations is None:
        return dict(out, found=False, error=f"{package} is a module, not a package")
    roots = [os.path.realpath(p) for p in spec.submodule_search_locations]
    version, source = _dist_version(package, roots)
    if version is None:
        version, source = _source_version(roots)
    if version is None:
        version, source = _imported_version(package)
    files = {rel: _file_facts(roots, rel) for rel in rels}
    return dict(out, found=True, roots=roots, version=version, version_from=source, files=files)


def _cached(path: str) -> list[str]:
    folder, name = os.path.split(os.path.abspath(path))
    stem = glob.escape(os.path.splitext(name)[0])
    dirs = [os.path.join(folder, "__pycache__")]
    if getattr(sys, "pycache_prefix", None):
        dirs.append(os.path.dirname(importlib.util.cache_from_source(os.path.abspath(path))))
    found: list[str] = []
    for d in dirs:
        found.extend(glob.glob(os.path.join(glob.escape(d), stem + ".*.pyc")))
    return sorted(found)


def _settle_one(path: str) -> dict[str, object]:
    facts: dict[str, object] = {"exists": os.path.isfile(path)}
    purged: list[str] = []
    errors: list[str] = []
    if facts["exists"]:
        with open(path, "rb") as fh:
            data = fh.read()
        facts["sha256"] = hashlib.sha256(data).hexdigest()
        if path.endswith(".py"):
            try:
                compile(data, path, "exec", dont_inherit=True)
            except (SyntaxError, ValueError) as exc:
                version = sys.version.split()[0]
                errors.append(f"does not compile under python {version}: {exc}")
    if path.endswith(".py"):
        for pyc in _cached(path):
            try:
                os.unlink(pyc)
                purged.append(pyc)
            except OSError as exc:
                errors.append(f"cannot remove {pyc}: {exc.strerror}")
    return dict(facts, purged=purged, errors=errors)


def main(argv: list[str]) -> int:
    if len(argv) >= 2 and argv[0] == "locate":
        result: dict[str, object] = locate(argv[1], argv[2:])
    elif argv and argv[0] == "settle":
        result = {path: _settle_one(path) for path in argv[1:]}
    elif argv and argv[0] == "read":
        result = {path: _read(path) for path in argv[1:]}
    else:
        sys.stderr.write("usage: locate PACKAGE REL... | settle PATH... | read PATH...\n")
        return 2
    sys.stdout.write(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
