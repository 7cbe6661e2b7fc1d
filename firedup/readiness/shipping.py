"""Shipping the node-side log reader with the wait's command, and reading what it sends back.

The reader (firedup.readiness.nodeside) and the classifier it runs (firedup.logscan) travel
inside the command itself: their sources, zlib-compressed and base85-encoded, as one
argument to `python3 -c` with a small boot script that imports them from memory. Nothing is
installed on the node, nothing is left behind, and the node always runs the operator's own
version of the reader.
The boot script falls back to exec'ing `tail -F` (announced by a RAW marker) when the node's
python is older than 3.8 or cannot import the reader; then the operator reads the log
itself, as before. A node without python3 at all ends the stream with no marker at all.

`FrameParser` turns the stream back into states (dicts) or raw log bytes.
"""

from __future__ import annotations

import base64
import importlib.util
import json
import secrets
import sys
import threading
import zlib
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from firedup.readiness import bundlecache
from firedup.readiness.shipsource import shipped_text

ENTRY = "firedup.readiness.nodeside"  # the wait's reader
FACTS = "firedup.readiness.nodefacts"  # status's and top's facts
MAX_PRELUDE = 4096  # bytes kept while looking for the marker (login-shell chatter before it)
# What the operator keeps to itself: a module the reader's and status's bundles carry as a
# stand-in. The hints are words for the operator's screen: the node's states carry none, and
# logfeed.scan_from_json adds them from the operator's own table (the argument stays small).
# The watch ships the real table: it writes hints into its own notifications.
STAND_INS = {"firedup.logscan.hints": "HINTS = {}\n"}
LEAN = frozenset({ENTRY, FACTS})

# Imports the shipped modules from memory: SRC is {module name: (is package, source)}.
# A meta path finder and loader by duck typing: importing importlib.abc alone costs 60 ms.
FINDER = r"""
class Finder:
    def find_spec(self, name, path=None, target=None):
        if name in SRC:
            return importlib.util.spec_from_loader(name, self, is_package=SRC[name][0])
        return None
    def create_module(self, spec):
        return None
    def exec_module(self, module):
        is_pkg, text = SRC[module.__name__]
        if is_pkg:
            module.__path__ = []
        exec(compile(text, "<firedup>/" + module.__name__, "exec"), module.__dict__)
sys.meta_path.insert(0, Finder())
"""

# Runs on any python3: too old, or the reader does not import -> the plain log via tail.
BOOT = (
    r"""
import os, sys
def raw():
    sys.stdout.write("\nFIREDUP-RAW %s\n" % sys.argv[2])
    sys.stdout.flush()
    os.execvp(sys.argv[4], sys.argv[4:])
if sys.version_info < (3, 8):
    raw()
try:
    import base64, json, zlib, importlib, importlib.util
    BUNDLE = json.loads(zlib.decompress(base64.b85decode(sys.argv[1])).decode("utf-8"))
    SRC = BUNDLE["modules"]
"""
    + "\n".join("    " + line for line in FINDER.strip("\n").splitlines())
    + r"""
    entry = importlib.import_module(BUNDLE["entry"])
except Exception:
    raw()
sys.exit(entry.main(sys.argv[2:4]))
"""
)

WATCH_ENTRY = "firedup.readiness.nodewatch"
# The watch (firedup.readiness.nodewatch): its code from a file beside it (argv[1]), then
# `firedup-watch WORKDIR`. A long-lived process keeps a short argv: `ps` stays readable.
WATCH_BOOT = (
    r"""
import sys, json, zlib, importlib, importlib.util
with open(sys.argv[1], "rb") as fh:
    SRC = json.loads(zlib.decompress(fh.read()).decode("utf-8"))
"""
    + FINDER
    + r"""
from firedup.readiness import nodewatch
sys.exit(nodewatch.main(sys.argv[2:]))
"""
)


class BundleError(RuntimeError):
    """The reader would import something the node's stdlib may lack (a bug in firedup)."""


def _module_file(name: str) -> Path | None:
    try:
        spec = importlib.util.find_spec(name)
    except ModuleNotFoundError:  # `from module import name`: a name in a module, not a module
        return None
    return Path(spec.origin) if spec is not None and spec.origin else None


_BUILDING = threading.Lock()  # a fleet's waits ask at once; CPython 3.11's ast.parse is not
# safe to run in two threads at once ("AST constructor recursion depth mismatch")


def bundle(entry: str = ENTRY) -> dict[str, tuple[bool, str]]:
    """module name -> (is package, source) for `entry` (the reader, status's facts, the watch)
    and every firedup module it needs.

    Parent packages outside that closure ship empty: their __init__ may import the world."""
    with _BUILDING:
        return _bundle(entry)


@cache
def _bundle(entry: str) -> dict[str, tuple[bool, str]]:
    todo, found = [entry], dict[str, tuple[bool, str]]()
    while todo:
        name = todo.pop()
        if name in found:
            continue
        shipped = _stand_in(name) if entry in LEAN else None
        shipped = shipped or _shipped(name)
        if shipped is None:
            continue  # `from package import name` where name is not a module
        is_package, text, imports = shipped
        found[name] = (is_package, text)
        for imported in imports:
            top = imported.split(".")[0]
            if top == "firedup":
                todo.append(imported)
            elif top not in sys.stdlib_module_names and top != "__future__":
                raise BundleError(f"{name} imports {imported}, which is not in the stdlib")
    for name in list(found):
        parts = name.split(".")
        for i in range(1, len(parts)):
            found.setdefault(".".join(parts[:i]), (True, ""))
    return found


def _stand_in(name: str) -> tuple[bool, str, frozenset[str]] | None:
    return (False, STAND_INS[name], frozenset()) if name in STAND_INS else None


@cache
def _shipped(name: str) -> tuple[bool, str, frozenset[str]] | None:
    """One module as it ships (is package, text, what it imports), or None when `name` is not
    a module. Read and stripped once per process: the reader, status's facts and the watch
    share most of their modules."""
    path = _module_file(name)
    if path is None:
        return None
    source = path.read_text(encoding="utf-8")
    is_package = path.name == "__init__.py"
    package = name if is_package else name.rpartition(".")[0]
    text, imports = shipped_text(source, package)
    return is_package, text, frozenset(imports)


def watch_code() -> bytes:
    """The watch's modules, zlib-compressed JSON: the file WATCH_BOOT reads."""
    with _BUILDING:
        data = json.dumps(_bundle(WATCH_ENTRY), sort_keys=True).encode("utf-8")
    return zlib.compress(data, 9)


def bundle_arg(entry: str = ENTRY) -> str:
    with _BUILDING:
        return _bundle_arg(entry)


@cache
def _bundle_arg(entry: str) -> str:
    version = "{}.{}".format(*sys.version_info[:2])  # the operator python that built it
    return bundlecache.cached(entry, version, lambda: _build_arg(entry))


def _build_arg(entry: str) -> str:
    payload = {"entry": entry, "modules": _bundle(entry)}
    data = json.dumps(payload, sort_keys=True).encode("utf-8")
    # base85: a quarter more than the compressed bytes where base64 adds a third (2.4 KB less
    # on the wire and in the argument); its alphabet has no quote, so shlex.quote keeps it
    # whole; decoding it costs the node 2-3 ms of pure python.
    return base64.b85encode(zlib.compress(data, 9)).decode("ascii")


def reader_argv(
    options: dict[str, Any], nonce: str, tail: list[str], entry: str = ENTRY
) -> list[str]:
    """The command that runs `entry` (the reader) on the node with `options` (its main says
    which); `tail` is the fallback's argv."""
    encoded = json.dumps(options, separators=(",", ":"))
    return ["python3", "-c", BOOT, bundle_arg(entry), nonce, encoded, *tail]


def new_nonce() -> str:
    return secrets.token_hex(8)


@dataclass
class FrameParser:
    """Splits the reader's stream into states and raw log bytes.

    `mode` is None until the marker arrives, then "node" (frames) or "raw" (a plain log)."""

    nonce: str
    mode: str | None = None
    buffer: bytes = b""
    states: list[dict[str, Any]] = field(default_factory=list)

    def feed(self, chunk: bytes) -> tuple[list[dict[str, Any]], bytes]:
        """The states completed by `chunk` and, in raw mode, its log bytes."""
        self.buffer += chunk
        if self.mode is None and not self._find_marker():
            return [], b""
        if self.mode == "raw":
            raw, self.buffer = self.buffer, b""
            return [], raw
        states: list[dict[str, Any]] = []
        while True:
            head, sep, rest = self.buffer.partition(b"\n")
            if not sep:
                break
            kind, _, size = head.partition(b" ")
            if kind != b"S" or not size.isdigit():
                raise ValueError(f"unexpected frame header from the node reader: {head[:80]!r}")
            if len(rest) < int(size):
                break
            states.append(json.loads(rest[: int(size)]))
            self.buffer = rest[int(size) :]
        return states, b""

    def _find_marker(self) -> bool:
        for mode, word in (("node", b"FIREDUP-READER"), ("raw", b"FIREDUP-RAW")):
            marker = b"\n" + word + b" " + self.nonce.encode() + b"\n"
            at = self.buffer.find(marker)
            if at >= 0:
                self.mode, self.buffer = mode, self.buffer[at + len(marker) :]
                return True
        self.buffer = self.buffer[-MAX_PRELUDE:]
        return False
