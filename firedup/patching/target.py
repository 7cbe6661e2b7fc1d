"""Where a patch's package lives on the node, asked of the node's own python.

site-packages, a venv or a source checkout (as in the official SGLang images) all answer the
same `importlib.util.find_spec`, so we never guess paths. The remote side is the static
script `firedup/patching/remote.py`; values travel as argv.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from firedup.config.inventory import Deployment, HostSpec
from firedup.errors import PatchError
from firedup.node.base import Node


@cache
def _remote_script() -> str:
    return resources.files("firedup.patching").joinpath("remote.py").read_text(encoding="utf-8")


def node_env(host: HostSpec, deployment: Deployment) -> dict[str, str]:
    """The server's environment (host env, deployment env winning, as the launch script has).

    PYTHONPATH and PYTHONPYCACHEPREFIX decide which package the server imports and where its
    bytecode goes, so we must look with the same eyes.
    """
    return {**host.env, **deployment.env}


def python_argv(host: HostSpec, env: dict[str, str], *args: str) -> list[str]:
    assignments = [f"{k}={v}" for k, v in env.items()]
    # -B: looking must not leave bytecode behind (the version fallback may import).
    return ["env", *assignments, host.python, "-B", "-c", _remote_script(), *args]


@dataclass(frozen=True)
class TargetFile:
    rel: str  # as in the diff: "sglang/srt/models/kimi_k25.py"
    path: str  # absolute on the node
    data: bytes | None  # its content now; None: it does not exist
    mode: int | None
    writable: bool
    pycache_writable: bool


@dataclass(frozen=True)
class PackageTarget:
    package: str
    version: str | None
    version_from: str | None
    roots: tuple[str, ...]
    python: str
    pycache_prefix: str | None
    files: dict[str, TargetFile]


def _run_json(node: Node, argv: list[str], what: str) -> Any:
    result = node.run(argv, check=False, what=what, timeout_s=120)
    if not result.ok:
        detail = (result.err or result.out).strip().splitlines()
        raise PatchError(
            f"{what} failed on {node.name} (exit {result.exit_code}): "
            f"{detail[-1] if detail else 'no output'}",
            hint="check hosts.<name>.python in the inventory" if result.exit_code == 127 else None,
        )
    try:
        return json.loads(result.out)
    except ValueError:
        raise PatchError(f"{what} on {node.name} printed no JSON: {result.out[:200]!r}") from None


def locate(
    node: Node, host: HostSpec, env: dict[str, str], package: str, rels: list[str]
) -> PackageTarget:
    """Find `package` as the node's python imports it; `rels` are diff paths inside it."""
    inner = {rel: rel.split("/", 1)[1] for rel in rels}
    facts = _run_json(
        node, python_argv(host, env, "locate", package, *inner.values()), f"locating {package}"
    )
    if not facts.get("found"):
        raise PatchError(
            f"package {package!r} is not importable by {host.python} on {node.name}: "
            f"{facts.get('error')}",
            hint="set the host's 'python' (or PYTHONPATH in its env) to the engine's interpreter",
        )
    files = {}
    for rel, sub in inner.items():
        fact = facts["files"][sub]
        files[rel] = TargetFile(rel=rel, **{**fact, "data": _decode(fact["data"])})
    return PackageTarget(
        package=package,
        version=facts.get("version"),
        version_from=facts.get("version_from"),
        roots=tuple(facts["roots"]),
        python=str(facts.get("python")),
        pycache_prefix=facts.get("pycache_prefix"),
        files=files,
    )


def _decode(text: str | None) -> bytes | None:
    return None if text is None else base64.b64decode(text)


def read_files(
    node: Node, host: HostSpec, env: dict[str, str], paths: list[str]
) -> dict[str, bytes | None]:
    """Several files in one round trip; None for each that does not exist."""
    if not paths:
        return {}
    facts = _run_json(node, python_argv(host, env, "read", *paths), "reading files")
    return {path: _decode(facts[path]) for path in paths}


@dataclass(frozen=True)
class Settled:
    path: str
    sha256: str | None  # None: the file does not exist
    purged: tuple[str, ...]
    errors: tuple[str, ...]


def settle(node: Node, host: HostSpec, env: dict[str, str], paths: list[str]) -> list[Settled]:
    """Purge stale bytecode of `paths` and report their sha256 and whether they compile."""
    if not paths:
        return []
    facts = _run_json(node, python_argv(host, env, "settle", *paths), "purging bytecode")
    return [
        Settled(
            path=p,
            sha256=facts[p].get("sha256"),
            purged=tuple(facts[p]["purged"]),
            errors=tuple(facts[p]["errors"]),
        )
        for p in paths
    ]
