#!/usr/bin/env python3
"""Read real SGLang and vLLM releases and write what firedup must agree with.

For each release of the matrix: `pip download --no-deps` the wheel into a cache
(~/.cache/firedup-conformance, or $FIREDUP_CONFORMANCE_CACHE), one at a time; extract its python
sources; find the files that build the server's parser by following its code from the launch's
entry module (firedup.releases.argreach) and read their flags by AST (argscan: the same reader
preflight runs on a node); look for the log literals firedup's phase markers
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
import re
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from firedup.ops.releases import render  # noqa: E402
from firedup.releases import argreach, argscan  # noqa: E402
from firedup.releases.conformance import (  # noqa: E402
    DATA,
    LITERALS,
    MATRIX,
    compact,
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


def _sources(names: list[str], engine: str) -> list[str]:
    """The package's python files (the parser is found by following its code, argreach)."""
    return [n for n in names if n.startswith(f"{engine}/") and n.endswith(".py")]


def _makes_own_parser(text: str) -> bool:
    return "ArgumentParser(" in text or "add_parser(" in text


IMPORT = re.compile(
    r"^[ \t]*(?:from[ \t]+(\.*)([\w.]*)[ \t]+import[ \t]+(\([^)]*\)|[^\n#]+)"
    r"|import[ \t]+([\w., \t]+))",
    re.M,
)


def _imported(pkg: argreach.Package, rel: str, text: str) -> list[str]:
    """The package files a module imports (a quick textual read: this walks thousands)."""
    here = pkg.dotted(rel).split(".")
    if not rel.endswith("__init__.py"):
        here = here[:-1]
    dotted: list[str] = []
    for dots, module, names, plain in IMPORT.findall(text):
        if plain:
            dotted += [m.strip().split(" ")[0] for m in plain.split(",")]
            continue
        base = module
        if dots:
            up = here[: len(here) - len(dots) + 1]
            base = ".".join(up + ([module] if module else []))
        parts = base.split(".")
        dotted += [".".join(parts[:i]) for i in range(2, len(parts) + 1)]
        for name in re.findall(r"\w+", names):
            dotted.append(f"{base}.{name}")
    return [f for f in (pkg.file_of(d) for d in dotted if d) if f]


def unread_parser_files(package_dir: str, engine: str, read: list[str]) -> list[str]:
    """Files the entry modules import (transitively) that add flags to a parser they did not
    make, and that the reader does not read: each is a parser file firedup may be missing
    (tests/unit/test_conformance.py explains or refuses every one)."""
    pkg = argreach.Package([package_dir], engine)
    todo, seen, texts = list(argreach.ENTRY_MODULES[engine]), set(), {}
    while todo:
        rel = todo.pop()
        path = os.path.join(package_dir, rel)
        if rel in seen or not os.path.isfile(path):
            continue
        seen.add(rel)
        texts[rel] = Path(path).read_text(encoding="utf-8", errors="replace")
        todo += [f for f in _imported(pkg, rel, texts[rel]) if f not in seen]
    return sorted(
        rel
        for rel in seen
        if rel not in read
        and "add_argument" in texts[rel]
        and not _makes_own_parser(texts[rel])
        and argscan.scan_flags([texts[rel]])
    )


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
        for member in _sources(zf.namelist(), engine):
            zf.extract(member, tmp)
        facts = argreach.node_flags([os.path.join(tmp, engine)], engine)
        facts["unread_parser_files"] = unread_parser_files(
            os.path.join(tmp, engine),
            engine,
            list(facts["files"]),  # type: ignore[arg-type]
        )
        facts["literals"] = literals_in(zf, engine)
        facts["console_scripts"] = entry_points(zf)
        names = set(zf.namelist())
        facts["modules"] = sorted(
            m
            for m in (
                "vllm/entrypoints/cli/main.py",
                "vllm/entrypoints/openai/api_server.py",
                "vllm/entrypoints/launchers/api_server/entry.py",
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
    DOCS.write_text(render(data))
    print(f"wrote {DATA.relative_to(REPO)} and {DOCS.relative_to(REPO)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
