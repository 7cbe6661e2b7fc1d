"""Verify patched sources by parsing them: importing the engine would need its GPU stack."""

from __future__ import annotations

import ast

from firedup.patching.manifest import Check


def syntax_problem(path: str, source: bytes) -> str | None:
    """Why `source` is not valid Python, or None when it parses."""
    try:
        ast.parse(source, filename=path)
    except SyntaxError as exc:
        return f"{path}: line {exc.lineno}: {exc.msg}"
    except ValueError as exc:  # NUL bytes
        return f"{path}: {exc}"
    return None


def _defined_names(body: list[ast.stmt]) -> set[str]:
    names: set[str] = set()
    for node in body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return names


def check_problems(source: bytes, check: Check) -> list[str]:
    """What `check` finds missing in `source` (empty when it passes)."""
    problem = syntax_problem(check.file, source)
    if problem:
        return [problem]
    tree = ast.parse(source, filename=check.file)
    body: list[ast.stmt] = tree.body
    where = check.file
    if check.class_ is not None:
        classes = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == check.class_]
        if len(classes) != 1:
            return [f"{where}: expected one top-level class {check.class_}, found {len(classes)}"]
        body, where = classes[0].body, f"{where}: class {check.class_}"
    missing = [name for name in check.defines if name not in _defined_names(body)]
    return [f"{where} does not define {', '.join(missing)}"] if missing else []
