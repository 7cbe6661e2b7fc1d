#!/usr/bin/env python3
"""Read real SGLang and vLLM releases and write what firedup must agree with.

For each release of the matrix: `pip download --no-deps` the wheel into a cache
(~/.cache/firedup-conformance, or $FIREDUP_CONFORMANCE_CACHE), one at a time; extract only the
server-args sources (argscan.ARG_SOURCES); read their flags by AST (firedup.releases.argscan,
the same reader preflight runs on a node); look for the log literals firedup's phase markers
and ready lines depend on in the string constants of the package; delete the wheel. Nothing
of the engine is imported.

    .venv/bin/python scripts/conformance.py            # the whole matrix -> data + docs
    .venv/bin/python scripts/conformance.py --only sglang==0.5.23 --print
    .venv/bin/python scripts/conformance.py --keep-wheels  # reuse wheels across runs

Writes firedup/releases/conformance.json (committed: the offline test and version-aware
rendering read it) and docs/engines.md (the generated table).
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from firedup.releases import argscan  # noqa: E402
from firedup.releases.conformance import (  # noqa: E402
    DATA,
    LITERALS,
    MATRIX,
    compact,
    render_table,
)

CACHE = Path(
    os.environ.get("FIREDUP_CONFORMANCE_CACHE", Path.home() / ".cache/firedup-conformance")
)
DOCS = REPO / "docs" / "engines.md"


def download(engine: str, version: str, wheels: Path) -> Path:
    """The release's wheel in the cache (downloaded unless already there)."""
    wheels.mkdir(parents=True, exist_ok=True)
    found = sorted(wheels.glob(f"{engine}-{version}-*.whl"))
    if found:
        return found[0]
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--only-binary=:all:",
            "--disable-pip-version-check",
            "-q",
            "-d",
            str(wheels),
            f"{engine}=={version}",
        ],
        check=True,
    )
    found = sorted(wheels.glob(f"{engine}-{version}-*.whl"))
    if not found:
        raise RuntimeError(f"pip download gave no wheel for {engine}=={version}")
    return found[0]


def _arg_members(names: list[str], engine: str) -> list[str]:
    prefix = f"{engine}/"
    wanted = []
    for rel in argscan.ARG_SOURCES[engine]:
        full = prefix + rel
        if rel.endswith("/"):
            wanted += [
                n
                for n in names
                if n.startswith(full) and n.endswith(".py") and "/" not in n[len(full) :]
            ]
        elif full in names:
            wanted.append(full)
    return wanted


def _constants(text: str) -> list[str]:
    """Every string constant of a module, f-string parts included."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return []
    return [
        n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)
    ]


def literals_in(zf: zipfile.ZipFile, engine: str) -> dict[str, str]:
    """needle -> the first file whose string constants contain it or one of its printf forms
    (raw text filters first)."""
    wanted = [lit for lit in LITERALS if lit.engine == engine]
    found: dict[str, str] = {}
    for name in zf.namelist():
        if not (name.startswith(f"{engine}/") and name.endswith(".py")):
            continue
        text = zf.read(name).decode("utf-8", "replace")
        maybe = [
            lit
            for lit in wanted
            if lit.needle not in found and any(f in text for f in lit.searched)
        ]
        if not maybe:
            continue
        constants = _constants(text)
        for lit in maybe:
            if any(f in c for f in lit.searched for c in constants):
                found[lit.needle] = name[len(engine) + 1 :]
    return found


def entry_points(zf: zipfile.ZipFile) -> list[str]:
    for name in zf.namelist():
        if name.endswith(".dist-info/entry_points.txt"):
            text = zf.read(name).decode()
            section = text.split("[console_scripts]", 1)[-1].split("\n[", 1)[0]
            return sorted(
                line.split("=")[0].strip() for line in section.splitlines() if "=" in line
            )
    return []


def read_release(engine: str, version: str, wheel: Path) -> dict[str, object]:
    with zipfile.ZipFile(wheel) as zf, tempfile.TemporaryDirectory() as tmp:
        members = _arg_members(zf.namelist(), engine)
        for member in members:
            zf.extract(member, tmp)
        facts = argscan.node_flags([os.path.join(tmp, engine)], engine)
        facts["literals"] = literals_in(zf, engine)
        facts["console_scripts"] = entry_points(zf)
        names = set(zf.namelist())
        facts["modules"] = sorted(
            m
            for m in (
                "vllm/entrypoints/cli/main.py",
                "vllm/entrypoints/openai/api_server.py",
                "sglang/launch_server.py",
                "sglang/cli/main.py",
            )
            if m in names
        )
    facts["version"] = version
    return facts


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", action="append", help="engine==version (repeatable)")
    parser.add_argument("--keep-wheels", action="store_true", help="do not delete wheels")
    parser.add_argument("--print", action="store_true", help="print facts, write nothing")
    args = parser.parse_args()
    wanted = (
        [tuple(o.split("==")) for o in args.only]
        if args.only
        else [(engine, version) for engine, versions in MATRIX.items() for version in versions]
    )
    raw: dict[str, dict[str, dict[str, object]]] = {}
    for engine, version in wanted:
        wheel = download(engine, version, CACHE / "wheels")
        print(f"read {engine} {version} ({wheel.stat().st_size / 1e6:.0f} MB)", file=sys.stderr)
        raw.setdefault(engine, {})[version] = read_release(engine, version, wheel)
        if not args.keep_wheels:
            wheel.unlink()
    if args.print:
        for engine, releases in raw.items():
            for version, facts in releases.items():
                print(engine, version, json.dumps({k: v for k, v in facts.items() if k != "flags"}))
        return 0
    data = compact(raw)
    DATA.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    DOCS.write_text(render_table(data))
    print(f"wrote {DATA.relative_to(REPO)} and {DOCS.relative_to(REPO)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
