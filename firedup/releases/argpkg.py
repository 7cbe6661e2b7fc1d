"""An engine package's modules as files, for reading its code without importing it.

Stdlib only, Python 3.8 syntax (preflight ships this file to the node, after argscan.py):
dotted module names to files across the package's directories (the first portion of a
namespace package that has the file wins, as Python resolves `__path__`), parsed on demand,
with import tables (module-level and function-local imports, relative ones resolved) and
names followed through a package's re-exports.
"""

from __future__ import annotations

import ast
import contextlib
import os
from typing import Optional

FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)


def defined(tree: Optional[ast.Module], name: str) -> Optional[ast.AST]:
    """The module-level def or class `name` of a module."""
    for stmt in tree.body if tree else []:
        if isinstance(stmt, (*FUNCTIONS, ast.ClassDef)) and stmt.name == name:
            return stmt
    return None


class Package:
    """The package's modules by file, parsed on demand, with their import tables."""

    def __init__(self, dirs: list[str], name: str) -> None:
        self.dirs, self.name = dirs, name
        self.trees: dict[str, ast.Module | None] = {}
        self.texts: dict[str, str] = {}

    def file_of(self, dotted: str) -> str | None:
        if dotted != self.name and not dotted.startswith(self.name + "."):
            return None
        rel = dotted[len(self.name) + 1 :].replace(".", "/")
        for cand in [rel + ".py", rel + "/__init__.py"] if rel else ["__init__.py"]:
            for base in self.dirs:
                if os.path.isfile(os.path.join(base, cand)):
                    return cand
        return None

    def tree(self, rel: str) -> ast.Module | None:
        if rel not in self.trees:
            path = next(
                (os.path.join(b, rel) for b in self.dirs if os.path.isfile(os.path.join(b, rel))),
                None,
            )
            self.trees[rel] = None
            if path:
                with open(path, encoding="utf-8", errors="replace") as fh:
                    self.texts[rel] = fh.read()
                with contextlib.suppress(SyntaxError):
                    self.trees[rel] = ast.parse(self.texts[rel])
        return self.trees[rel]

    def dotted(self, rel: str) -> str:
        parts = rel[: -len(".py")].split("/")
        if parts[-1] == "__init__":
            parts = parts[:-1]
        return ".".join([self.name, *parts])

    def imports(self, rel: str, nodes: list[ast.stmt]) -> dict[str, str]:
        """name -> dotted target ("pkg.mod" for a module, "pkg.mod:Name" for a name)."""
        table: dict[str, str] = {}
        here = self.dotted(rel).split(".")
        if not rel.endswith("__init__.py"):
            here = here[:-1]
        for node in nodes:
            for stmt in ast.walk(node):
                if isinstance(stmt, ast.Import):
                    for alias in stmt.names:
                        table[alias.asname or alias.name.split(".")[0]] = (
                            alias.name if alias.asname else alias.name.split(".")[0]
                        )
                elif isinstance(stmt, ast.ImportFrom):
                    base = stmt.module or ""
                    if stmt.level:
                        up = here[: len(here) - stmt.level + 1]
                        base = ".".join(up + ([base] if base else []))
                    for alias in stmt.names:
                        table[alias.asname or alias.name] = base + ":" + alias.name
        return table

    def resolve(self, target: str, depth: int = 0) -> tuple[str | None, ast.AST | None]:
        """A dotted import target -> (file, its def/class node, or None for a module)."""
        module, _, name = target.partition(":")
        if depth > 6:
            return None, None
        if name:
            sub = self.file_of(module + "." + name)
            if sub:
                return sub, None
        rel = self.file_of(module)
        tree = self.tree(rel) if rel else None
        if rel is None or tree is None or not name:
            return rel, None
        found = defined(tree, name)
        if found is not None:
            return rel, found
        again = self.imports(rel, list(tree.body)).get(name)  # a name re-exported
        return self.resolve(again, depth + 1) if again else (rel, None)
